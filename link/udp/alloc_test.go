package udp_test

import (
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
)

// signal is a dispatcher that releases frames and tells the test, through
// a channel (which does not allocate), when want frames have come.
type signal struct {
	n, want int
	done    chan struct{}
}

func (s *signal) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		b.Release()
	}
	s.n += len(bufs) // one receive goroutine per link: no lock needed
	if s.n >= s.want {
		s.n -= s.want
		select {
		case s.done <- struct{}{}:
		default: // with loss nobody waits
		}
	}
}

// TestZeroAllocs checks that a round of 32 frames, from link.Get on the
// sender to Release in the receiver's dispatcher, allocates nothing in
// steady state: Send, sendmmsg, recvmmsg, the header rebuild, GSO and GRO.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops buffers at random under -race")
	}
	tests := []struct {
		name string
		v6   bool
		o    udp.Options
	}{
		{"v4/rebuilt", false, udp.Options{Raw: udp.RawOff}},
		{"v4/raw", false, udp.Options{}},
		{"v4/loss", false, udp.Options{Raw: udp.RawOff, Faults: udp.Faults{Seed: 1, Loss: 0.5}}},
		{"v6/gso+gro", true, udp.Options{}},
		{"v6/plain", true, udp.Options{GSO: udp.Off, GRO: udp.Off}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const batch = 32
			sig := &signal{want: batch, done: make(chan struct{}, 1)}
			if tt.o.Faults.Loss > 0 {
				sig.want = 1 // something arrives; the test only counts allocations
			}
			a, b := pair(t, tt.v6, tt.o, udp.Options{Raw: tt.o.Raw, GSO: tt.o.GSO, GRO: tt.o.GRO}, nil, sig)
			if tt.name == "v4/raw" && !b.ICRCVerified() {
				t.Skip("raw receive not permitted")
			}
			tmpl := frame(a, b, 0, 4096)
			defer tmpl.Release()
			bufs := make([]*link.Buf, batch)
			round := func() {
				for i := range bufs {
					bufs[i] = link.Get(tmpl.Len())
					copy(bufs[i].Bytes(), tmpl.Bytes())
				}
				a.Send(bufs)
				if tt.o.Faults.Loss == 0 {
					<-sig.done
				}
			}
			for range 50 { // warm the pools
				round()
			}
			allocs := testing.AllocsPerRun(200, round)
			t.Logf("%v allocations per round of %d frames; stats a %+v", allocs, batch, a.Stats())
			if allocs != 0 {
				t.Errorf("%v allocations per round of %d frames, want 0", allocs, batch)
			}
		})
	}
}
