// Package nic wires the RNIC's subsystems into one device and runs it in
// real time: the tables (QPC, CQC, MPT/MTT in the ATU), the DMA engine
// cluster, the protocol engine with its arbiter, the link, and the
// goroutine that drives the engine.
//
// One turn of the engine (stepLocked), under the engine lock:
//
//  1. take the frames the link delivered (a bounded receive queue; a
//     lossless link keeps what does not fit and is told when there is
//     room: Drained)
//  2. Receive them, fire due timers (Tick), set the engine's holds from
//     the link's backlog (a lossless link's pause), give the arbiter's
//     ready QPs their turns (Run), move the outbox to the transmit queue
//  3. arm the timer for the next deadline
//
// and then, with the engine lock released, the transmit queue goes to the
// link (flushTx): a sendmmsg never holds up host reads of registered
// memory, control calls, or a poller's turn. Whoever ran the turn sends;
// the queue is FIFO and one sender at a time drains it, so frames leave in
// the order the engine made them.
//
// On an in-process link (link.Inline: link/mem) work for a NIC whose
// engine goroutine sleeps is done on the goroutine that brought it
// (runInline): a lone frame on the deliverer's, and a doorbell for a QP
// that had nothing outstanding on the poster's; at most two such turns
// nest, so a WRITE posted to idle NICs is sent and placed before PostSend
// returns, with no futex wake-up on the way. A burst of frames (a stream)
// wakes the receiver's engine goroutine instead, which then does its
// side's work on its own core.
//
// The engine goroutine (routineEngine) runs turns while there is work,
// busy-polls its link for a while after a turn that moved frames (NAPI
// style), and then sleeps until a doorbell, a frame or the timer. A
// program that busy-polls a CQ runs turns itself (Progress): Go's
// scheduler looks at the network only when a processor idles, which a
// spinning thread prevents, so the polling thread is where the NIC's work
// gets done.
//
// The protocol engine itself (internal/transport) never reads a clock or
// starts a goroutine; this package is where real time enters. The
// simulator drives the same engine in virtual time instead.
//
// Control-path calls (modify QP, deregister MR, destroy) take the engine
// lock, so they never run in the middle of a packet: after DeregMR returns,
// no DMA into the region is in flight.
package nic

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/dma"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Config describes a device.
type Config struct {
	Name string
	Link link.Link
	Addr netip.Addr // the NIC's IP address: GID index 0

	MTU wire.MTU // active MTU of the port

	// The hardware, as both clocks describe it (sizes, caches, DMA
	// engines, arbiter, micro-TLB, page choice, READ budget: see
	// internal/device.Config.Core). Its Engine is this package's.
	transport.CoreConfig

	RxQueue int // frames the receive queue holds before dropping

	// Trace receives the protocol engine's debug log (nil: off).
	Trace func(string)

	// DCQCN turns on congestion control (transport.DCQCN); nil: none.
	DCQCN *transport.DCQCN
}

// QPNBase is the first QP number handed out (transport.FirstQPN).
const QPNBase = transport.FirstQPN

// Device is one running NIC.
type Device struct {
	cfg Config
	gid wire.GID
	ATU *atu.ATU
	DMA *dma.Cluster
	QPs *transport.Table[transport.QP]
	CQs *transport.Table[transport.CQ]
	AHs *transport.AHTable

	mu  sync.RWMutex // the engine lock (Sync takes it shared)
	eng *transport.Engine

	rx struct {
		sync.Mutex
		q     []*link.Buf
		spare []*link.Buf
		drops uint64
	}
	kick     chan struct{}
	records  atomic.Pointer[recordsBox] // doorbell records the engine goroutine scans (nil: none)
	done     chan struct{}
	start    time.Time
	closed   atomic.Bool
	stopping atomic.Bool
	// rxPending mirrors len(rx.q), so the loop can look without the lock.
	rxPending atomic.Int32

	events     chan transport.Event
	eventDrops atomic.Uint64

	// The transmit queue: frames the engine made, in order, waiting for
	// the link. Turns append under the engine lock and tx's lock; the one
	// sender (txMu) takes them all and sends outside both.
	tx struct {
		sync.Mutex
		q []*link.Buf
	}
	txPending atomic.Int32 // mirrors len(tx.q)
	txMu      sync.Mutex   // held by the goroutine sending the queue
	txOut     []*link.Buf  // owned by txMu's holder: the frames being sent
	loop      []*link.Buf  // owned by txMu's holder: frames to loop back inside the NIC

	// Owned by whoever holds the engine lock (the engine goroutine, or a
	// poller in Progress).
	rxWork  []*link.Buf // the frames of the current turn
	timer   *time.Timer // rings the doorbell at the engine's next deadline
	timerAt int64       // when the timer fires; 0: not armed

	poller    link.Poller     // the link's receive path, if the caller can drive it
	lastPoll  atomic.Int64    // when a poller last called Progress (d.now)
	linkSpin  atomic.Int64    // how long the engine goroutine polls the link before it parks (SetLinkSpin)
	inline    bool            // the link delivers on the sender's goroutine: frames are taken in there (runInline)
	parked    atomic.Bool     // the engine goroutine sleeps (waking it costs a futex and a context switch)
	drainer   link.Drainer    // a lossless link holding frames for a full receive queue
	backlog   link.Backlogger // a lossless link's count of this NIC's frames waiting
	holdReqs  bool            // the engine holds new requests (a pause)
	holdResps bool            // and READ/atomic responses
}

