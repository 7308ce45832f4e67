package timing

import (
	"testing"

	"github.com/rnic/rnic/sim"
)

func TestWireBytes(t *testing.T) {
	for _, tc := range []struct {
		ip   int
		vlan bool
		want int
	}{
		{1024, false, 8 + 14 + 1024 + 4 + 12}, // 1062
		{64, false, 102},
		{20, false, 8 + 64 + 12}, // padded to the 64-byte minimum frame
		{1024, true, 1066},
	} {
		if got := WireBytes(tc.ip, tc.vlan); got != tc.want {
			t.Errorf("WireBytes(%d, %v) = %d, want %d", tc.ip, tc.vlan, got, tc.want)
		}
	}
}

func TestWireTiming(t *testing.T) {
	w, err := NewWire(WireConfig{RateGbps: 100, Propagation: 500})
	if err != nil {
		t.Fatal(err)
	}
	// 1062 B × 8 bit / 100 Gb/s = 84.96 ns → done at 85 ns, plus 500 ns.
	if done, arrive := w.Send(0, 1024); done != 85 || arrive != 585 {
		t.Fatalf("1024 B: done %v arrive %v, want 85ns 585ns", done, arrive)
	}
	// 100 back-to-back 64 B packets take 100 × 8.16 ns = 816 ns exactly:
	// the picosecond clock does not round each frame up.
	w, _ = NewWire(WireConfig{RateGbps: 100})
	var done sim.Time
	for range 100 {
		done, _ = w.Send(0, 64)
	}
	if done != 816 {
		t.Fatalf("100 × 64 B done at %v, want 816ns", done)
	}
	st := w.Stats()
	if st.Frames != 100 || st.WireBytes != 10200 || st.IPBytes != 6400 || st.BusyPs != 816000 {
		t.Fatalf("stats %+v", st)
	}
	// A frame sent after the port went idle starts at once.
	if done, _ := w.Send(2000, 64); done != 2009 {
		t.Fatalf("idle port: done %v, want 2009ns (8.16 ns rounded up)", done)
	}
	for _, bad := range []WireConfig{{RateGbps: 0}, {RateGbps: -1}, {RateGbps: 100, Propagation: -1}} {
		if _, err := NewWire(bad); err == nil {
			t.Errorf("NewWire(%+v) succeeded", bad)
		}
	}
}
