package perf

import (
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/profile"
)

func mustProfile(t testing.TB, name string) *profile.HardwareProfile {
	t.Helper()
	p, err := profile.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSmoke(t *testing.T) {
	p := mustProfile(t, "cx6")
	for _, tc := range []Spec{
		{Test: WriteLat, Size: 8, Iters: 200, Warmup: 20},
		{Test: SendLat, Size: 8, Iters: 200, Warmup: 20},
		{Test: ReadLat, Size: 8, Iters: 200, Warmup: 20},
		{Test: WriteBW, Size: 65536, Iters: 2000, Warmup: 200},
		{Test: ReadBW, Size: 65536, Iters: 2000, Warmup: 200},
		{Test: SendBW, Size: 65536, Iters: 2000, Warmup: 200},
		{Test: AtomicBW, Iters: 2000, Warmup: 200},
		{Test: WriteBW, Size: 64, Iters: 20000, Warmup: 2000, QPs: 8},
		{Test: WriteBW, Size: 64, Iters: 20000, Warmup: 2000, QPs: 32, Threads: 8, CQMod: 16},
		{Test: ReadBW, Size: 64, Iters: 20000, Warmup: 2000, QPs: 32, Threads: 8, CQMod: 16},
	} {
		res, err := Run(p, tc)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		t.Logf("%s %dB qps=%d: %.2f Gb/s %.2f Mops lat min %v avg %.0f ns p50 %d; errors %d events %d; client qpc %v/%v mtt miss %v pcie %.2f/%.2f units %.2f",
			tc.Test, res.Spec.Size, res.Spec.QPs, res.Gbps, res.Mops, res.LatMin, res.LatAvg, res.Lat.Quantile(0.5), res.Errors, res.Events,
			res.Client.QPCHit, res.Client.QPCMiss, res.Client.MTTMiss, res.Client.PCIeUtilToHost, res.Client.PCIeUtilToDevice, res.Client.UnitUtil)
	}
}

func TestBreakdownCX6(t *testing.T) {
	st, err := Breakdown(mustProfile(t, "cx6"), 8)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteBreakdown(&b, st)
	t.Log("\n" + b.String())
}