// Defaults fills unset fields with the defaults of a mid-range RNIC.
func (c *Config) Defaults() {
	c.CoreConfig.Defaults()
	if c.RxQueue == 0 {
		c.RxQueue = 512
	}
}

// maxRxQueue bounds Config.RxQueue.
const maxRxQueue = 1 << 16

// validate reports the first field of a configuration (defaults filled
// in) out of range.
func (c *Config) validate() error {
	if err := c.CoreConfig.Validate(); err != nil {
		return fmt.Errorf("nic: %w", err)
	}
	if c.RxQueue < 1 || c.RxQueue > maxRxQueue {
		return fmt.Errorf("nic: RxQueue %d out of range [1, %d]", c.RxQueue, maxRxQueue)
	}
	return nil
}

// New starts a device.
func New(cfg Config) (*Device, error) {
	cfg.Defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Link == nil {
		return nil, errors.New("nic: no link")
	}
	if !cfg.Addr.IsValid() {
		return nil, errors.New("nic: no IP address for GID 0")
	}
	if cfg.MTU == 0 {
		// The largest RoCE MTU whose frames fit the link, as rxe derives
		// its active MTU from the netdev's (1500 gives 1024).
		for m := wire.MTU4096; m >= wire.MTU256; m-- {
			if frameFor(m) <= cfg.Link.MTU() {
				cfg.MTU = m
				break
			}
		}
		if cfg.MTU == 0 {
			return nil, fmt.Errorf("nic: link MTU %d is too small for any RoCE MTU", cfg.Link.MTU())
		}
	}
	if m := cfg.Link.MTU(); m < frameFor(cfg.MTU) {
		return nil, fmt.Errorf("nic: link MTU %d is too small for RoCE MTU %d", m, cfg.MTU.Bytes())
	}
	var srcPort uint16
	if sp, ok := link.Find[link.SourcePorter](cfg.Link); ok {
		srcPort = sp.SourcePort()
	}
	d := &Device{
		cfg:    cfg,
		gid:    wire.GIDFromAddr(cfg.Addr),
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		start:  time.Now(),
		events: make(chan transport.Event, 256),
	}
	// The hardware is the caller's (internal/device assembles it, the
	// same for both clocks); this package adds what real time needs.
	hw := cfg.CoreConfig
	hw.Engine = transport.Config{
		LocalMTU: cfg.MTU, GID: d.gid, SrcPort: srcPort,
		Kick: d.wake, KickIdle: d.doorbell, Event: d.event, Trace: cfg.Trace, DCQCN: cfg.DCQCN,
	}
	if in, ok := link.Find[link.Intact](cfg.Link); ok {
		hw.Engine.ICRCOffload = in.Intact
		// An intact link within the process (link/mem): payloads may
		// travel by reference, one copy from sender to target.
		hw.Engine.PayloadRefs = true
	}
	core, err := transport.NewCore(hw)
	if err != nil {
		return nil, fmt.Errorf("nic: %w", err)
	}
	d.ATU, d.DMA, d.QPs, d.CQs, d.AHs, d.eng = core.ATU, core.DMA, core.QPs, core.CQs, core.AHs, core.Engine
	d.timer = time.AfterFunc(time.Hour, d.wake)
	d.timer.Stop()
	d.linkSpin.Store(int64(DefaultLinkSpin))
	if in, ok := cfg.Link.(link.Inline); ok {
		d.inline = in.DeliversInline()
	}
	d.poller, _ = link.Find[link.Poller](cfg.Link)
	d.drainer, _ = link.Find[link.Drainer](cfg.Link)
	d.backlog, _ = link.Find[link.Backlogger](cfg.Link)
	cfg.Link.Attach(d)
	go d.routineEngine()
	return d, nil
}

