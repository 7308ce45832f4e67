package transport

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/dma"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Config wires an engine to the device's shared hardware.
type Config struct {
	ATU *atu.ATU
	DMA *dma.Cluster
	QPs *Table[QP]
	CQs *Table[CQ]
	// AHs is the address handle table UD WQEs name AHs in.
	AHs      *AHTable
	QPCCache cache.Config
	CQCCache cache.Config
	Arbiter  sched.Config

	// MaxQPRdAtom and MaxQPInitRdAtom bound max_dest_rd_atomic and
	// max_rd_atomic (the device attributes of the same names).
	MaxQPRdAtom     uint8
	MaxQPInitRdAtom uint8

	// MaxUnackedPSNs is the requester's window: packets sent and not yet
	// acknowledged per QP (rxe's RXE_MAX_UNACKED_PSNS).
	MaxUnackedPSNs uint32
	// AckReqEvery sets AckReq on every n-th packet of a long message (and
	// always on the last), so the window keeps moving.
	AckReqEvery uint32
	// MaxReadPSNs bounds the response packets of the READs outstanding on
	// all the engine's QPs together (0: no bound beyond max_rd_atomic per
	// QP). Without it 64 QPs with 16 READs of 64 KiB each ask for 16,384
	// packets at once: more than a slow responder's intake holds, and
	// than this NIC's receive queue.
	MaxReadPSNs uint32

	// LocalMTU is the largest path MTU the link carries.
	LocalMTU wire.MTU
	// GID is the port's GID 0: the source address of UD QPs, and of
	// connected QPs until an address vector names one.
	GID wire.GID
	// SrcPort, if not 0, is the UDP source port of every frame (a link
	// whose kernel socket writes it); 0 spreads QPs over ports.
	SrcPort uint16

	// Kick is called, from any goroutine, when the engine has new work
	// (a doorbell). The driver wakes the engine's loop. Sans-IO: the engine
	// never runs by itself.
	Kick func()
	// KickIdle, if set, is called instead of Kick for a doorbell whose
	// WQEs are all the QP has outstanding (its send queue was empty): a
	// program that posts and then waits for the completion, whose driver
	// may do the work on the poster's goroutine. A program that keeps
	// work in flight gets Kick.
	KickIdle func()
	// Event receives asynchronous events (on the engine's goroutine).
	Event func(Event)
	// Trace, if set, receives a line for every protocol event worth a
	// look when debugging (NAKs, retries, drops): the engine's log.
	Trace func(string)

	// Doorbell, if set, receives doorbells instead of the engine's queue:
	// the simulator delays them by the MMIO write's latency and then calls
	// Ring. wqes is how many WQEs the post wrote, lastWQEBytes the size of
	// the last (a NIC may take a lone small WQE with the doorbell write).
	// Real time leaves it nil.
	Doorbell func(qp *QP, wqes, lastWQEBytes int)
	// Billing says the driver takes a bill (TakeBill) after every step, as
	// the simulator does; the engine then lists the CQs each step wrote
	// completions to. Real time leaves it false.
	Billing bool
	// Metadata runs the engine on lengths alone (the simulator's
	// metadata-only mode): translations, protection checks and the bill
	// happen as always, but no payload byte is copied and no ICRC is
	// computed or checked. Frames carry their headers and an undefined
	// payload.
	Metadata bool
	// ICRCOffload, when set, says whether the link delivers frames intact
	// right now (link.Intact): the engine then sends them without an ICRC
	// (FlagNoICRC) and counts TxICRCOffloaded.
	ICRCOffload func() bool
	// PayloadRefs lets a request whose ICRC is offloaded (above) carry
	// its payload by reference to the sender's registered memory instead
	// of its bytes (link.Buf.SetRef), when that memory is the program's
	// own and one extent: the receiving NIC's DMA engine copies it
	// straight into its target, once. It counts TxPayloadRefs. An RC
	// work request completes once acknowledged, as ever; a UC or UD one
	// once its frames are consumed, not when sent (byref.go). QP1's MADs
	// carry bytes.
	PayloadRefs bool
	// DCQCN turns on congestion control (see DCQCN); nil: none.
	DCQCN *DCQCN
	// TIMELY turns on delay-based congestion control instead (see
	// TIMELY); not with DCQCN.
	TIMELY *TIMELY
}

