package transport

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rnic/rnic/internal/queue"
)

// ErrCQOverrun is returned by CQ.Wait once the CQ has overflowed: the NIC
// had a completion to write and no free entry, so completions were lost and
// the CQ is in error, as IBTA 11.4.2.1 says.
var ErrCQOverrun = errors.New("completion queue overrun")

// CQ is a completion queue: a ring of CQEs in host memory, in the one
// format of the queues (internal/queue), which the engine writes and the
// application polls. A Go program's CQ is memory of its own, polled by
// Poll; a C program's is memory it shares with the NIC (CQMem), which its
// library polls by the CQEs' owner words and frees by advancing a
// consumer index the engine reads and never trusts.
type CQ struct {
	CQN    uint32
	Opaque any // the public API's handle

	mu    sync.Mutex // the engine's writes, Poll, Resize, Purge, Shutdown
	mem   []byte     // slots of queue.CQELen bytes, a power of two of them
	slots uint32
	limit uint32         // the entries it holds at most (a Go CQ's depth may be fewer than its slots)
	pi    uint32         // entries written (the engine's)
	ci    *atomic.Uint32 // entries polled: ciOwn, or the application's word
	ciOwn atomic.Uint32
	err   bool // overrun happened
	// overrun mirrors err for readers without the lock.
	overrun atomic.Bool

	waiters atomic.Int32
	wake    chan struct{} // cap 1: a completion arrived while a Wait slept

	// Completion-channel notification (ibv_req_notify_cq): arm holds
	// armNext, armSolicited or 0 (armOwn, or the application's word),
	// cleared when the event fires; the event goes to events, or to
	// notify for a CQ in shared memory.
	arm    *atomic.Uint32
	armOwn atomic.Uint32
	events chan struct{}
	notify func()

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

// NewCQ returns a Go program's CQ with room for depth completions.
func NewCQ(cqn uint32, depth int) *CQ {
	slots := pow2(uint32(depth))
	c := newCQ(cqn, make([]byte, int(slots)*queue.CQELen), uint32(depth))
	c.events = make(chan struct{}, 1)
	return c
}

func newCQ(cqn uint32, mem []byte, limit uint32) *CQ {
	c := &CQ{
		CQN:   cqn,
		mem:   mem,
		slots: uint32(len(mem) / queue.CQELen),
		limit: limit,
		wake:  make(chan struct{}, 1),
		dead:  make(chan struct{}),
	}
	c.ci, c.arm = &c.ciOwn, &c.armOwn
	return c
}

// pow2 is the smallest power of two at least n (n at most 2^31).
func pow2(n uint32) uint32 {
	p := uint32(1)
	for p < n {
		p <<= 1
	}
	return p
}

// CQMem is a CQ's ring in memory an application shares with the NIC (a
// host interface's CQ, which a C program's library polls).
type CQMem struct {
	// Mem holds the CQEs: a power of two of queue.CQELen-byte slots,
	// each as many entries as the CQ holds.
	Mem []byte
	// CI is the application's consumer index: the entries it polled,
	// which the engine may write again. The engine reads it and never
	// trusts it: an index the ring never had puts the CQ in error.
	CI *atomic.Uint32
	// Arm is the application's request for an event: armNext (1, any
	// completion) or armSolicited (2), cleared by the engine when the
	// event fires.
	Arm *atomic.Uint32
	// Notify sends the event. It is called with the CQ's lock held and
	// must not block.
	Notify func()
}

func (m *CQMem) fits() bool {
	n := len(m.Mem) / queue.CQELen
	return m.CI != nil && m.Arm != nil && m.Notify != nil && n > 0 && n&(n-1) == 0 &&
		len(m.Mem)%queue.CQELen == 0 && uint64(n) <= 1<<31
}

// NewCQInMem returns a CQ whose ring is m.
func NewCQInMem(cqn uint32, m *CQMem) (*CQ, error) {
	if !m.fits() {
		return nil, fmt.Errorf("transport: a CQ of %d bytes is not a power of two of CQEs", len(m.Mem))
	}
	c := newCQ(cqn, m.Mem, uint32(len(m.Mem)/queue.CQELen))
	c.ci, c.arm, c.notify = m.CI, m.Arm, m.Notify
	c.pi = c.ci.Load()
	return c, nil
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
	if c.events != nil {
		close(c.events)
	}
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
func (c *CQ) Depth() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.limit)
}

// ErrCQBusy is Resize's error when the CQ holds more completions than
// the new depth.
var ErrCQBusy = errors.New("transport: the CQ holds more completions than the new depth")

// Resize gives a Go program's CQ room for depth completions
// (ibv_resize_cq), keeping the unpolled ones in order. It fails with
// ErrCQBusy if more than depth are unpolled.
func (c *CQ) Resize(depth int) error {
	if depth < 1 {
		return ErrCQBusy
	}
	return c.resize(make([]byte, int(pow2(uint32(depth)))*queue.CQELen), uint32(depth), nil)
}

// ResizeInMem moves a CQ in shared memory to m, the unpolled entries
// first, from index 0: the application polls m from 0 (the engine
// stores 0 in its consumer index). It fails with ErrCQBusy if m cannot
// hold them, or if the application's consumer index is one the ring
// never had.
func (c *CQ) ResizeInMem(m *CQMem) error {
	if !m.fits() {
		return fmt.Errorf("transport: a CQ of %d bytes is not a power of two of CQEs", len(m.Mem))
	}
	return c.resize(m.Mem, uint32(len(m.Mem)/queue.CQELen), m)
}