// frameFor returns the largest frame a RoCE MTU needs: IPv4 (the version
// of all but IPv6 links) or IPv6 header, UDP, BTH, the largest extension
// headers (RETH + ImmDt or AtomicETH: 28), pad and ICRC.
func frameFor(m wire.MTU) int {
	return m.Bytes() + wire.IPv4HeaderSize + wire.UDPHeaderSize + wire.BTHSize + 28 + 3 + wire.ICRCSize
}

// Config returns the device's configuration (with defaults filled in).
func (d *Device) Config() Config { return d.cfg }

// GID returns the device's GID 0.
func (d *Device) GID() wire.GID { return d.gid }

// Engine runs f with the engine lock held: the control path's way in.
func (d *Device) Engine(f func(e *transport.Engine)) {
	d.mu.Lock()
	defer d.wake()
	defer d.mu.Unlock() // a panic in f must not leave the engine locked
	f(d.eng)
}

// Sync runs f with the engine lock held shared, without waking the
// engine: for host accesses to registered memory that must be ordered with
// DMA. Shared, so that a program polling memory in a loop never keeps the
// engine waiting (a waiting writer blocks new readers).
func (d *Device) Sync(f func()) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	f()
}

// Deliver is the link's way in (link.Dispatcher). Frames addressed to
// this NIC land in the bounded receive queue; what does not fit is dropped
// and counted (rx_discards). Lossless links use TryDeliver instead.
func (d *Device) Deliver(bufs []*link.Buf) {
	if n := d.TryDeliver(bufs); n < len(bufs) {
		d.rx.Lock()
		d.rx.drops += uint64(len(bufs) - n)
		d.rx.Unlock()
		for _, b := range bufs[n:] {
			b.Release()
		}
	}
}

// TryDeliver queues as many frames as the receive queue has room for, in
// order, and returns how many (link.Receiver): a lossless link keeps the
// rest until the engine has taken frames out and calls its Drained. A
// closed device takes them all, and releases them.
func (d *Device) TryDeliver(bufs []*link.Buf) int { return d.tryDeliver(bufs, true) }

// TryDeliverQuiet is TryDeliver without the wake-up (link.QuietReceiver):
// the link calls Delivered once it holds none of its locks.
func (d *Device) TryDeliverQuiet(bufs []*link.Buf) int { return d.tryDeliver(bufs, false) }

// Delivered follows a TryDeliverQuiet of bytes (link.QuietReceiver): a few frames
// bring work the calling goroutine (a sibling NIC's engine, which sent
// them) does here if this NIC's goroutine sleeps (runInline: no wake-up
// on the latency path); bulk data, or a busy engine, wakes the engine.
func (d *Device) Delivered(bytes int) {
	if bytes <= maxInlineBytes && d.parked.Load() && d.runInline() {
		return
	}
	d.wake()
}

func (d *Device) tryDeliver(bufs []*link.Buf, wake bool) int {
	if d.closed.Load() {
		for _, b := range bufs {
			b.Release()
		}
		return len(bufs)
	}
	d.rx.Lock()
	n := min(len(bufs), d.cfg.RxQueue-len(d.rx.q))
	small := d.inline && inlineBytes(bufs[:n]) // before the engine can take and recycle them
	d.rx.q = append(d.rx.q, bufs[:n]...)
	d.rxPending.Store(int32(len(d.rx.q)))
	d.rx.Unlock()
	// A little work (a request or an ACK that someone waits for, a few
	// small messages) is done on this goroutine if the engine sleeps: no
	// wake-up on the latency path, and small frames cost less than the
	// hand-off to another core. Bulk data is a stream: the engine
	// goroutine is woken to take it on its own core, in parallel with the
	// sender, and spins between bursts (spin) so that it stays there.
	if wake && n > 0 && !(small && d.runIfParked()) {
		d.wake()
	}
	return n
}