// Engine is one protocol engine: the requester, responder and completer of
// the QPs it owns, with the arbiter that schedules them and the timers that
// drive retransmission. It is not safe for concurrent use, except ring
// (doorbells), which the posting path calls from any goroutine; the driver
// serializes everything else (control-path calls included) with one lock.
type Engine struct {
	cfg Config
	arb *sched.Arbiter
	// ccRoute is the route of a packet whose IP header DCQCN changes
	// (ECT(0) on data, none on a CNP): a copy, so that the QP's own
	// attributes (ibv_query_qp) keep the traffic class asked for.
	ccRoute wire.Route
	// rateObs is told of every congestion-controlled rate change.
	rateObs func(qpn uint32, now int64, bps float64)
	qpc     *cache.Cache[uint32, *QP]
	cqc     *cache.Cache[uint32, *CQ]

	// gsi is QP1, the general services interface (CreateQP with
	// QPInit.GSI), or nil. It lives outside the QP table: its number is
	// the spec's, its context pinned on chip as a NIC keeps its special
	// QPs', and its arbiter queue is the one past the table's last slot.
	gsi *QP

	// refsReady: a UC or UD work request's frames sent by reference were
	// all consumed (refSlot.Consumed, on the receiver's goroutine); refQPs
	// are the QPs with such work waiting (byref.go).
	refsReady atomic.Bool
	refQPs    []*QP

	now    int64
	timers timerHeap
	out    []*link.Buf

	db struct {
		sync.Mutex
		q       []*QP
		spare   []*QP
		rings   uint64
		pending atomic.Int32 // len(q), readable without the lock
	}

	// The protocol engine's three parts (IBTA §9.7): the requester turns
	// WQEs into requests, the responder answers requests, the completer
	// turns ACKs and responses into completions. They share the engine's
	// services: the arbiter, the outbox, the ATU and DMA, the bill, the
	// counters and the timers.
	req  requester
	resp responder
	comp completer

	// hold is what the driver's Hold says not to send now.
	hold struct{ requests, responses bool }

	c    Counters
	bill Bill
	// billCQs: bill.CQs's entries past it are zero (ResetBill).
	billCQs int
	segs    []atu.Seg     // translation scratch
	grh     [grhSize]byte // a UD receive's GRH area (udRecv)
	// icrcTx and icrcRx keep the CRC state after each flow's invariant
	// header bytes (wire.ICRCCache): a packet's ICRC covers only the
	// rest.
	icrcTx, icrcRx wire.ICRCCache
	xw             [numWindows]xlateWindow // translations kept for the packets of a message (wall clock)

	// gatherBurst is how many packets of a message the requester builds
	// before gathering their payloads with one DMA access
	// (SetGatherBurst; 0: off).
	gatherBurst int
	// place is the run of received payloads waiting to be placed
	// with one DMA access (SetPlaceBurst; off unless place.max > 0).
	place placeBurst
	pkt   wire.Packet

	loadQPFn func(uint32) (*QP, bool)
	loadCQFn func(uint32) (*CQ, bool)
}

// DefaultMaxUnackedPSNs is the requester's window when
// Config.MaxUnackedPSNs is 0.
const DefaultMaxUnackedPSNs = 128

// NewEngine builds an engine.
func NewEngine(cfg Config) (*Engine, error) {
	if cfg.ATU == nil || cfg.DMA == nil || cfg.QPs == nil || cfg.CQs == nil {
		return nil, fmt.Errorf("transport: engine needs an ATU, a DMA cluster and QP and CQ tables")
	}
	if cfg.MaxUnackedPSNs == 0 {
		cfg.MaxUnackedPSNs = DefaultMaxUnackedPSNs
	}
	if cfg.AckReqEvery == 0 {
		cfg.AckReqEvery = 16
	}
	if cfg.MaxQPRdAtom == 0 {
		cfg.MaxQPRdAtom = 16
	}
	if cfg.MaxQPInitRdAtom == 0 {
		cfg.MaxQPInitRdAtom = 16
	}
	if cfg.LocalMTU == 0 {
		cfg.LocalMTU = wire.MTU4096
	}
	if cfg.Kick == nil {
		cfg.Kick = func() {}
	}
	if cfg.Event == nil {
		cfg.Event = func(Event) {}
	}
	arb, err := sched.New(cfg.Arbiter)
	if err != nil {
		return nil, err
	}
	qpc, err := cache.New[uint32, *QP](cfg.QPCCache, func(k uint32) uint64 { return uint64(k) })
	if err != nil {
		return nil, err
	}
	cqc, err := cache.New[uint32, *CQ](cfg.CQCCache, func(k uint32) uint64 { return uint64(k) })
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, arb: arb, qpc: qpc, cqc: cqc, segs: make([]atu.Seg, 0, 64)}
	e.SetGate(nil)
	e.req = requester{e: e, readBudget: cfg.MaxReadPSNs}
	e.resp = responder{e: e}
	e.comp = completer{e: e}
	e.loadQPFn = func(qpn uint32) (*QP, bool) { q := cfg.QPs.Get(qpn); return q, q != nil }
	e.loadCQFn = func(cqn uint32) (*CQ, bool) { c := cfg.CQs.Get(cqn); return c, c != nil }
	return e, nil
}