func (c *CQ) resize(mem []byte, limit uint32, m *CQMem) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci := c.ci.Load()
	n := c.pi - ci
	if n > c.limit || n > limit {
		return ErrCQBusy
	}
	slots := uint32(len(mem) / queue.CQELen)
	var e queue.CQE
	for i := range n {
		if !queue.GetCQE(c.slot(ci+i), queue.Lap(ci+i, c.slots), &e) {
			return ErrCQBusy // not written: the index is garbage
		}
		queue.PutCQE(mem[int(i)*queue.CQELen:int(i+1)*queue.CQELen], &e, queue.Lap(i, slots))
	}
	c.mem, c.slots, c.limit, c.pi = mem, slots, limit, n
	if m != nil {
		c.ci, c.arm, c.notify = m.CI, m.Arm, m.Notify
	}
	c.ci.Store(0)
	return nil
}

// slot returns the memory of ring index i's CQE.
func (c *CQ) slot(i uint32) []byte {
	o := int(i%c.slots) * queue.CQELen
	return c.mem[o : o+queue.CQELen : o+queue.CQELen]
}

// Purge removes the completions of QP qpn not yet polled from a Go
// program's CQ, keeping the others in order, and returns how many it
// removed: what a QP leaving for RESET does to its CQs on Linux's
// drivers (mlx5's cq_clean), so that the QP starts again with no stale
// completion. A CQ in shared memory is the application's library's to
// clean (it polls it): Purge leaves it alone.
func (c *CQ) Purge(qpn uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ci != &c.ciOwn {
		return 0
	}
	ci := c.ci.Load()
	n := c.pi - ci
	kept := uint32(0)
	visible := c.visible
	var e queue.CQE
	for i := range n {
		if !queue.GetCQE(c.slot(ci+i), queue.Lap(ci+i, c.slots), &e) {
			break
		}
		if e.QPNum == qpn {
			if c.held && i < c.visible {
				visible--
			}
			continue
		}
		queue.PutCQE(c.slot(ci+kept), &e, queue.Lap(ci+kept, c.slots))
		kept++
	}
	c.pi, c.visible = ci+kept, visible
	return int(n - kept)
}

// Unpolled returns the number of completions in the CQ.
func (c *CQ) Unpolled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.pi - c.ci.Load(); n <= c.limit {
		return int(n)
	}
	return 0
}

// push writes a completion. It returns false if the CQ is in error, and
// overrun true when this completion is the one that found it full (the
// moment the CQ enters the error state), or found the application's
// consumer index garbage.
func (c *CQ) push(wc *WC, solicited bool) (ok, overrun bool) {
	c.mu.Lock()
	if c.err {
		c.mu.Unlock()
		return false, false
	}
	if c.pi-c.ci.Load() >= c.limit {
		c.err = true
		c.overrun.Store(true)
		c.mu.Unlock()
		return false, true
	}
	imm := wc.ImmData
	if wc.Flags&WCWithInv != 0 {
		imm = wc.InvalidatedRKey
	}
	queue.PutCQE(c.slot(c.pi), &queue.CQE{WRID: wc.WRID, Status: uint32(wc.Status), Opcode: uint32(wc.Opcode),
		Flags: uint32(wc.Flags), ByteLen: wc.ByteLen, Imm: imm, QPNum: wc.QPNum, SrcQP: wc.SrcQP,
		VendorErr: wc.VendorErr, PKeyIndex: wc.PKeyIndex, SL: wc.SL}, queue.Lap(c.pi, c.slots))
	c.pi++
	// Under the lock, which Shutdown holds to close the channel.
	if a := c.arm.Load(); !c.shut && (a == armNext || a == armSolicited && (solicited || wc.Status != WCSuccess)) &&
		c.arm.CompareAndSwap(a, 0) {
		if c.notify != nil {
			c.notify()
		} else {
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

// poll decodes a Go program's CQEs into dst (a CQ in shared memory is
// its application's to poll: nothing here).
func (c *CQ) poll(dst []WC) int {
	c.mu.Lock()
	if c.ci != &c.ciOwn {
		c.mu.Unlock()
		return 0
	}
	ci := c.ciOwn.Load()
	k := min(uint32(len(dst)), c.pi-ci)
	if c.held {
		k = min(k, c.visible)
	}
	var e queue.CQE
	for i := range k {
		if !queue.GetCQE(c.slot(ci+i), queue.Lap(ci+i, c.slots), &e) {
			k = i
			break
		}
		w := &dst[i]
		*w = WC{WRID: e.WRID, Status: WCStatus(e.Status), Opcode: WCOpcode(e.Opcode), Flags: WCFlags(e.Flags),
			VendorErr: e.VendorErr, ByteLen: e.ByteLen, QPNum: e.QPNum, SrcQP: e.SrcQP, PKeyIndex: e.PKeyIndex, SL: e.SL}
		if w.Flags&WCWithInv != 0 {
			w.InvalidatedRKey = e.Imm
		} else {
			w.ImmData = e.Imm
		}
	}
	if c.held {
		c.visible -= k
	}
	c.ciOwn.Store(ci + k)
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
	c.visible = min(c.visible+uint32(max(n, 0)), c.pi-c.ciOwn.Load())
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
		c.arm.CompareAndSwap(0, armSolicited)
	} else {
		c.arm.Store(armNext)
	}
	c.mu.Unlock()
}

// Events returns a Go program's CQ's completion channel: one value per
// fired notification (a full channel coalesces, as ibv_get_cq_event
// may). A CQ in shared memory has none (nil): its events go to its
// Notify.
func (c *CQ) Events() <-chan struct{} { return c.events }