// maxInlineBytes is the most frame bytes a delivery may bring for the
// receiving engine to run on the deliverer's goroutine: two MTU 4096
// frames' payload. Above it, copying the payload on the receiver's own
// core, in parallel with the sender, pays for the wake-up (with spin,
// in-process 64 KiB WRITEs 9-24 % and 1 MiB 14-25 % faster on two cores,
// four A/B rounds of go test -bench WriteBW); below it, the hand-off
// costs more than the work (64 B WRITEs 13 % slower on average over five
// rounds when every burst woke the receiver).
const maxInlineBytes = 8 << 10

func inlineBytes(bufs []*link.Buf) bool {
	n := 0
	for _, b := range bufs {
		if n += b.Len(); n > maxInlineBytes {
			return false
		}
	}
	return true
}

// inlineTurns counts the turns running on a poster's or deliverer's
// goroutine, nested: a WRITE posted to an idle NIC, its placement by the
// idle peer and the ACK's completion are three, and no more nest (a turn's
// frames then wake their receivers' goroutines), so the nesting is
// bounded however the NICs answer each other.
var inlineTurns atomic.Int32

const maxInlineTurns = 2

// doorbell is the engine's KickIdle: a doorbell for a QP that had nothing
// outstanding, whose poster most likely waits for it next. An idle NIC on
// an in-process link does the work on the poster's goroutine
// (runInline); a busy one, or any other, has its engine goroutine woken.
func (d *Device) doorbell() {
	if !d.runIfParked() {
		d.wake()
	}
}

// runIfParked runs a turn here (runInline) if the link delivers in line
// and the engine goroutine sleeps, and reports whether it did.
func (d *Device) runIfParked() bool {
	return d.inline && d.parked.Load() && d.runInline()
}

// runInline runs one turn of the engine loop on the goroutine that
// delivered frames (an in-process link: the peer NIC's sender, or a
// program's poller driving it), so that an answer needs no hand-off to
// this NIC's goroutine: a WRITE, its placement and its ACK all happen on
// the poller's goroutine. It reports whether it ran; the engine goroutine
// takes what the turn leaves. Only a parked engine goroutine is spared
// this way: a running one takes the frames itself, in parallel with the
// sender (small messages streamed both ways need both cores).
func (d *Device) runInline() bool {
	if inlineTurns.Add(1) > maxInlineTurns {
		inlineTurns.Add(-1)
		return false
	}
	defer inlineTurns.Add(-1)
	if d.stopping.Load() || !d.mu.TryLock() {
		return false
	}
	busy, _ := d.stepLocked()
	d.mu.Unlock()
	d.flushTx()
	if busy || d.rxPending.Load() > 0 || d.eng.PendingDoorbells() {
		d.wake()
	}
	return true
}

// Wake makes the engine look at the link's backlog again (link.Waker): a
// lossless link calls it when this NIC's frames waiting in it fell to
// link.ResumeBacklog.
func (d *Device) Wake() { d.wake() }

// The pause thresholds: with more of its frames than these waiting in a
// lossless link for receivers that have no room, the NIC holds back new
// requests, and then READ and atomic responses too; it resumes when the
// backlog has fallen to link.ResumeBacklog. The gap between the two keeps
// room for responses (which complete the peer's work and so let it drain)
// when requests are held; ACKs are never held.
const (
	pauseRequests  = batchBudget
	pauseResponses = 4 * batchBudget
)

// pause sets the engine's holds from the link's backlog (engine lock held).
func (d *Device) pause() {
	if d.backlog == nil {
		return
	}
	n := d.backlog.Backlog()
	reqs := n > pauseRequests || (d.holdReqs && n > link.ResumeBacklog)
	resps := n > pauseResponses || (d.holdResps && n > link.ResumeBacklog)
	if reqs != d.holdReqs || resps != d.holdResps {
		d.holdReqs, d.holdResps = reqs, resps
		d.eng.Hold(reqs, resps)
	}
}

// wake kicks the engine loop (a doorbell, a frame, a control operation).
func (d *Device) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *Device) event(ev transport.Event) {
	select {
	case d.events <- ev:
	default:
		d.eventDrops.Add(1)
	}
}

