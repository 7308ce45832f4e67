package udp_test

import (
	"math"
	"slices"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
)

// sendWaiting sends frames 0..n-1 from a to b in batches, waiting after
// each batch until b has taken every frame a sent, so that the order in
// which b receives is the send order (loopback may reorder datagrams of
// different system calls when the sender moves between CPUs).
func sendWaiting(t *testing.T, a, b *udp.Link, n, batch int) {
	t.Helper()
	bufs := make([]*link.Buf, 0, batch)
	for i := range n {
		bufs = append(bufs, frame(a, b, uint32(i), 64))
		if len(bufs) == batch || i == n-1 {
			a.Send(bufs)
			bufs = bufs[:0]
			waitFor(t, "batch", func() bool {
				s := b.Stats()
				return s.RawRx+s.SocketRx == a.Stats().SentFrames
			})
		}
	}
}

// TestLoss checks Faults.Loss and Faults.RxLoss: the drop counters match
// the frames missing, the rate is plausible, the same seed loses the same
// frames again (SetFaults re-seeds), and another seed loses others.
func TestLoss(t *testing.T) {
	const n, p = 2000, 0.1
	for _, rx := range []bool{false, true} {
		name := map[bool]string{false: "tx", true: "rx"}[rx]
		t.Run(name, func(t *testing.T) {
			rb := &recorder{}
			a, b := pair(t, false, udp.Options{Raw: udp.RawOff}, udp.Options{Raw: udp.RawOff}, nil, rb)
			lossy, f := a, udp.Faults{Seed: 42, Loss: p}
			if rx {
				lossy, f = b, udp.Faults{Seed: 42, RxLoss: p}
			}
			run := func(f udp.Faults) []uint32 {
				before, got := lossy.Stats(), rb.count()
				if err := lossy.SetFaults(f); err != nil {
					t.Fatal(err)
				}
				sendWaiting(t, a, b, n, 50)
				after := lossy.Stats()
				dropped := after.Dropped - before.Dropped + after.RxDropped - before.RxDropped
				idx := rb.indices()[got:]
				if int(dropped)+len(idx) != n {
					t.Fatalf("%d dropped + %d received != %d sent", dropped, len(idx), n)
				}
				// 10% of 2000: mean 200, standard deviation 13.4.
				if math.Abs(float64(dropped)-n*p) > 6*math.Sqrt(n*p*(1-p)) {
					t.Fatalf("%d of %d frames lost at p=%v", dropped, n, p)
				}
				return idx
			}
			first := run(f)
			again := run(f)
			if !slices.Equal(first, again) {
				t.Error("the same seed lost different frames")
			}
			f.Seed++
			if other := run(f); slices.Equal(first, other) {
				t.Error("another seed lost the same frames")
			}
			if err := lossy.SetFaults(udp.Faults{}); err != nil {
				t.Fatal(err)
			}
			before := rb.count()
			sendWaiting(t, a, b, 100, 50)
			if got := rb.count() - before; got != 100 {
				t.Errorf("after SetFaults(Faults{}), %d of 100 frames arrived", got)
			}
			txBalance(t, a)
			rxBalance(t, b)
		})
	}
}

func TestSetFaultsValidation(t *testing.T) {
	a, _ := pair(t, false, udp.Options{}, udp.Options{}, nil, nil)
	for _, f := range []udp.Faults{{Loss: -0.1}, {Loss: 1.1}, {RxLoss: math.NaN()}} {
		if err := a.SetFaults(f); err == nil {
			t.Errorf("SetFaults(%+v) accepted", f)
		}
	}
	if _, err := udp.Open(udp.Options{Addr: v4a, Port: 1, Faults: udp.Faults{Loss: 2}}); err == nil {
		t.Error("Open accepted Loss 2")
	}
	a.Close()
	if err := a.SetFaults(udp.Faults{}); err != udp.ErrClosed {
		t.Errorf("SetFaults after Close: %v, want ErrClosed", err)
	}
}
