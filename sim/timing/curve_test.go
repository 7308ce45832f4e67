package timing

import (
	"testing"

	"github.com/rnic/rnic/sim"
)

func TestCurvePCIeBench(t *testing.T) {
	c, err := NewCurve(PCIeBenchXeonE52630v4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		want sim.Time
	}{
		{1, 546},     // flat below the first point
		{16, 546},    // "546 ns for ≤16 B"
		{64, 546},    // measured
		{2048, 1133}, // measured: "1133 ns for 2 KiB"
		{384, 666},   // halfway between 256 (626) and 512 (706)
		{1792, 1062}, // 986 + 147×272/528 = 1061.73 → rounded up
		{4096, 1704}, // extrapolated: 1133 + 147×2048/528 = 1703.18 → 1704
	} {
		if got := c.Latency(tc.n); got != tc.want {
			t.Errorf("Latency(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestCurveInvalid(t *testing.T) {
	for name, pts := range map[string][]Point{
		"empty":          nil,
		"zero bytes":     {{Bytes: 0, Ns: 1}},
		"zero ns":        {{Bytes: 1, Ns: 0}},
		"not increasing": {{Bytes: 64, Ns: 1}, {Bytes: 64, Ns: 2}},
	} {
		if _, err := NewCurve(pts); err == nil {
			t.Errorf("%s: NewCurve accepted %v", name, pts)
		}
	}
}