// ring is the doorbell: the posting path calls it after writing WQEs.
// One queued doorbell per QP is enough; later rings coalesce into it.
// With Config.Doorbell set (virtual time), the doorbell write travels to
// the NIC first: the hook schedules its arrival, which calls Ring.
func (e *Engine) ring(qp *QP, wqes int) {
	if e.cfg.Doorbell != nil {
		// The hook delivers the doorbell later with Ring, which counts it.
		last := 0
		if wqes > 0 {
			last = qp.lastWQEBytes()
		}
		e.cfg.Doorbell(qp, wqes, last)
		return
	}
	if e.cfg.KickIdle != nil && wqes > 0 && qp.SendOutstanding() == wqes {
		e.ringWith(qp, e.cfg.KickIdle)
		return
	}
	e.Ring(qp)
}

// Ring is the doorbell arriving at the NIC for qp.
func (e *Engine) Ring(qp *QP) { e.ringWith(qp, e.cfg.Kick) }

// ringWith is Ring with the kick to give when the QP was not queued yet.
func (e *Engine) ringWith(qp *QP, kick func()) {
	e.db.Lock()
	e.db.rings++
	queued := qp.dbQueued.Swap(true)
	if !queued {
		e.db.q = append(e.db.q, qp)
		e.db.pending.Store(int32(len(e.db.q)))
	}
	e.db.Unlock()
	if !queued {
		kick()
	}
}

// drainDoorbells hands rung QPs to the arbiter.
func (e *Engine) drainDoorbells() {
	if e.db.pending.Load() == 0 {
		return
	}
	e.db.Lock()
	q := e.db.q
	e.db.q = e.db.spare[:0]
	e.db.pending.Store(0)
	e.c[Doorbells] += e.db.rings
	e.db.rings = 0
	e.db.Unlock()
	for _, qp := range q {
		qp.dbQueued.Store(false)
		if qp.destroyed {
			continue
		}
		e.arb.Ring(qp.index)
	}
	clear(q)
	e.db.spare = q[:0]
}

// lookupQP resolves a QPN through the QPC cache.
func (e *Engine) lookupQP(qpn uint32) *QP {
	if qpn == GSIQPN {
		if e.gsi == nil || e.gsi.destroyed {
			return nil
		}
		return e.gsi
	}
	qp, ok, hit := e.qpc.Get(qpn, e.loadQPFn)
	e.bill.QPCLookups++
	if hit {
		e.c[QPCCacheHit]++
	} else {
		e.c[QPCCacheMiss]++
		e.bill.QPCMisses++
	}
	if !ok || qp.destroyed {
		return nil
	}
	return qp
}

// lookupCQ resolves a CQN through the CQC cache, as the NIC does before
// writing a CQE.
func (e *Engine) lookupCQ(cqn uint32) *CQ {
	cq, ok, hit := e.cqc.Get(cqn, e.loadCQFn)
	if hit {
		e.c[CQCCacheHit]++
	} else {
		e.c[CQCCacheMiss]++
		e.bill.CQCMisses++
	}
	if !ok {
		return nil
	}
	return cq
}

// QPByIndex returns the QP of arbiter queue q (a QP table slot, or the
// GSI's queue), or nil.
func (e *Engine) QPByIndex(q uint32) *QP {
	if e.gsi != nil && q == e.gsi.index {
		return e.gsi
	}
	return e.cfg.QPs.ByIndex(q)
}