// Events returns the asynchronous event queue.
func (d *Device) Events() <-chan transport.Event { return d.events }

func (d *Device) now() int64 { return int64(time.Since(d.start)) }

// rxBatch bounds the frames one loop iteration takes in.
const rxBatch = 256

// batchBudget bounds the packets one loop iteration sends, so that
// received frames (ACKs, NAKs, duplicate requests) are taken in often.
const batchBudget = 64

func (d *Device) routineEngine() {
	defer close(d.done)
	defer d.timer.Stop()
	for !d.stopping.Load() {
		r := d.doorbellRecords()
		rung := r != nil && r.Scan()
		d.mu.Lock()
		busy, moved := d.stepLocked()
		d.mu.Unlock()
		d.flushTx()
		if busy && d.poller != nil {
			// Busy, the engine takes in what the link has received
			// itself, as NAPI polls a busy device's ring: the link's
			// goroutine waits in Go's network poller, which a
			// processor kept busy by this loop (GOMAXPROCS 1, as a
			// NIC serving programs on two cores runs) looks at only
			// every 10 ms, and the ACKs the peer sent would wait.
			d.poller.Poll()
		}
		if busy || d.rxPending.Load() > 0 || d.eng.PendingDoorbells() {
			continue
		}
		if (moved || rung) && (d.poller != nil || d.inline || r != nil) && d.spin(r) {
			continue
		}
		// Sleep until a doorbell, a frame or the next deadline. The
		// programs' doorbell pages say so first, and are scanned once
		// more: a program that stored its producer index before it saw
		// the NIC asleep is found here, one after wakes the NIC.
		if r != nil {
			r.Sleep()
			if r.Scan() || d.eng.PendingDoorbells() || d.rxPending.Load() > 0 {
				r.Wake()
				continue
			}
		}
		d.parked.Store(true)
		<-d.kick
		d.parked.Store(false)
		if r != nil {
			r.Wake()
		}
	}
}

// DoorbellRecords are doorbell records in memory that programs share
// with the NIC (the host interface's doorbell pages: a producer index per
// queue, and a word saying whether the NIC runs), which the engine
// goroutine scans as a hardware NIC's doorbell unit takes in doorbell
// writes: on every turn and while it spins. Before it parks it tells
// the programs (Sleep) and scans once more; a program that finds it
// asleep wakes it (Kick).
type DoorbellRecords interface {
	// Scan rings the engine's doorbell of each queue whose producer
	// index moved since the last scan and reports whether any did. It
	// is called without the engine lock.
	Scan() bool
	// Sleep marks the NIC asleep in the programs' pages; Wake marks it
	// running.
	Sleep()
	Wake()
}

type recordsBox struct{ r DoorbellRecords }

// SetDoorbellRecords makes the engine goroutine scan r (nil: none).
func (d *Device) SetDoorbellRecords(r DoorbellRecords) {
	if r == nil {
		d.records.Store(nil)
	} else {
		d.records.Store(&recordsBox{r})
	}
	d.wake()
}

func (d *Device) doorbellRecords() DoorbellRecords {
	if b := d.records.Load(); b != nil {
		return b.r
	}
	return nil
}

// Kick wakes the engine goroutine if it sleeps: a program rang a
// doorbell (DoorbellRecords) while it slept.
func (d *Device) Kick() { d.wake() }

// DefaultLinkSpin is how long the engine goroutine polls its link after a
// turn that moved frames, before it parks, unless SetLinkSpin says
// otherwise.
const DefaultLinkSpin = 50 * time.Microsecond

// SetLinkSpin sets how long the engine goroutine polls its link after a
// turn that moved frames (0: it parks at once, and a frame wakes it
// through Go's network poller or the in-process link). Spinning pays
// where a spare CPU does it; where the NIC's programs poll on every CPU it
// takes their time.
func (d *Device) SetLinkSpin(t time.Duration) { d.linkSpin.Store(int64(max(t, 0))) }

