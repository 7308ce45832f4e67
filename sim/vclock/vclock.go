// Package vclock is the virtual-time driver of rnic's device layer
// (internal/device): it runs devices of package rnic as timing models of
// a hardware profile (sim/nicmodel) on a simulated fabric (sim/fabric),
// and a program's threads one at a time under a deterministic scheduler,
// so that a run is a function of the seed and the program. New makes a
// clock; package rnic's VirtualClock is its handle, which
// rnic.Options.Clock takes. ReadStats, ObserveSteps, ObserveRates and
// Trace (stats.go) are the public statistics of a device of the clock,
// what studies of the hardware read; Model opens the timing model itself.
package vclock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/nicmodel"
	"github.com/rnic/rnic/sim/profile"
)

// Clock runs devices in virtual time: each device opened with
// rnic.Options.Clock set to its handle is the same NIC core as in real
// time, driven as a timing
// model of the clock's hardware profile (sim/nicmodel: SRAM cache misses,
// WQE fetches and DMA crossing a PCIe model, processing units, the
// profile's line rate), on a simulated fabric (sim/fabric) shared by the
// clock's devices. The program's threads run one at a time under the
// clock's scheduler, so a run is a function of the seed and the program:
// the same program gives the same completions, at the same virtual
// times, with the same trace, every time.
//
// A program in virtual time:
//
//   - runs its work inside Run, in the function given to Run and in
//     threads started with Go (both may open devices, post, poll and
//     wait). Setting up outside Run (Open, RegMR, CreateQP, Connect) is
//     allowed; it takes no virtual time.
//   - waits only through the API: CQ.Wait, CQ.Poll (each call costs the
//     profile's poll time, so a busy-poll loop advances the clock),
//     GetAsyncEvent, the clock's Sleep, WaitWrite and Settle, and
//     Thread.Wait.
//     Each is a point where the scheduler may run another thread or
//     advance time.
//   - must not block on anything else — channels, mutexes, sync.WaitGroup,
//     time.Sleep, network or file I/O between its threads, or a CQ's
//     Events channel — and must not start goroutines of its own that call
//     the API: one thread holds the clock at a time, and a thread that
//     blocks elsewhere holds it forever. Shared variables between threads
//     need no locks (only one thread runs at a time) but order only
//     through the API's waits.
//   - reads time with the clock's Now; context deadlines run on the wall
//     clock and are only a safety net.
//
// A PostSend costs the profile's post time (host.post_send_ns) before the
// doorbell, a Poll its poll time (host.poll_cq_ns) per call and per extra
// completion taken. Completions become visible when the model says their
// CQE write has reached host memory.
type Clock struct {
	prof     *profile.HardwareProfile
	s        *sim.Sim
	fab      *fabric.Fabric
	nextAddr int  // devices opened: the next default address
	meta     bool // Options.Metadata
	watch    bool // Options.WatchWrites

	// The scheduler: at most one thread holds the clock (cur); the
	// others are runnable (runq, in FIFO order) or blocked. Threads are
	// coroutines (iter.Pull) that Run's goroutine resumes one at a time:
	// a switch between threads is a direct coroutine switch, not a trip
	// through Go's scheduler (which wakes idle Ps with futex calls). A
	// thread that waits first runs the simulation itself until a thread
	// can run, and yields only if that thread is another one (a lone
	// thread that posts and waits never switches).
	threads  int // live threads
	runq     threadQueue
	cur      *Thread
	blocked  []*Thread // in the order they began to wait
	inRun    bool
	done     bool  // Run's function returned
	stop     error // set when the run ends: blocked and later waits fail with it
	deadlock error // why the run ended, if not because main returned
	limit    sim.Time
}

