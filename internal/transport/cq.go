package transport

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCQOverrun is returned by CQ.Wait once the CQ has overflowed: the NIC
// had a completion to write and no free entry, so completions were lost and
// the CQ is in error, as IBTA 11.4.2.1 says.
var ErrCQOverrun = errors.New("completion queue overrun")

// CQ is a completion queue: a ring of completions the NIC writes and the
// application polls.
type CQ struct {
	CQN    uint32
	Opaque any // the public API's handle

	mu   sync.Mutex
	ring []WC
	head uint32 // oldest unpolled entry
	n    uint32 // unpolled entries
	err  bool   // overrun happened
	// overrun mirrors err for readers without the lock.
	overrun atomic.Bool

	waiters atomic.Int32
	wake    chan struct{} // cap 1: a completion arrived while a Wait slept

	// Completion-channel notification (ibv_req_notify_cq).
	armed  uint8 // 0 not armed, armNext, armSolicited
	events chan struct{}

	// Refs counts the QPs and SRQs that use this CQ; destroy fails while
	// it is non-zero.
	Refs atomic.Int32

	// Progress, if set, lets a Poll that finds the CQ empty do the NIC's
	// work on the polling goroutine (take in received frames, run an
	// engine turn if the engine is free); it reports whether frames moved.
	Progress func() bool

	// Held completions (Hold): the timing model writes a CQE into the
	// ring when the engine makes it, and says when the host can see it
	// (Reveal), after the DMA write and the CQE write have crossed PCIe.
	// poll takes only revealed entries.
	held    bool
	visible uint32 // revealed entries not yet polled (held CQs)

	// dead is closed by Shutdown, deadErr set before it: a Wait that
	// sleeps wakes with deadErr.
	dead    chan struct{}
	deadErr error
	shut    bool // under mu: dead and events are closed
}

const (
	armNext      = 1
	armSolicited = 2
)

// NewCQ returns a CQ with room for depth completions.
func NewCQ(cqn uint32, depth int) *CQ {
	return &CQ{
		CQN:    cqn,
		ring:   make([]WC, depth),
		wake:   make(chan struct{}, 1),
		events: make(chan struct{}, 1),
		dead:   make(chan struct{}),
	}
}

// Shutdown ends the CQ's life (its device closed, or it was destroyed):
// every Wait, sleeping or to come, returns err, and the completion
// channel is closed so that a goroutine receiving from it wakes. The NIC
// must no longer write completions to it. Only the first call counts.
func (c *CQ) Shutdown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		return
	}
	c.shut = true
	c.deadErr = err
	close(c.dead)
	close(c.events)
}

// Err returns the error Shutdown gave, or nil while the CQ lives.
func (c *CQ) Err() error {
	select {
	case <-c.dead:
		return c.deadErr
	default:
		return nil
	}
}

// Depth returns the number of entries.
func (c *CQ) Depth() int { return len(c.ring) }

// ErrCQBusy is Resize's error when the CQ holds more completions than
// the new depth.
var ErrCQBusy = errors.New("transport: the CQ holds more completions than the new depth")

// Resize gives the CQ room for depth completions (ibv_resize_cq), keeping
// the unpolled ones in order. It fails with ErrCQBusy if more than depth
// are unpolled.
func (c *CQ) Resize(depth int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if depth < 1 || uint32(depth) < c.n {
		return ErrCQBusy
	}
	ring := make([]WC, depth)
	for i := uint32(0); i < c.n; i++ {
		ring[i] = c.ring[(c.head+i)%uint32(len(c.ring))]
	}
	c.ring, c.head = ring, 0
	return nil
}

// Purge removes the completions of QP qpn not yet polled, keeping the
// others in order, and returns how many it removed: what a QP leaving
// for RESET does to its CQs on Linux's drivers (mlx5's cq_clean), so
// that the QP starts again with no stale completion.
func (c *CQ) Purge(qpn uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := uint32(len(c.ring))
	kept := uint32(0)
	visible := c.visible
	for i := uint32(0); i < c.n; i++ {
		wc := c.ring[(c.head+i)%d]
		if wc.QPNum == qpn {
			if c.held && i < c.visible {
				visible--
			}
			continue
		}
		c.ring[(c.head+kept)%d] = wc
		kept++
	}
	removed := c.n - kept
	c.n, c.visible = kept, visible
	return int(removed)
}

// Unpolled returns the number of completions in the CQ.
func (c *CQ) Unpolled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.n)
}

// push writes a completion. It returns false if the CQ is in error, and
// overrun true when this completion is the one that found it full (the
// moment the CQ enters the error state).
func (c *CQ) push(wc *WC, solicited bool) (ok, overrun bool) {
	c.mu.Lock()
	if c.err {
		c.mu.Unlock()
		return false, false
	}
	if c.n == uint32(len(c.ring)) {
		c.err = true
		c.overrun.Store(true)
		c.mu.Unlock()
		return false, true
	}
	c.ring[(c.head+c.n)%uint32(len(c.ring))] = *wc
	c.n++
	fire := c.armed == armNext || (c.armed == armSolicited && (solicited || wc.Status != WCSuccess))
	if fire {
		c.armed = 0
		// Under the lock, which Shutdown holds to close the channel.
		if !c.shut {
			select {
			case c.events <- struct{}{}:
			default:
			}
		}
	}
	c.mu.Unlock()
	if c.waiters.Load() > 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return true, false
}