// spin polls the link for a while before the engine goroutine sleeps, as
// NAPI's busy polling does. On a socket link the answer to what was just
// sent usually comes within tens of microseconds, and a goroutine parked
// in Go's network poller is woken only when a processor runs out of work.
// On an in-process link the next burst of a stream comes sooner: an
// engine that stays awake takes it on its own core, where a parked one
// costs a futex wake-up per burst (see maxInlineBytes for what the two
// together gained). With doorbell records (r) it scans them too: a
// program's next post is found without a wake-up. It reports whether
// there is work (a frame, a doorbell).
func (d *Device) spin(r DoorbellRecords) bool {
	spin := time.Duration(d.linkSpin.Load())
	if spin == 0 || d.now()-d.lastPoll.Load() < int64(spin) {
		return false // a program is polling (its Progress drives the link), or no spinning
	}
	until := time.Now().Add(spin)
	for range maxSpinLooks {
		if (d.poller != nil && d.poller.Poll() > 0) || d.rxPending.Load() > 0 || d.eng.PendingDoorbells() ||
			r != nil && r.Scan() {
			return true
		}
		if !time.Now().Before(until) {
			return false
		}
		runtime.Gosched()
	}
	return false
}

// maxSpinLooks bounds the looks of one spin as well as its time: a clock
// that stands still while goroutines run (a testing/synctest bubble's)
// would otherwise never end it. A look with a yield takes a few hundred
// nanoseconds, so the time bound is the one that ends a spin otherwise.
const maxSpinLooks = 4096

// stepLocked is one turn of the engine loop, with the engine lock held:
// take in received frames, fire due timers, serve ready QPs, hand the
// outbox to the link, and arm the timer for the next deadline. It reports
// whether work remains, and whether frames came in or went out. The engine
// goroutine runs it, and so does Progress on the goroutine of a program
// that polls.
func (d *Device) stepLocked() (busy, moved bool) {
	d.rxWork = d.takeRx(d.rxWork)
	moved = len(d.rxWork) > 0
	if moved && d.drainer != nil {
		d.drainer.Drained() // there is room now: the link hands over what waits
	}
	now := d.now()
	if len(d.rxWork) > 0 {
		d.eng.Receive(now, d.rxWork)
	}
	d.eng.Tick(now)
	d.pause()
	busy = d.eng.Run(now, batchBudget)
	moved = d.queueOutbox() || moved
	d.recycleRx(d.rxWork)
	d.rxWork = nil
	if d.timerAt != 0 && d.timerAt <= now {
		d.timerAt = 0 // fired
	}
	// The timer rings the doorbell channel like everything else. Deadlines
	// mostly move later (each ACK pushes the retransmission timer out), so
	// it is re-armed only for an earlier one; one that fires early just
	// costs a look.
	if deadline, ok := d.eng.NextDeadline(); ok && (d.timerAt == 0 || deadline < d.timerAt) {
		d.timer.Reset(time.Duration(deadline - now))
		d.timerAt = deadline
	}
	return busy, moved
}

// Progress does the NIC's work on the caller's goroutine, as far as it can
// without waiting: it takes the frames the link has already received (a
// link.Poller) and, if the engine is free, runs one turn of the engine
// loop. A CQ poll that finds nothing calls it, so that a program that
// busy-polls completes its work without a hand-off to the engine's and the
// link's goroutines: Go's scheduler looks at the network only when a
// processor runs out of work, which a spinning thread never lets happen,
// so a frame parked there could wait for the runtime's 10 ms sysmon tick.
// It reports whether frames moved (the link delivered some, or the engine
// took some in or sent some).
func (d *Device) Progress() bool {
	d.lastPoll.Store(d.now())
	moved := false
	if d.poller != nil {
		moved = d.poller.Poll() > 0
	}
	if d.stopping.Load() || !d.mu.TryLock() {
		return moved // the engine goroutine (or another poller) is at work
	}
	var busy, stepped bool
	if !d.stopping.Load() {
		busy, stepped = d.stepLocked()
	}
	d.mu.Unlock()
	d.flushTx()
	if busy || d.rxPending.Load() > 0 || d.eng.PendingDoorbells() {
		d.wake() // what this turn left, the engine goroutine takes on
	}
	return moved || stepped
}

// takeRx moves at most rxBatch frames from the receive queue into rx:
// timers and ACKs stay timely even when a peer floods the queue.
func (d *Device) takeRx(rx []*link.Buf) []*link.Buf {
	if d.rxPending.Load() == 0 {
		return rx[:0]
	}
	d.rx.Lock()
	if len(d.rx.q) <= rxBatch {
		rx, d.rx.q = d.rx.q, d.rx.spare[:0]
	} else {
		rx = append(d.rx.spare[:0], d.rx.q[:rxBatch]...)
		n := copy(d.rx.q, d.rx.q[rxBatch:])
		clear(d.rx.q[n:])
		d.rx.q = d.rx.q[:n]
	}
	d.rxPending.Store(int32(len(d.rx.q)))
	d.rx.Unlock()
	return rx
}

