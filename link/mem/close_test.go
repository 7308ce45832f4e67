package mem_test

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

func TestSendOnClosedPort(t *testing.T) {
	rb := &recorder{}
	a, b := pipe(t, mem.Faults{}, mem.Faults{}, &recorder{}, rb)
	a.Close()
	tr := newTracker()
	sendEach(a, tr, v4b, 10, 4, 64)
	if s := a.Stats(); s.ClosedDrops != 10 || s.TxFrames != 10 {
		t.Errorf("stats %+v, want 10 frames sent and 10 ClosedDrops", s)
	}
	if rb.count() != 0 {
		t.Error("a closed port delivered frames")
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

func TestSendToClosedPort(t *testing.T) {
	rb := &recorder{}
	a, b := pipe(t, mem.Faults{}, mem.Faults{}, &recorder{}, rb)
	b.Close()
	tr := newTracker()
	sendEach(a, tr, v4b, 10, 4, 64)
	if s := a.Stats(); s.NoRoute != 10 {
		t.Errorf("NoRoute = %d, want 10", s.NoRoute)
	}
	if rb.count() != 0 {
		t.Error("frames delivered to a closed port")
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

func TestUnattached(t *testing.T) {
	checkGoroutines(t)
	a, b, err := mem.Pipe(v4a, v4b, mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	tr := newTracker()
	rb := &recorder{}
	steps := []struct {
		attach     link.Dispatcher
		unattached uint64 // in all so far
		delivered  int
	}{
		{nil, 5, 0},
		{rb, 5, 5},
		{nil, 10, 5},
	}
	for i, s := range steps {
		b.Attach(s.attach)
		sendEach(a, tr, v4b, 5, 2, 64)
		if got := a.Stats().Unattached; got != s.unattached {
			t.Errorf("step %d: Unattached = %d, want %d", i, got, s.unattached)
		}
		if got := rb.count(); got != s.delivered {
			t.Errorf("step %d: delivered %d, want %d", i, got, s.delivered)
		}
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

// guard is a dispatcher that fails the test if a Deliver starts after the
// test set closed (right after Close returned).
type guard struct {
	closed atomic.Bool
	late   atomic.Int64
}

func (g *guard) Deliver(bufs []*link.Buf) {
	if g.closed.Load() {
		g.late.Add(1)
	}
	for _, b := range bufs {
		b.Release()
	}
}

func TestNoDeliverAfterClose(t *testing.T) {
	for _, f := range []mem.Faults{{}, {Delay: 20 * time.Microsecond, Jitter: 50 * time.Microsecond}} {
		for round := range 10 {
			g := &guard{}
			a, b := pipe(t, f, mem.Faults{}, &recorder{}, g)
			tr := newTracker()
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							b := link.Get(64)
							fill(b.Bytes(), v4b, 0, 20)
							a.Send([]*link.Buf{b})
							runtime.Gosched() // leave the test goroutine some CPU
						}
					}
				})
			}
			time.Sleep(200 * time.Microsecond)
			b.Close()
			g.closed.Store(true)
			time.Sleep(200 * time.Microsecond)
			close(stop)
			wg.Wait()
			a.Close()
			if n := g.late.Load(); n > 0 {
				t.Fatalf("faults %+v round %d: %d Deliver calls started after Close returned", f, round, n)
			}
			balance(t, a, b)
			tr.checkReleased(t)
		}
	}
}

// TestCloseStopsDelayLine checks that Close releases queued frames and
// stops the port's goroutine (and that the leak check sees it before).
func TestCloseStopsDelayLine(t *testing.T) {
	checkGoroutines(t)
	a, b, err := mem.Pipe(v4a, v4b, mem.Faults{Delay: time.Hour}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rb := &recorder{}
	b.Attach(rb)
	tr := newTracker()
	sendEach(a, tr, v4b, 10, 3, 64)
	if len(packageStacks()) == 0 {
		t.Error("no delay line goroutine while frames are delayed")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the delay line to signal its end; the goroutine may
	// still be returning (runnable at its last line) a moment after.
	left := packageStacks()
	for deadline := time.Now().Add(time.Second); len(left) > 0 && time.Now().Before(deadline); left = packageStacks() {
		time.Sleep(time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("goroutines left a second after Close:\n%s", strings.Join(left, "\n\n"))
	}
	if s := a.Stats(); s.ClosedDrops != 10 || s.Delayed != 10 || rb.count() != 0 {
		t.Errorf("stats %+v, delivered %d: want 10 delayed, 10 ClosedDrops, none delivered", s, rb.count())
	}
	tr.checkReleased(t)
}

// echo sends every frame it receives back to peer, from inside Deliver,
// until limit frames have arrived.
type echo struct {
	port  *mem.Port
	peer  func() *mem.Port
	to    func() *mem.Port
	limit int64
	got   atomic.Int64
}

func (e *echo) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		if e.got.Add(1) >= e.limit {
			b.Release()
			continue
		}
		fill(b.Bytes(), e.peer().Addr(), 0, 20)
		e.port.Send([]*link.Buf{b})
	}
}

// TestSendFromDeliver checks that a dispatcher may call Send inside
// Deliver, with two ports ping-ponging at once in both directions (a
// lock held across Deliver would deadlock here).
func TestSendFromDeliver(t *testing.T) {
	for _, f := range []mem.Faults{{}, {Delay: 10 * time.Microsecond}, {Duplicate: 0.01, Seed: 1}} {
		const limit = 500
		ea, eb := &echo{limit: limit}, &echo{limit: limit}
		a, b := pipe(t, f, f, ea, eb)
		ea.port, ea.peer = a, func() *mem.Port { return b }
		eb.port, eb.peer = b, func() *mem.Port { return a }
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for _, p := range []*mem.Port{a, b} {
				wg.Go(func() {
					buf := link.Get(64)
					other := v4b
					if p == b {
						other = v4a
					}
					fill(buf.Bytes(), other, 0, 20)
					p.Send([]*link.Buf{buf})
				})
			}
			wg.Wait()
			for ea.got.Load() < limit || eb.got.Load() < limit {
				time.Sleep(100 * time.Microsecond)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("faults %+v: ping-pong stuck at %d and %d frames", f, ea.got.Load(), eb.got.Load())
		}
		waitFor(t, "quiet", func() bool { return settled(a, b) })
		balance(t, a, b)
	}
}
