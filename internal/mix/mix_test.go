package mix

import "testing"

// TestMix64 pins SplitMix64's outputs for the first seeds of its
// reference generator (state += 0x9e3779b97f4a7c15, then the finalizer).
func TestMix64(t *testing.T) {
	const golden = 0x9e3779b97f4a7c15
	for _, tc := range []struct {
		n    uint64
		want uint64
	}{{1, 0xe220a8397b1dcdaf}, {2, 0x6e789e6aa1b965f4}, {3, 0x06c45d188009454f}} {
		if got := Mix64(tc.n * golden); got != tc.want {
			t.Errorf("Mix64(%d × golden) = %#x, want %#x", tc.n, got, tc.want)
		}
	}
}