// Run serves ready QPs until about budget packets have been sent (or
// nothing is ready). It reports whether work remains (the driver calls it
// again, after taking in received frames, before sleeping). A small budget
// keeps the pipeline short: the engine hears of a NAK or a duplicate
// request after at most budget packets.
func (e *Engine) Run(now int64, budget int) bool {
	e.now = now
	e.drainDoorbells()
	if e.refsReady.Load() {
		e.completeRefs()
	}
	waiting := 0 // turns in a row that sent nothing because of a hold
	for turns := 0; budget > 0 && turns < 4*budget; turns++ {
		q, g, ok := e.arb.Next()
		if !ok {
			break
		}
		qp := e.QPByIndex(q)
		if qp == nil || qp.destroyed {
			e.arb.Done(q, 0, 0, false)
			continue
		}
		if e.lookupQP(qp.QPN) == nil {
			e.arb.Done(q, 0, 0, false)
			continue
		}
		if g.Packets > budget {
			g.Packets = budget
		}
		e.bill.QP = qp.QPN
		sent := len(e.out)
		pk, by, more := e.serve(qp, g)
		// The turn costs the QP its frames' bytes on the wire: a READ
		// request or an ACK carries no payload, and charged by payload
		// alone a QP sending them would never use up a round's credit
		// (a 64 KiB quantum lasted 65536 READ requests), keeping every
		// queue that went idle and came back waiting for a round that
		// did not end.
		wire := 0
		for _, b := range e.out[sent:] {
			wire += b.Len()
		}
		if e.ccOn() && wire > 0 && qp.congestionControlled() {
			e.ccSent(qp, now, wire)
		}
		e.arb.Done(q, pk, max(by, wire), more)
		budget -= pk
		if pk > 0 || !e.hold.requests {
			waiting = 0
		} else if waiting++; waiting >= e.arb.Ready() {
			// Every ready QP waits for the hold to end: the driver
			// sleeps until it does (or a frame or doorbell comes).
			return e.pendingDoorbells()
		}
	}
	return e.arb.Ready() > 0 || e.pendingDoorbells()
}

// Hold stops the engine from starting new requests (requests) and, when the
// backlog is worse, from sending READ and atomic responses too (responses),
// until it is called again with false: the driver holds the engine while
// its lossless link says that receivers are backed up, as a sender paused
// by PFC stops transmitting (link.Backlogger). ACKs and NAKs are never
// held: they are small, bounded by the requests received, and they free
// the peer's resources. Timers keep running.
func (e *Engine) Hold(requests, responses bool) {
	e.hold.requests, e.hold.responses = requests || responses, responses
}

func (e *Engine) pendingDoorbells() bool { return e.db.pending.Load() > 0 }

// PendingDoorbells reports whether doorbells wait to be taken in; any
// goroutine may ask (a driver about to sleep must not miss one that rang
// after its last Run).
func (e *Engine) PendingDoorbells() bool { return e.pendingDoorbells() }

// serve gives one QP its turn: responses first (they unblock the peer),
// then the requester.
func (e *Engine) serve(qp *QP, g sched.Grant) (pkts, bytes int, more bool) {
	switch QPState(qp.state.Load()) {
	case QPSErr:
		e.flush(qp)
		return 0, 0, false
	case QPSReset, QPSInit:
		return 0, 0, false
	}
	if !e.hold.responses {
		pkts, bytes = e.resp.serveResponses(qp, g)
	}
	respMore := qp.resp.queueLen() > 0
	if !e.hold.requests && pkts < g.Packets && bytes < g.Bytes {
		p, b := e.req.serveRequests(qp, sched.Grant{Packets: g.Packets - pkts, Bytes: g.Bytes - bytes})
		pkts += p
		bytes += b
	}
	return pkts, bytes, respMore || e.req.requesterReady(qp)
}

// Outbox returns the frames produced since the last ClearOutbox; the
// driver sends them (handing the buffers to the link) and then calls
// ClearOutbox.
func (e *Engine) Outbox() []*link.Buf { return e.out }

// ClearOutbox forgets the frames returned by Outbox.
func (e *Engine) ClearOutbox() {
	clear(e.out)
	e.out = e.out[:0]
}

// Counters returns the device-level counters of this engine, with the
// cache counters filled in.
func (e *Engine) Counters() Counters {
	c := e.c
	e.db.Lock()
	c[Doorbells] += e.db.rings
	e.db.Unlock()
	return c
}

// CacheStats returns the QPC and CQC cache statistics.
func (e *Engine) CacheStats() (qpc, cqc cache.Stats) { return e.qpc.Stats(), e.cqc.Stats() }

// ArbiterStats returns the arbiter's counters.
func (e *Engine) ArbiterStats() sched.Stats { return e.arb.Stats() }

// SetGate installs a gate on the engine's arbiter (see sched.Gate): the
// timing model uses it to hold back a QP whose previous step is still in a
// processing unit. Call it before the engine runs, from its goroutine.
// With congestion control on, the arbiter's gate is the rate limiter
// (rateGate), which asks g about the QPs it admits.
func (e *Engine) SetGate(g sched.Gate) {
	if e.ccOn() {
		g = rateGate{e, g}
	}
	e.arb.SetGate(g)
}