// Poll moves up to len(dst) completions into dst, oldest first, and
// returns how many. It never blocks. When it finds nothing it first drives
// the NIC itself (Progress): the polling thread of a verbs program is the
// NIC's best chance to run, since Go's scheduler looks at the network only
// when a processor runs out of work, which a spinning thread never lets
// happen. Then it yields the processor (runtime.Gosched): the NIC's
// goroutines, and a peer's in the same process, run on the same CPUs as
// the application.
func (c *CQ) Poll(dst []WC) int {
	if k := c.poll(dst); k > 0 {
		return k
	}
	if c.Progress != nil && c.Progress() {
		if k := c.poll(dst); k > 0 {
			return k
		}
	}
	runtime.Gosched()
	return c.poll(dst)
}

// Take polls like Poll but never drives the NIC or yields: the timing
// model's host, whose clock decides when the poll happens.
func (c *CQ) Take(dst []WC) int { return c.poll(dst) }

func (c *CQ) poll(dst []WC) int {
	c.mu.Lock()
	k := min(uint32(len(dst)), c.n)
	if c.held {
		k = min(k, c.visible)
		c.visible -= k
	}
	for i := uint32(0); i < k; i++ {
		dst[i] = c.ring[(c.head+i)%uint32(len(c.ring))]
	}
	c.head = (c.head + k) % uint32(len(c.ring))
	c.n -= k
	c.mu.Unlock()
	return int(k)
}

// Hold makes the CQ keep the completions the engine writes from Poll and
// Wait until Reveal shows them: the timing model's CQ, whose entries
// become visible to the host only when their writes have crossed PCIe.
// Call it before the CQ is used.
func (c *CQ) Hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

// Reveal makes the next n held completions visible to Poll (at most as
// many as are in the ring).
func (c *CQ) Reveal(n int) {
	c.mu.Lock()
	c.visible = min(c.visible+uint32(max(n, 0)), c.n)
	c.mu.Unlock()
}

// Overrun reports whether the CQ has overflowed. It takes no lock, so
// that an empty busy poll can ask at no cost.
func (c *CQ) Overrun() bool { return c.overrun.Load() }

// waitSpin is how long Wait polls before it parks, and waitSpinLooks
// how many looks at most: in a synctest bubble no time passes while the
// waiter spins.
const (
	waitSpin      = 10 * time.Microsecond
	waitSpinLooks = 64
)

// Wait blocks until at least one completion is available (then polls like
// Poll), ctx is done, or Shutdown is called.
func (c *CQ) Wait(ctx context.Context, dst []WC) (int, error) {
	if len(dst) == 0 {
		return 0, errors.New("rnic: Wait with an empty slice")
	}
	// A short spin first, polling as Poll does (driving the NIC, yielding
	// the processor between looks): with
	// completions microseconds apart (a stream, a round trip in process),
	// parking and being woken costs more than the wait (the waker's futex
	// call alone was a fifth of a 64 B WRITE stream's CPU).
	for start, i := time.Now(), 0; i < waitSpinLooks && time.Since(start) < waitSpin; i++ {
		if n := c.Poll(dst); n > 0 { // drives the NIC as a poller does, and yields
			return n, nil
		}
		if ctx.Err() != nil || c.Overrun() {
			break
		}
	}
	for {
		if n := c.poll(dst); n > 0 {
			return n, nil
		}
		c.waiters.Add(1)
		// Poll again after announcing the waiter: a completion pushed in
		// between would otherwise find no waiter and send no wake-up.
		if n := c.poll(dst); n > 0 {
			c.waiters.Add(-1)
			return n, nil
		}
		if c.Overrun() {
			c.waiters.Add(-1)
			return 0, ErrCQOverrun
		}
		select {
		case <-c.wake:
			c.waiters.Add(-1)
		case <-ctx.Done():
			c.waiters.Add(-1)
			return 0, ctx.Err()
		case <-c.dead:
			c.waiters.Add(-1)
			return 0, c.deadErr
		}
	}
}

// ReqNotify arms the CQ's completion event for the next completion (or,
// with solicitedOnly, the next solicited or failed one), like
// ibv_req_notify_cq.
func (c *CQ) ReqNotify(solicitedOnly bool) {
	c.mu.Lock()
	if solicitedOnly {
		if c.armed != armNext {
			c.armed = armSolicited
		}
	} else {
		c.armed = armNext
	}
	c.mu.Unlock()
}

// Events returns the CQ's completion channel: one value per fired
// notification (a full channel coalesces, as ibv_get_cq_event may).
func (c *CQ) Events() <-chan struct{} { return c.events }
