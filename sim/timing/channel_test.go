package timing

import (
	"math/rand/v2"
	"testing"
)

func TestChannelFillsGaps(t *testing.T) {
	c, err := NewChannel(1e12) // 1 byte per ps: durations equal bytes
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		now, ready, dur int64
		wantEnd         int64
	}{
		{0, 100, 50, 150},   // [100,150)
		{0, 0, 30, 30},      // fits before: [0,30)
		{0, 80, 40, 170},    // [80,100) then [150,170)
		{0, 0, 500, 620},    // [30,80) then [170,620)
		{0, 700, 10, 710},   // after a gap: [700,710)
		{650, 650, 60, 720}, // forgets [0,620); [650,700) then [710,720)
	}
	for i, s := range steps {
		if got := c.Reserve(s.now, s.ready, s.dur, int(s.dur)); got != s.wantEnd {
			t.Fatalf("step %d: Reserve(%d, %d, %d) ends at %d, want %d (busy %v)", i, s.now, s.ready, s.dur, got, s.wantEnd, c.busy)
		}
	}
	if want := []span{{650, 720}}; len(c.busy) != 1 || c.busy[0] != want[0] {
		t.Fatalf("busy = %v, want %v", c.busy, want)
	}
	st := c.Stats()
	if st.Transfers != 6 || st.BusyPs != 50+30+40+500+10+60 || st.Bytes != uint64(st.BusyPs) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestChannelTransferPs(t *testing.T) {
	c, _ := NewChannel(31_507_692_308) // PCIe Gen4 x16
	for _, tc := range []struct {
		n    int
		want int64
	}{
		{0, 0},
		{24, 762},      // 24 / 31.5077 GB/s = 761.7 ps
		{4416, 140157}, // a 4 KiB read's completions: 140.1563 ns
	} {
		if got := c.TransferPs(tc.n); got != tc.want {
			t.Errorf("TransferPs(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if _, err := NewChannel(0); err == nil {
		t.Error("NewChannel(0) succeeded")
	}
}

func TestChannelNoAllocSteadyState(t *testing.T) {
	c, _ := NewChannel(1e10)
	var now int64
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1000
		c.Reserve(now, now+500, 700, 7)
		c.Reserve(now, now, 300, 3)
	})
	if allocs != 0 {
		t.Fatalf("Reserve allocated %.1f times, want 0", allocs)
	}
}

// TestChannelMatchesTimeline books random transfers on a channel and on a
// picosecond timeline that remembers everything, where a transfer takes
// the free picoseconds from its ready time on, one by one: each must end
// at the same time, whether it fills gaps or goes after everything
// booked.
func TestChannelMatchesTimeline(t *testing.T) {
	c, _ := NewChannel(1e12)
	r := rand.New(rand.NewPCG(7, 11))
	const horizon = 1 << 16
	var busy [horizon]bool
	now := int64(0)
	for i := range 3000 {
		now += r.Int64N(12) // about as much time as the transfers take
		ready := now + r.Int64N(40)
		if r.IntN(4) == 0 {
			ready = now // often ready at once, behind what is booked
		}
		dur := r.Int64N(12)
		want := ready
		for left, p := dur, ready; left > 0; p++ {
			if p >= horizon {
				t.Fatalf("step %d: the timeline is too short", i)
			}
			if !busy[p] {
				busy[p] = true
				left--
				want = p + 1
			}
		}
		if got := c.Reserve(now, ready, dur, int(dur)); got != want {
			t.Fatalf("step %d: Reserve(%d, %d, %d) ends at %d, want %d", i, now, ready, dur, got, want)
		}
	}
}
