package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDualStack runs provider/tests/dualstack.c (issue 26) on rnic's
// librdmacm.so.1 against three NICs of one "rnic nic up": two IPv4 ones
// and, where the host has IPv6 loopback, one on ::1. It checks that each
// option of rdma_set_option takes effect as on Linux or is refused with
// Linux's errno: a dual-stack server ([::]:P with AFONLY beside
// 0.0.0.0:P, each taking its family's connections; without AFONLY [::]
// covers IPv4 and 0.0.0.0 may not bind), REUSEADDR, TOS and ACK_TIMEOUT
// reaching both QPs, RDMA_OPTION_IB_PATH, and the length, level and
// state checks.
func TestDualStack(t *testing.T) {
	lib := buildProvider(t)
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		t.Skip("skipped: no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev")
	}
	if _, err := os.Stat("/usr/include/infiniband/sa.h"); err != nil {
		t.Skip("skipped: no <infiniband/sa.h> to build the test against; Debian: apt-get install libibverbs-dev")
	}
	bin := filepath.Join(t.TempDir(), "dualstack")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-o", bin, "../../provider/tests/dualstack.c", "-L"+lib,
		"-l:librdmacm.so.1", "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	t.Setenv("RNIC_RUN_DIR", t.TempDir())
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	// Addresses no other test of the repository uses; ::1 only if the
	// host has IPv6 loopback (the IPv6 connection is left out otherwise).
	addrs := []string{"--addr", "127.0.3.1", "--addr", "127.0.3.2"}
	v6 := "::1"
	if c, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		t.Logf("no IPv6 loopback (%v): the IPv6 connection is left out", err)
		v6 = "-"
	} else {
		c.Close()
		addrs = append(addrs, "--addr", v6)
	}
	if out, err := nicCmd(t, append([]string{"up"}, addrs...)...); err != nil {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "127.0.3.1", "127.0.3.2", v6, "7800")
	c.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	out, err := c.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "\nok\n") {
		t.Fatalf("dualstack: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