// Options configure a Clock.
type Options struct {
	// Profile names a built-in hardware profile (`rnic sim --list-profiles`
	// lists them: cx6, cx6-200g, hangu) or a TOML profile file; "" is
	// cx6-200g. HardwareProfile, if set, is used instead.
	Profile         string
	HardwareProfile *profile.HardwareProfile
	// Seed seeds the simulation's random choices (ECN marking, random
	// workloads drawing from Rand).
	Seed uint64
	// Trace, if set, receives a line per event of the simulation (doorbells
	// reaching a NIC, progress steps, frames arriving, completions becoming
	// visible, threads waking), with its virtual time: two runs of one
	// program with one seed write the same bytes.
	Trace io.Writer
	// Metadata runs the clock's NICs in metadata mode: DMA moves lengths,
	// not bytes (no payload, no ICRC), so that runs with thousands of QPs
	// and gigabytes of registered memory per host are fast and need no
	// memory. Regions are registered with rnic.PD.RegMRMetadata; RegMR is
	// refused, since nothing would reach its bytes.
	Metadata bool
	// WatchWrites makes the NICs tell the clock when RDMA WRITE data they
	// placed becomes visible in host memory, for WaitWrite (a program
	// that polls memory for a peer's WRITE, as perftest's write_lat).
	// Off by default: it costs an event per WRITE received.
	WatchWrites bool
}

// The errors a run ends with (package rnic exports them: rnic.errDeadlock,
// rnic.errRunOver, rnic.errTimeLimit).
var (
	errDeadlock  = device.ErrDeadlock
	errRunOver   = device.ErrRunOver
	errTimeLimit = device.ErrTimeLimit
)

// New returns a clock at virtual time zero, as the handle devices take
// (rnic.Options.Clock) and programs run on.
func New(o Options) (*rnic.VirtualClock, error) {
	c, err := newClock(o)
	if err != nil {
		return nil, err
	}
	return device.WrapClock(c).(*rnic.VirtualClock), nil
}

