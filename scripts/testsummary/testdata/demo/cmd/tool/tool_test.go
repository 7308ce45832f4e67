package tool

import "testing"

func TestOK(t *testing.T) {}

func TestProvider(t *testing.T) {
	t.Skip("skipped: no <infiniband/verbs.h> to build the provider against; Debian: apt-get install libibverbs-dev")
}

func TestRDMACM(t *testing.T) {
	t.Skip("skipped: no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev")
}

func TestSlurm(t *testing.T) {
	t.Skipf("slurm-test: skipped: no slurmctld\nslurm-test: apt-get install slurm-wlm munge")
}

func TestPerftest(t *testing.T) {
	for _, p := range []string{"ib_write_bw", "ib_read_bw"} {
		t.Run(p, func(t *testing.T) { t.Skipf("skipped: no %s; Debian: apt-get install perftest", p) })
	}
}