// Unpark makes a QP the gate refused ready again, without counting a
// doorbell: its work was never taken. Call it from the engine's goroutine.
func (e *Engine) Unpark(qp *QP) {
	if !qp.destroyed {
		e.arb.Ring(qp.index)
	}
}

// tracef writes a trace line when tracing is on.
func (e *Engine) tracef(format string, args ...any) {
	if e.cfg.Trace != nil {
		e.cfg.Trace(fmt.Sprintf("%d ", e.now) + fmt.Sprintf(format, args...))
	}
}

// count bumps a per-QP counter and its device total.
func (e *Engine) count(qp *QP, c Counter) {
	e.c[c]++
	if qp != nil && c < numQPCounters {
		qp.qpCounters()[c]++
	}
}

func (e *Engine) countN(qp *QP, c Counter, n uint64) {
	e.c[c] += n
	if qp != nil && c < numQPCounters {
		qp.qpCounters()[c] += n
	}
}

// qpCounters returns the QP's counters, allocating them at its first
// counted event: a QP that never did anything keeps none (64 K idle QPs
// would otherwise hold 18 MiB of zeros).
func (qp *QP) qpCounters() *QPCounters {
	if qp.counters == nil {
		qp.counters = new(QPCounters)
	}
	return qp.counters
}

// newFrame allocates a frame for op with payloadLen bytes of payload and
// returns it with the offset of the BTH.
func (e *Engine) newFrame(r *wire.Route, op wire.Opcode, payloadLen int) (*link.Buf, []byte, int) {
	n := wire.FrameLen(r, op, payloadLen)
	b := link.Get(n)
	f := b.Bytes()
	return b, f, r.HeaderLen()
}

// icrcOffloaded reports whether a frame on route r goes without its ICRC
// (Config.ICRCOffload).
func (e *Engine) icrcOffloaded(r *wire.Route) bool {
	return e.cfg.ICRCOffload != nil && !r.UDPChecksum && e.cfg.ICRCOffload()
}

// send finishes a frame (IP/UDP headers, pad, ICRC) and queues it.
func (e *Engine) send(qp *QP, b *link.Buf, r *wire.Route) {
	f := b.Bytes()
	if e.cfg.DCQCN != nil && r != &e.ccRoute && qp.congestionControlled() && r.TrafficClass&wire.ECNMask == wire.ECNNotECT {
		// ECN-capable transport, so that a congested switch marks
		// rather than drops (the ICRC masks the ECN bits).
		e.ccRoute = *r
		e.ccRoute.TrafficClass |= wire.ECNECT0
		r = &e.ccRoute
	}
	switch {
	case e.cfg.Metadata:
		r.WriteHeaders(f)
	case e.icrcOffloaded(r):
		r.WriteHeaders(f)
		b.Flags |= link.FlagNoICRC
		e.c[TxICRCOffloaded]++
	default:
		// A frame lent its payload when the link was intact: the link
		// has changed since, and the ICRC needs the bytes.
		b.Materialize()
		r.WriteHeaders(f) // Route.Finish, with the ICRC through the cache
		e.icrcTx.Set(f)
		if r.UDPChecksum {
			wire.SetUDPChecksum(f)
		}
	}
	e.out = append(e.out, b)
	e.count(qp, TxPackets)
	e.countN(qp, TxBytes, uint64(len(f)))
	e.bill.TxPackets++
	e.bill.TxBytes += len(f)
}

// cqe writes a completion into the CQ with number cqn; on overrun the CQ
// is in error and the QP with it.
func (e *Engine) cqe(qp *QP, cqn uint32, wc *WC, solicited bool) {
	if len(e.place.ws) > 0 {
		e.placeWrites(nil) // what a completion reveals is placed first
	}
	if wc.Opcode&WCRecv != 0 && qp.rq != nil {
		qp.rq.retired()
	}
	cq := e.lookupCQ(cqn)
	if cq == nil {
		return
	}
	e.bill.CQEWrites++
	if e.cfg.Billing {
		e.bill.addCQE(cq)
	}
	if ok, overrun := cq.push(wc, solicited); !ok {
		e.c[CQOverruns]++
		if overrun {
			e.cfg.Event(Event{Type: EventCQErr, CQ: cq})
		}
		if qp.attr.State != QPSErr {
			e.toError(qp)
			e.cfg.Event(Event{Type: EventQPFatal, QP: qp})
		}
	}
}
