package mem_test

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// bounded is a dispatcher with a bounded queue, as a NIC's: TryDeliver
// takes what fits, take empties the queue (the NIC's engine taking frames)
// and tells the port (Drained). It counts wake-ups.
type bounded struct {
	rec   recorder
	port  *mem.Port // its own port, for Drained
	cap   int
	mu    sync.Mutex
	q     []*link.Buf
	wakes atomic.Int32
}

func (b *bounded) Deliver(bufs []*link.Buf) { panic("Deliver on a link.Receiver") }

func (b *bounded) TryDeliver(bufs []*link.Buf) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(bufs), b.cap-len(b.q))
	b.q = append(b.q, bufs[:n]...)
	return n
}

func (b *bounded) Wake() { b.wakes.Add(1) }

// take hands at most n queued frames to the recorder and calls Drained.
func (b *bounded) take(n int) int {
	b.mu.Lock()
	n = min(n, len(b.q))
	out := append([]*link.Buf(nil), b.q[:n]...)
	b.q = append(b.q[:0], b.q[n:]...)
	b.mu.Unlock()
	b.rec.Deliver(out)
	b.port.Drained()
	return n
}

// TestLosslessBackpressure checks the default, lossless port: a receiver
// that takes 8 frames at a time loses none of 1000 sent in bursts, gets
// them in order, the sender's backlog counts what waits and its NIC is
// woken once when the backlog falls to link.ResumeBacklog.
func TestLosslessBackpressure(t *testing.T) {
	tr := newTracker()
	rb := &bounded{cap: 8}
	ra := &bounded{cap: 8}
	a, b := pipe(t, mem.Faults{}, mem.Faults{}, ra, rb)
	ra.port, rb.port = a, b
	const n = 1000
	sendEach(a, tr, v4b, n, 50, 100)
	if got, want := a.Backlog(), n-8; got != want {
		t.Fatalf("sender's backlog %d, want %d (all but the 8 the receiver took)", got, want)
	}
	if s := a.Stats(); s.Waiting != uint64(n-8) {
		t.Errorf("Stats.Waiting %d, want %d", s.Waiting, n-8)
	}
	for rb.take(8) > 0 {
	}
	if rb.rec.count() != n {
		t.Fatalf("%d of %d frames arrived", rb.rec.count(), n)
	}
	if inv := inversions(rb.rec.indices()); inv != 0 {
		t.Errorf("%d frames out of order", inv)
	}
	if a.Backlog() != 0 {
		t.Errorf("backlog %d after the receiver drained everything", a.Backlog())
	}
	if w := ra.wakes.Load(); w != 1 {
		t.Errorf("the sender was woken %d times, want once (at the resume mark)", w)
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

// TestLossyBuffer checks WithBuffer: a lossy port keeps at most n frames
// waiting, drops the rest (Overflow) and reports no backlog.
func TestLossyBuffer(t *testing.T) {
	tr := newTracker()
	rb := &bounded{cap: 8}
	a, b := pipe(t, mem.Faults{}, mem.Faults{}, &recorder{}, rb, mem.WithBuffer(10))
	rb.port = b
	sendEach(a, tr, v4b, 100, 100, 100)
	if a.Backlog() != 0 {
		t.Errorf("a lossy port reports a backlog of %d", a.Backlog())
	}
	s := a.Stats()
	if s.Overflow != 100-8-10 || s.Waiting != 10 {
		t.Errorf("Overflow %d, Waiting %d; want %d, 10", s.Overflow, s.Waiting, 100-8-10)
	}
	for rb.take(8) > 0 {
	}
	if rb.rec.count() != 18 {
		t.Errorf("%d frames arrived, want 18", rb.rec.count())
	}
	if inv := inversions(rb.rec.indices()); inv != 0 {
		t.Errorf("%d frames out of order", inv)
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

// TestCloseReleasesWaiting closes a receiver with frames waiting for it:
// they are released and counted as the sender's ClosedDrops, and the
// sender's backlog goes back to zero.
func TestCloseReleasesWaiting(t *testing.T) {
	tr := newTracker()
	rb := &bounded{cap: 4}
	a, b := pipe(t, mem.Faults{}, mem.Faults{}, &recorder{}, rb)
	rb.port = b
	sendEach(a, tr, v4b, 50, 10, 100)
	b.Close()
	if a.Backlog() != 0 || a.Stats().ClosedDrops != 46 {
		t.Errorf("backlog %d, ClosedDrops %d after the receiver closed; want 0, 46", a.Backlog(), a.Stats().ClosedDrops)
	}
	for rb.take(4) > 0 {
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

// TestConcurrentSendersStayInOrder has four goroutines send to one
// receiver that drains concurrently: nothing is lost, and each sender's
// frames arrive in the order it sent them.
func TestConcurrentSendersStayInOrder(t *testing.T) {
	checkGoroutines(t)
	tr := newTracker()
	sw := mem.NewSwitch()
	rx := &bounded{cap: 16, rec: recorder{tr: tr}}
	dst, err := sw.Port(v4b, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	rx.port = dst
	dst.Attach(rx)
	const senders, n = 4, 2000
	ports := make([]*mem.Port, senders)
	for i := range ports {
		if ports[i], err = sw.Port(netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)}), mem.Faults{}); err != nil {
			t.Fatal(err)
		}
		ports[i].Attach(&recorder{})
	}
	var wg sync.WaitGroup
	for i, p := range ports {
		wg.Go(func() {
			for k := 0; k < n; k += 20 {
				bufs := make([]*link.Buf, 0, 20)
				for j := k; j < k+20; j++ {
					bufs = append(bufs, tr.frame(v4b, uint32(i*n+j), 100))
				}
				p.Send(bufs)
			}
		})
	}
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			if rx.take(5) == 0 {
				select {
				case <-stop:
					if rx.take(5) == 0 && dst.Stats().RxFrames == uint64(senders*n) {
						return
					}
				default:
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-drained
	last := make([]int, senders)
	for i := range last {
		last[i] = -1
	}
	for _, idx := range rx.rec.indices() {
		s, k := int(idx)/n, int(idx)%n
		if k <= last[s] {
			t.Fatalf("sender %d: frame %d after %d", s, k, last[s])
		}
		last[s] = k
	}
	if rx.rec.count() != senders*n {
		t.Errorf("%d of %d frames arrived", rx.rec.count(), senders*n)
	}
	for _, p := range ports {
		if p.Backlog() != 0 {
			t.Errorf("backlog %d left", p.Backlog())
		}
		p.Close()
	}
	dst.Close()
	balance(t, append(ports, dst)...)
	tr.checkReleased(t)
}