func newClock(o Options) (*Clock, error) {
	p := o.HardwareProfile
	if p == nil {
		name := o.Profile
		if name == "" {
			name = "cx6-200g"
		}
		var err error
		if p, err = profile.Builtin(name); errors.Is(err, profile.ErrUnknown) {
			if _, serr := os.Stat(name); serr == nil {
				p, err = profile.LoadFile(name)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("vclock: New: %w", err)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("vclock: New: %w", err)
	}
	s := sim.New(o.Seed)
	if o.Trace != nil {
		s.SetTrace(sim.WriterTrace(o.Trace))
	}
	fab, err := fabric.New(s, p.FabricConfig())
	if err != nil {
		return nil, fmt.Errorf("vclock: New: %w", err)
	}
	return &Clock{prof: p, s: s, fab: fab, limit: sim.Never, meta: o.Metadata, watch: o.WatchWrites}, nil
}

var _ device.Clock = (*Clock)(nil)

// of returns the clock behind a handle New made (nil for another).
func of(vc *rnic.VirtualClock) *Clock {
	if vc == nil {
		return nil
	}
	c, _ := device.ClockOf(vc).(*Clock)
	return c
}

// Profile returns the hardware profile of the clock vc (nil if New did
// not make vc).
func Profile(vc *rnic.VirtualClock) *profile.HardwareProfile {
	if c := of(vc); c != nil {
		return c.prof
	}
	return nil
}

// Now returns the virtual time since the clock was made.
func (v *Clock) Now() time.Duration { return time.Duration(v.s.Now()) }

// Thread is one thread of a virtual-time program (VirtualClock.Go).
type Thread struct {
	v      *Clock
	resume func() (struct{}, bool) // runs the thread until it waits or returns
	yield  func(struct{}) bool     // gives the clock back to Run's goroutine
	err    error                   // why its wait ends: nil, or v.stop
	gen    uint64                  // counts its waits: a wake event of an earlier one is stale
	wait   any                     // what it waits for: *transport.CQ, writeWait, *Thread, settleWait, or nil (a timer, or runnable)
	timer  bool                    // sleeping until a wake event
	exited bool
}

// Go starts f as a thread of the program; it runs when the scheduler
// gets to it (after the running thread waits). Call it before or inside
// Run.
func (v *Clock) Go(f func()) device.Thread {
	t := &Thread{v: v}
	t.resume, _ = iter.Pull(func(yield func(struct{}) bool) {
		t.yield = yield
		f()
	})
	v.threads++
	v.runq.push(t)
	return t
}

// Wait waits until t's function has returned. It is a yield point: it
// returns an error (wrapping errDeadlock, errRunOver or errTimeLimit) if
// the run ends first.
func (t *Thread) Wait() error {
	for !t.exited {
		if err := t.v.block(t, false); err != nil {
			return err
		}
	}
	return nil
}

// Run runs main as a thread of the program, with the threads started by
// Go, in virtual time, and returns when main returns: nil, or an error
// wrapping errDeadlock if the program stopped with every thread waiting
// and nothing in flight, or errTimeLimit if virtual time reached the
// clock's limit (the blocked calls returned that error). Threads still
// running then see their waits fail with errRunOver, one at a time, until
// each returns. Run may be called again to go on.
func (v *Clock) Run(main func()) error {
	if v.inRun {
		return errors.New("rnic: VirtualClock.Run inside Run")
	}
	v.inRun, v.stop, v.done, v.deadlock = true, nil, false, nil
	defer func() { v.inRun = false }()
	v.Go(func() { main(); v.done = true })
	for {
		t := v.next()
		if t == nil {
			return v.deadlock
		}
		v.cur, t.err = t, v.stop
		if _, alive := t.resume(); !alive {
			v.cur = nil
			t.exited = true
			v.threads--
			v.wakeFor(t)
		}
	}
}

// SetLimit ends the run when virtual time would pass t: the program's
// waits then return an error wrapping errTimeLimit (its threads should
// return), and so does Run. It bounds programs that may never finish (a
// peer that never answers, with rnr_retry 7, retries forever). Zero
// removes the limit.
func (v *Clock) SetLimit(t time.Duration) {
	v.limit = sim.Time(t)
	if t <= 0 {
		v.limit = sim.Never
	}
}

// next runs the simulation on the calling goroutine, which holds the
// clock, until a thread can run, and returns it; nil when no thread is
// left that could (the program is over).
func (v *Clock) next() *Thread {
	for {
		if t := v.runq.pop(); t != nil {
			return t
		}
		if v.done && v.stop == nil {
			v.stop = errRunOver
			v.wakeAll()
			continue
		}
		if v.threads == 0 {
			return nil
		}
		if v.stop == nil && v.s.StepUntil(v.limit) {
			continue
		}
		if v.stop == nil && v.settled() {
			continue
		}
		if v.stop == nil {
			// Every thread waits and no event is due: a deadlock, unless
			// what is due comes after the limit.
			if v.s.Pending() > 0 {
				v.deadlock = fmt.Errorf("%w (%v)", errTimeLimit, time.Duration(v.limit))
			} else {
				v.deadlock = fmt.Errorf("%w (at %v)", errDeadlock, v.Now())
			}
			v.stop = v.deadlock
		}
		v.wakeAll()
		if v.runq.len() == 0 {
			return nil // threads blocked outside the API: nothing to do
		}
	}
}

// settled makes the threads in Settle runnable, if any are: nothing else
// can run and no event is due.
func (v *Clock) settled() bool {
	n := v.runq.len()
	v.wakeFor(settleWait{})
	return v.runq.len() > n
}

// threadQueue is the runnable threads in FIFO order: a slice read from
// head, reused once empty, so that the scheduler does not allocate.
type threadQueue struct {
	q    []*Thread
	head int
}

func (r *threadQueue) len() int { return len(r.q) - r.head }

func (r *threadQueue) push(t *Thread) { r.q = append(r.q, t) }

// pushFront puts t before the others (the thread a waiting thread found
// runnable goes first).
func (r *threadQueue) pushFront(t *Thread) {
	if r.head > 0 {
		r.head--
		r.q[r.head] = t
		return
	}
	r.q = append(r.q, nil)
	copy(r.q[1:], r.q)
	r.q[0] = t
}

func (r *threadQueue) pop() *Thread {
	if r.head == len(r.q) {
		return nil
	}
	t := r.q[r.head]
	r.q[r.head] = nil
	r.head++
	if r.head == len(r.q) {
		r.q, r.head = r.q[:0], 0
	}
	return t
}

// wakeAll makes every blocked thread runnable (its wait returns v.stop).
func (v *Clock) wakeAll() {
	for _, t := range v.blocked {
		t.wait, t.timer = nil, false
		v.runq.push(t)
	}
	clear(v.blocked)
	v.blocked = v.blocked[:0]
}

// wakeFor makes the threads waiting for w runnable, in the order they
// began to wait.
func (v *Clock) wakeFor(w any) {
	kept := v.blocked[:0]
	for _, t := range v.blocked {
		if t.wait == w {
			t.wait = nil
			v.runq.push(t)
			continue
		}
		kept = append(kept, t)
	}
	clear(v.blocked[len(kept):])
	v.blocked = kept
}

// block gives the clock up until the thread is woken: by what it waits
// for (w), or, with timer, by its wake event. It returns v.stop.
func (v *Clock) block(w any, timer bool) error {
	t := v.cur
	if t == nil {
		return errors.New("rnic: a waiting call on a virtual-time device outside VirtualClock.Run (or from a goroutine the clock did not start)")
	}
	if v.stop != nil {
		return v.stop
	}
	t.wait, t.timer = w, timer
	t.gen++
	v.blocked = append(v.blocked, t)
	v.cur = nil
	// Run the simulation here until a thread can run: if it is this one,
	// go on without a switch; otherwise it goes first in the queue and
	// Run's goroutine resumes it.
	next := v.next()
	if next == t {
		v.cur = t
		return v.stop
	}
	if next != nil {
		v.runq.pushFront(next)
	}
	t.yield(struct{}{})
	return t.err
}

// spend lets the running thread use d of virtual time (host CPU time):
// the clock goes on meanwhile, other threads may run.
func (v *Clock) spend(d time.Duration) error {
	if v.cur == nil {
		return nil // set-up outside Run takes no time
	}
	if d <= 0 || v.stop != nil {
		return v.stop
	}
	if v.runq.len() == 0 && v.s.Now()+sim.Time(d) <= v.limit && v.s.Advance(v.s.Now()+sim.Time(d)) {
		return nil // nothing else happens meanwhile
	}
	v.s.Schedule(sim.Event{At: v.s.Now() + sim.Time(d), Kind: evWake, Arg: v.cur.gen + 1, Ptr: v.cur, H: waker{v}})
	return v.block(nil, true)
}

// Sleep lets the calling thread wait d of virtual time.
func (v *Clock) Sleep(d time.Duration) error {
	if v.cur == nil {
		return errors.New("rnic: VirtualClock.Sleep outside Run")
	}
	return v.spend(max(d, 1))
}

// The clock's own events.
const evWake int32 = 0 // a sleeping thread's time has come (Ptr: *Thread)

// waker receives the clock's own events (a sim.Handler kept off the
// clock's API).
type waker struct{ v *Clock }

// Handle makes a thread whose time has come runnable.
func (w waker) Handle(_ *sim.Sim, ev sim.Event) {
	v := w.v
	t := ev.Ptr.(*Thread)
	if !t.timer || ev.Arg != t.gen {
		return // woken otherwise (the run ended), or a wake of an earlier wait
	}
	for i, b := range v.blocked {
		if b == t {
			v.blocked = append(v.blocked[:i], v.blocked[i+1:]...)
			break
		}
	}
	t.timer = false
	v.runq.push(t)
}

// KindName names the clock's events in traces.
func (waker) KindName(int32) string { return "thread wakes" }

// Open starts a NIC on the clock (rnic.Open with Options.Clock).
func (v *Clock) Open(o device.Config) (device.Driver, device.NIC, error) {
	addr := o.Addr
	for !addr.IsValid() {
		// The next of the fabric's host addresses that no device has.
		a := fabric.HostAddrs(v.nextAddr + 1)[v.nextAddr]
		if _, used := v.fab.Lookup(a); !used {
			addr = a
			break
		}
		v.nextAddr++
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("rnic%d", v.nextAddr)
	}
	port, err := v.fab.AddHost(addr.Unmap())
	if err != nil {
		return nil, device.NIC{}, fmt.Errorf("rnic: Open: %w", err)
	}
	vn := &vnic{v: v, events: make(chan transport.Event, 256)}
	// The profile describes the hardware: it replaces the device's caches,
	// DMA engines and arbiter, and makes its own choices where it says
	// so; device.Config.Assemble does the rest, as in real time.
	v.prof.Hardware(&o.Core)
	o.Choices = device.Choices{NoUTLB: v.prof.Caches.UTLB == "off", FixedPages: v.prof.Caches.MTTPages == "fixed",
		ReadBudgetPSNs: v.prof.Engine.ReadBudgetPSNs}
	core, err := o.Assemble()
	if err != nil {
		port.Close()
		return nil, device.NIC{}, fmt.Errorf("rnic: Open: %w", err)
	}
	n, err := nicmodel.New(v.s, nicmodel.Config{Profile: v.prof, Port: port, Core: core,
		MTU: o.MTU, Event: vn.event, Trace: o.Trace, Metadata: v.meta})
	if err != nil {
		port.Close()
		return nil, device.NIC{}, fmt.Errorf("rnic: Open: %w", err)
	}
	v.nextAddr++
	vn.n, vn.port = n, port
	n.SetCQEHandler(vn)
	if v.watch {
		vn.written = make(map[uint32]int)
		n.SetWriteHandler(vn)
	}
	core = n.Core()
	return vn, device.NIC{Name: o.Name, ATU: n.ATU, QPs: n.QPs, CQs: n.CQs, AHs: n.AHs, GID: n.GID(),
		Core: core, MTU: core.Engine.LocalMTU}, nil
}

// vnic is a device's driver in virtual time: the timing model of the
// clock's profile (sim/nicmodel) around the NIC core. Everything runs on
// the thread that holds the clock, so there are no locks.
type vnic struct {
	v      *Clock
	n      *nicmodel.NIC
	port   *fabric.Port
	events chan transport.Event
	drops  uint64
	closed bool
	// written counts, per QP number, the bytes of RDMA WRITE data placed
	// and visible that WaitWrite has not consumed (WatchWrites).
	written map[uint32]int
}

var _ device.Driver = (*vnic)(nil)

// Engine runs a control-path call, then lets the NIC look for the work it
// may have made (a QP moved to RTS with sends queued, a flush).
func (vn *vnic) Engine(f func(e *transport.Engine)) {
	f(vn.n.Engine)
	if !vn.closed {
		vn.n.Kick()
	}
}

func (vn *vnic) Sync(f func()) { f() }

// Features: metadata mode if the clock's; no QP1 (it is not modelled),
// no other processes.
func (vn *vnic) Features() device.Features { return device.Features{Metadata: vn.v.meta} }

// SetupCQ holds the CQ's entries until the model says their CQE write
// reached the host (CQEVisible).
func (vn *vnic) SetupCQ(c *transport.CQ) { c.Hold() }

// HostTime passes the profile's time for op: a PostSend's per WQE before
// the doorbell, a poll's per call and per extra completion taken.
func (vn *vnic) HostTime(op device.HostOp, n int) error {
	ns := vn.v.prof.Host.PollCQNs
	if op == device.PostSend {
		ns = vn.v.prof.Host.PostSendNs
	}
	return vn.v.spend(time.Duration(ns) * time.Duration(n))
}

// Take takes what the model has made visible.
func (vn *vnic) Take(c *transport.CQ, wc []transport.WC) int { return c.Take(wc) }

// Closed wakes the threads waiting on the device, in CQ order (a
// reproducible run): they find it closed.
func (vn *vnic) Closed(cqs []*transport.CQ) {
	cqs = slices.Clone(cqs)
	slices.SortFunc(cqs, func(a, b *transport.CQ) int { return cmp.Compare(a.CQN, b.CQN) })
	for _, c := range cqs {
		vn.v.wakeFor(c)
	}
	vn.v.wakeFor(vn)
}

func (vn *vnic) event(ev transport.Event) {
	select {
	case vn.events <- ev:
	default:
		vn.drops++
	}
	vn.v.wakeFor(vn)
}

// CQEVisible is the model saying that n completions of cq have reached
// host memory.
func (vn *vnic) CQEVisible(cq *transport.CQ, n int) {
	cq.Reveal(n)
	vn.v.wakeFor(cq)
}

// WriteVisible is the model saying that bytes of WRITE data placed
// through QP qpn have reached host memory.
func (vn *vnic) WriteVisible(qpn uint32, bytes int) {
	vn.written[qpn] += bytes
	vn.v.wakeFor(writeWait{vn})
}

// writeWait is what a thread in WaitWrite on one of a device's QPs waits
// for.
type writeWait struct{ vn *vnic }

func (vn *vnic) Counters() (transport.Counters, nic.Pipeline) {
	e := vn.n.Engine
	c := e.Counters()
	qpc, cqc := e.CacheStats()
	a := vn.n.ATU.Stats()
	return c, nic.Pipeline{QPC: qpc, CQC: cqc, MPT: a.MPT, MTT: a.MTT, ATU: a, DMA: vn.n.DMA().Stats(),
		Arbiter: e.ArbiterStats(), EventDrops: vn.drops}
}

// Close takes the NIC off the fabric: frames to it are dropped from now
// on; the simulation keeps the rest of the clock's devices running.
func (vn *vnic) Close() error {
	if vn.closed {
		return nil
	}
	vn.closed = true
	return vn.port.Close()
}

// WaitCQ is CQ.Wait in virtual time: it waits (giving the clock to the
// other threads and to the NICs) until completions are visible.
func (vn *vnic) WaitCQ(ctx context.Context, c *transport.CQ, wc []transport.WC) (int, error) {
	v := vn.v
	for {
		if n := c.Take(wc); n > 0 {
			// The thread that wakes reads the CQEs: one poll's time each
			// (a run that ends meanwhile is the next call's error).
			_ = v.spend(time.Duration(n) * time.Duration(v.prof.Host.PollCQNs))
			return n, nil
		}
		if c.Overrun() {
			return 0, transport.ErrCQOverrun
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := v.block(c, false); err != nil {
			return 0, err
		}
		if err := c.Err(); err != nil {
			return 0, err // destroyed, or its device closed
		}
	}
}

// WaitEvent is GetAsyncEvent in virtual time.
func (vn *vnic) WaitEvent(ctx context.Context, done <-chan struct{}) (transport.Event, error) {
	for {
		select {
		case ev := <-vn.events:
			return ev, nil
		default:
		}
		if err := ctx.Err(); err != nil {
			return transport.Event{}, err
		}
		if err := vn.v.block(vn, false); err != nil {
			return transport.Event{}, err
		}
		select {
		case <-done:
			return transport.Event{}, device.ErrClosed
		default:
		}
	}
}

// WaitWrite waits until n bytes of RDMA WRITE data that a peer wrote
// through one of k QPs of the NIC d (its responder placed them) are
// visible in host memory, consumes them and returns that QP's index, the
// first if several have them; it then costs the profile's poll time, the
// read that sees them (rnic.VirtualClock.WaitWrite).
func (v *Clock) WaitWrite(d device.Driver, n int, k int, qpn func(i int) (uint32, error)) (int, error) {
	vn, ok := d.(*vnic)
	switch {
	case !ok || vn.v != v:
		return 0, errors.New("rnic: WaitWrite: the QP's device is not on this clock")
	case !v.watch:
		return 0, errors.New("rnic: WaitWrite needs vclock.Options.WatchWrites")
	case n < 0:
		return 0, fmt.Errorf("rnic: WaitWrite of %d bytes", n)
	}
	for {
		for i := range k {
			q, err := qpn(i)
			if err != nil {
				return 0, err
			}
			if vn.written[q] >= n {
				vn.written[q] -= n
				// The bytes are the caller's; a run that ends meanwhile is
				// the next call's error.
				_ = v.spend(time.Duration(v.prof.Host.PollCQNs))
				return i, nil
			}
		}
		if err := v.block(writeWait{vn}, false); err != nil {
			return 0, err
		}
	}
}

// Settle waits until no other thread can run and the NICs have nothing
// left to do (every frame delivered, every completion written): a
// program's last step, after which the model's statistics are final.
func (v *Clock) Settle() error {
	return v.block(settleWait{}, false)
}

// settleWait is what a thread in Settle waits for.
type settleWait struct{}

// Model returns the timing model of d, a device of the clock vc (nil if
// it is not one): its caches, PCIe link, processing units and DMA
// engines, with their statistics, for studies that look inside the NIC.
func Model(vc *rnic.VirtualClock, d *rnic.Device) *nicmodel.NIC {
	v := of(vc)
	if vn, ok := device.DriverOf(d).(*vnic); ok && v != nil && vn.v == v {
		return vn.n
	}
	return nil
}

// Fabric returns the simulated fabric the devices of the clock vc are on
// (nil if New did not make vc).
func Fabric(vc *rnic.VirtualClock) *fabric.Fabric {
	if v := of(vc); v != nil {
		return v.fab
	}
	return nil
}

// Rand returns the simulation's seeded generator, which the model's own
// random choices share: a program that draws from it stays a function of
// the seed.
func (v *Clock) Rand() *rand.Rand { return v.s.Rand() }

// Events returns how many events the simulation has delivered: the
// simulator's unit of work.
func (v *Clock) Events() uint64 { return v.s.Events() }

// Pipe returns the two ends of an in-memory, full-duplex connection
// between threads of the clock, for programs that exchange endpoints
// over a net.Conn (Exchange, the perftest package): a Read waits through
// the clock (a yield point, like CQ.Wait) until the other end writes or
// closes; a Write never waits. Moving bytes takes no virtual time.
// Deadlines are accepted and not kept: in virtual time the waits end by
// the clock's rules (deadlock, the run's end, its limit), and a wall
// clock's deadline would make the run depend on the machine. Reads and
// Writes must come from the clock's threads.
func (v *Clock) Pipe() (net.Conn, net.Conn) {
	a := &vpipe{v: v, name: "vpipe-a"}
	b := &vpipe{v: v, name: "vpipe-b", peer: a}
	a.peer = b
	return a, b
}

// vpipe is one end of a Pipe.
type vpipe struct {
	v      *Clock
	name   string
	peer   *vpipe
	buf    []byte // written by the peer, not yet read
	closed bool
}

func (p *vpipe) Read(b []byte) (int, error) {
	for len(p.buf) == 0 {
		switch {
		case p.closed:
			return 0, net.ErrClosed
		case p.peer.closed:
			return 0, io.EOF
		case len(b) == 0:
			return 0, nil
		}
		if err := p.v.block(p, false); err != nil {
			return 0, err
		}
	}
	n := copy(b, p.buf)
	p.buf = p.buf[:copy(p.buf, p.buf[n:])]
	return n, nil
}

func (p *vpipe) Write(b []byte) (int, error) {
	switch {
	case p.closed:
		return 0, net.ErrClosed
	case p.peer.closed:
		return 0, io.ErrClosedPipe
	}
	p.peer.buf = append(p.peer.buf, b...)
	p.v.wakeFor(p.peer)
	return len(b), nil
}

func (p *vpipe) Close() error {
	if p.closed {
		return net.ErrClosed
	}
	p.closed = true
	p.v.wakeFor(p)
	p.v.wakeFor(p.peer)
	return nil
}

func (p *vpipe) LocalAddr() net.Addr              { return pipeAddr(p.name) }
func (p *vpipe) RemoteAddr() net.Addr             { return pipeAddr(p.peer.name) }
func (p *vpipe) SetDeadline(time.Time) error      { return nil }
func (p *vpipe) SetReadDeadline(time.Time) error  { return nil }
func (p *vpipe) SetWriteDeadline(time.Time) error { return nil }

// pipeAddr is a Pipe end's address.
type pipeAddr string

func (pipeAddr) Network() string  { return "vpipe" }
func (a pipeAddr) String() string { return string(a) }