// recycleRx returns rx's array for the next takeRx.
func (d *Device) recycleRx(rx []*link.Buf) {
	if len(rx) == 0 {
		return
	}
	clear(rx)
	d.rx.Lock()
	d.rx.spare = rx[:0] // rx never shares its array with d.rx.q
	d.rx.Unlock()
}

// queueOutbox moves the engine's frames to the transmit queue (engine lock
// held). It reports whether there were any.
func (d *Device) queueOutbox() bool {
	out := d.eng.Outbox()
	if len(out) == 0 {
		return false
	}
	d.tx.Lock()
	d.tx.q = append(d.tx.q, out...)
	d.txPending.Store(int32(len(d.tx.q)))
	d.tx.Unlock()
	d.eng.ClearOutbox()
	return true
}

// flushTx hands the transmit queue to the link, outside the engine lock;
// frames for the NIC's own address loop back inside the NIC, as on
// hardware. If another goroutine is sending, it returns at once: that
// sender looks at the queue again after it lets go of txMu, so nothing
// queued is left behind.
func (d *Device) flushTx() {
	for d.txPending.Load() > 0 && d.txMu.TryLock() {
		for {
			d.tx.Lock()
			out := d.tx.q
			d.tx.q = d.txOut[:0]
			d.txPending.Store(0)
			d.tx.Unlock()
			if len(out) == 0 {
				d.txOut = out
				break
			}
			d.send(out)
			clear(out)
			d.txOut = out[:0]
		}
		d.txMu.Unlock()
	}
}

// send gives frames to the link, and the NIC's own to its receive queue
// (txMu held).
func (d *Device) send(out []*link.Buf) {
	n := 0
	for _, b := range out {
		if d.isLocal(b.Bytes()) {
			d.loop = append(d.loop, b)
			continue
		}
		out[n] = b
		n++
	}
	if n > 0 {
		d.cfg.Link.Send(out[:n])
	}
	if len(d.loop) > 0 {
		d.Deliver(d.loop)
		clear(d.loop)
		d.loop = d.loop[:0]
	}
}

func (d *Device) isLocal(f []byte) bool {
	if f[0]>>4 == 4 {
		return d.gid.IsIPv4() && [4]byte(f[16:20]) == [4]byte(d.gid[12:16])
	}
	return [16]byte(f[24:40]) == d.gid
}

// Close stops the engine and the link. Work in flight is abandoned.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.stopping.Store(true)
	d.wake()
	<-d.done
	d.flushTx() // what the last turn made still goes out, as before Close
	err := d.cfg.Link.Close()
	d.rx.Lock()
	for _, b := range d.rx.q {
		b.Release()
	}
	d.rx.q = nil
	d.rx.Unlock()
	d.txMu.Lock() // a poller's send may still be under way
	d.tx.Lock()
	for _, b := range d.tx.q {
		b.Release()
	}
	d.tx.q = nil
	d.txPending.Store(0)
	d.tx.Unlock()
	d.txMu.Unlock()
	return err
}

// Counters returns the device counters, the pipeline's included.
func (d *Device) Counters() (transport.Counters, Pipeline) {
	d.mu.Lock()
	c := d.eng.Counters()
	qpc, cqc := d.eng.CacheStats()
	arb := d.eng.ArbiterStats()
	dm := d.DMA.Stats() // the engine owns the DMA counters: read under its lock
	d.mu.Unlock()
	d.rx.Lock()
	c[transport.RxDiscards] += d.rx.drops
	d.rx.Unlock()
	a := d.ATU.Stats()
	return c, Pipeline{QPC: qpc, CQC: cqc, MPT: a.MPT, MTT: a.MTT, ATU: a, DMA: dm, Arbiter: arb, EventDrops: d.eventDrops.Load()}
}

// Pipeline are the hardware blocks' own statistics.
type Pipeline struct {
	QPC, CQC, MPT, MTT cache.Stats
	ATU                atu.Stats
	DMA                dma.Stats
	Arbiter            sched.Stats
	EventDrops         uint64
}
