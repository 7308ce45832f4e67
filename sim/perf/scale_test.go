package perf

import (
	"os"
	"testing"
)

// TestQPScaling prints Mops of 64-byte WRITEs and READs as the number of
// QPs grows (RNIC_SCALE=1; slow).
func TestQPScaling(t *testing.T) {
	if os.Getenv("RNIC_SCALE") == "" {
		t.Skip("set RNIC_SCALE=1")
	}
	p := mustProfile(t, "cx6")
	for _, qps := range []int{32, 256, 1024, 4096} {
		for _, test := range []Test{WriteBW, ReadBW} {
			iters := max(200, 400000/qps)
			res, err := Run(p, Spec{Test: test, Size: 64, QPs: qps, Iters: iters, Warmup: iters / 5, TxDepth: 32, Threads: 16, CQMod: 8, Metadata: true})
			if err != nil {
				t.Fatal(err)
			}
			c, s := res.Client, res.Server
			t.Logf("%s qps=%d: %.1f Mops; client qpc hit %.2f units %.2f stall %v; server qpc hit %.2f units %.2f stall %v; pcie c %.2f/%.2f s %.2f/%.2f",
				test, qps, res.Mops, c.QPCHit/(c.QPCHit+c.QPCMiss), c.UnitUtil, c.MissStallNs, s.QPCHit/(s.QPCHit+s.QPCMiss), s.UnitUtil, s.MissStallNs,
				c.PCIeUtilToHost, c.PCIeUtilToDevice, s.PCIeUtilToHost, s.PCIeUtilToDevice)
		}
	}
}
