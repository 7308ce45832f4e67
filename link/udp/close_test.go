package udp_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
)

// TestClose checks Close's contract: it returns nil once then ErrClosed,
// stops the receive goroutine (the leak check of pair), and a Send on a
// closed link releases its frames as ClosedDrops.
func TestClose(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		rb := &recorder{}
		a, b := pair(t, v6, udp.Options{}, udp.Options{}, nil, rb)
		if err := a.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := a.Close(); err != udp.ErrClosed {
			t.Fatalf("second Close: %v, want ErrClosed", err)
		}
		tr := &tracker{}
		a.Send([]*link.Buf{tr.add(frame(a, b, 0, 64)), tr.add(frame(a, b, 1, 64))})
		if s := a.Stats(); s.ClosedDrops != 2 || s.TxFrames != 2 || s.SentFrames != 0 {
			t.Errorf("stats after Send on a closed link: %+v", s)
		}
		b.Close()
		if rb.count() != 0 {
			t.Error("a closed link sent frames")
		}
		tr.checkReleased(t)
		// The receive goroutine has done its work when Close returns; give
		// it a moment to be gone from the scheduler.
		waitFor(t, "the receive goroutines to exit", func() bool { return len(packageStacks()) == 0 })
	}
}

// guard is a dispatcher that counts Deliver calls that start after the
// test set closed (right after Close returned).
type guard struct {
	closed atomic.Bool
	late   atomic.Int64
	n      atomic.Int64
}

func (g *guard) Deliver(bufs []*link.Buf) {
	if g.closed.Load() {
		g.late.Add(1)
	}
	g.n.Add(int64(len(bufs)))
	for _, b := range bufs {
		b.Release()
	}
}

// TestNoDeliverAfterClose closes a link while frames pour in and checks
// that no Deliver starts after Close returns, and that the sender, which
// goes on sending into the closed socket's port, releases everything.
func TestNoDeliverAfterClose(t *testing.T) {
	for round := range 10 {
		g := &guard{}
		a, b := pair(t, round%2 == 1, udp.Options{}, udp.Options{}, nil, g)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						a.Send([]*link.Buf{frame(a, b, 0, 1024), frame(a, b, 1, 1024)})
						runtime.Gosched()
					}
				}
			})
		}
		waitFor(t, "traffic", func() bool { return g.n.Load() > 100 })
		b.Close()
		g.closed.Store(true)
		time.Sleep(2 * time.Millisecond)
		close(stop)
		wg.Wait()
		a.Close()
		if n := g.late.Load(); n > 0 {
			t.Fatalf("round %d: %d Deliver calls started after Close returned", round, n)
		}
		txBalance(t, a)
		rxBalance(t, b)
	}
}

// TestCloseWhileSending closes a link while other goroutines send on it:
// every frame is released exactly once and counted once.
func TestCloseWhileSending(t *testing.T) {
	for round := range 10 {
		a, b := pair(t, false, udp.Options{Batch: 8}, udp.Options{}, nil, &recorder{})
		tr := &tracker{}
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				for i := range 200 {
					bufs := make([]*link.Buf, 0, 20)
					for k := range 20 {
						bufs = append(bufs, tr.add(frame(a, b, uint32(g<<16|i*20+k), 512)))
					}
					a.Send(bufs)
				}
			})
		}
		time.Sleep(time.Duration(round) * 100 * time.Microsecond)
		a.Close()
		wg.Wait()
		b.Close()
		txBalance(t, a)
		if s := a.Stats(); s.TxFrames != 3*200*20 {
			t.Fatalf("TxFrames %d", s.TxFrames)
		}
		tr.checkReleased(t)
	}
}

// TestUnattached checks that frames that arrive before Attach, or after
// Attach(nil), are dropped and counted, and the ones in between delivered.
func TestUnattached(t *testing.T) {
	a, b := pair(t, false, udp.Options{}, udp.Options{}, nil, nil)
	rb := &recorder{}
	for i, d := range []link.Dispatcher{nil, rb, nil} {
		b.Attach(d)
		a.Send([]*link.Buf{frame(a, b, uint32(i), 64)})
		waitFor(t, "arrival", func() bool { s := b.Stats(); return s.RawRx+s.SocketRx == uint64(i+1) })
	}
	if s := b.Stats(); s.Unattached != 2 || s.RxFrames != 1 || rb.count() != 1 || rb.indices()[0] != 1 {
		t.Errorf("stats %+v, delivered %v: want frame 1 delivered, 2 unattached", s, rb.indices())
	}
	rxBalance(t, b)
}
