// Package nicmodel runs rnic's NIC — the same protocol engine, SRAM
// caches, ATU, arbiter and DMA cluster as in real time — as a timing model
// of a hardware RNIC in virtual time.
//
// The engine does the work functionally (packets are built, translated,
// checked and placed exactly as in real time); after every step — one
// packet sent, or one frame received — it hands the model its bill (the
// WQE fetches, cache misses, DMA descriptors and CQE writes the step
// needed), and the model turns the bill into time on the hardware's
// servers:
//
//	doorbell ─MMIO─▶ unit: [QPC miss]─[WQE fetch]─[MPT/MTT misses]─process ─▶ DMA read ─▶ port
//	port ─▶ unit: [QPC miss]─[MPT/MTT misses]─[receive WQE]─process ─▶ DMA write ─▶ CQE write ─▶ host sees it
//
// A processing unit stalls on its dependent PCIe reads (a cache miss must
// come back before the next step of the packet can start), or, with
// engine.misses_in_flight, parks the step with its reads issued and
// serves other QPs until they are back; payload DMA
// runs on the DMA engines, overlapped with the units; everything crosses
// one PCIe link model (sim/timing) with TLP framing and a measured read
// latency curve. A QP's sends are processed in order by one unit at a
// time, so they leave in PSN order, and so are its receives: the two sides
// are separate pipelines, as a requester's and a responder's are, except
// that a send waits for a receive step in progress (it may depend on it).
// While a QP's side is in a unit the other QPs take the free units (the
// arbiter's gate passes the busy QP over; its received frames wait).
// Frames wait for a unit in the receive buffer (engine.rx_buffer_bytes; by
// default lossless, as with PFC).
package nicmodel

import (
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/dma"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/timing"
	"github.com/rnic/rnic/wire"
)

// Config describes one simulated NIC.
type Config struct {
	Profile *profile.HardwareProfile
	Port    *fabric.Port
	// Metadata moves lengths only (no payload bytes, no ICRC): fast, for
	// thousands of QPs and tens of hosts. The default moves real bytes.
	Metadata bool
	// Core is the NIC's core as internal/device assembles it (limits,
	// page size, the profile's caches, DMA engines and arbiter, the
	// micro-TLB, page choice and READ budget); its Engine is the model's.
	Core transport.CoreConfig
	// MTU is the largest path MTU of the port; 0: the profile's link MTU.
	MTU wire.MTU
	// Event receives the engine's asynchronous events; Trace its protocol
	// trace (see transport.Config). Both run inside the simulation, at the
	// virtual time of the step that raised them.
	Event func(transport.Event)
	Trace func(string)
}

// Event kinds of the NIC's handler.
const (
	evProgress int32 = iota // a unit may be free: serve what is waiting
	evDoorbell              // a doorbell write reaches the NIC (Ptr: *transport.QP)
	evTimer                 // the engine's retransmission/RNR deadline
	evCQE                   // completions become visible to the host (Ptr: *transport.CQ, Arg: count)
	evWrite                 // written data becomes visible (Arg: qpn<<32 | bytes)
	evResume                // a parked step's reads are back (Ptr: *parkedStep)
	evDepart                // an atomic's response leaves (Ptr: *parkedStep, its frames)
)

// CQEHandler is told when completions become visible to the host.
type CQEHandler interface {
	CQEVisible(cq *transport.CQ, n int)
}

// WriteHandler is told when data an RDMA WRITE placed becomes visible to
// the host (programs such as perftest's write_lat poll memory for it).
type WriteHandler interface {
	WriteVisible(qpn uint32, bytes int)
}

// Tracer receives the stages of the NIC's work as they are scheduled, for
// the latency breakdown: what happened, when, for which QP.
type Tracer func(at sim.Time, nic *NIC, stage string, qpn uint32)

// NIC is one simulated RNIC.
type NIC struct {
	s    *sim.Sim
	prof *profile.HardwareProfile
	port *fabric.Port
	gid  wire.GID

	// The NIC itself, as in real time.
	Engine *transport.Engine
	ATU    *atu.ATU
	QPs    *transport.Table[transport.QP]
	CQs    *transport.Table[transport.CQ]
	AHs    *transport.AHTable
	dmac   *dma.Cluster

	// The timing model.
	pcie    *timing.PCIe
	pcieBps int64 // the link's bandwidth per direction, bytes/s
	units   *timing.Pool
	dmaq    *timing.Pool
	wqeMM   []int32 // per QP slot: WQEs delivered with their doorbell (BlueFlame)
	// Per QP slot: WQEs read ahead at a doorbell (engine.wqe_prefetch)
	// and not used yet, and when the last such read is back.
	wqePF   []int32
	wqePFAt []sim.Time
	// owner is the QP each slot's WQE counters belong to: a QP destroyed
	// with some unused leaves them to its slot's next QP, which clears
	// them at its first doorbell.
	owner []*transport.QP
	// Per QP slot and direction (0 send, 1 receive): when its last step
	// finishes. A QP's sends are processed in order one at a time, and so
	// are its receives; the two are separate pipelines, as the
	// requester's and the responder's are in an RNIC.
	qpAt [2][]sim.Time
	// parked are the QPs the arbiter's gate held back because their
	// previous send step was still in a unit (at most one per unit).
	parked   []*transport.QP
	isParked []bool   // per QP slot: in parked
	lastTx   sim.Time // packets enter the port in order
	// inFlight counts the steps parked waiting for their reads
	// (engine.misses_in_flight bounds it); spare holds parked steps done
	// with, for the next to reuse (a step parks per miss: no allocation).
	inFlight int
	spare    []*parkedStep
	// The caches' miss tables: per cache, when each entry's read is back
	// (nil: unbounded).
	mshr [numCaches][]sim.Time
	// qpcFill is, per QP slot, when the last read of its context is back:
	// a step that finds the context in the cache before then waits for
	// that read (the miss is merged) rather than reading it again.
	qpcFill []sim.Time
	// mptFill and mttFill are the same for translation entries, by MPT
	// index and by first MTT entry of a step's translation: when the last
	// read of them is back (entries whose reads are back are pruned as
	// the tables grow).
	mptFill, mttFill map[uint32]sim.Time
	// atom is the atomic unit (nil: atomics are not modelled apart).
	atom *atomicUnit
	// respAt is, per QP slot, when the last atomic response waiting for
	// the atomic unit leaves, and respPSN the first such atomic's PSN:
	// the QP's responses and ACKs from that PSN on leave after it (a
	// responder answers in order), while its next requests are already
	// being processed.
	respAt  []sim.Time
	respPSN []wire.PSN

	rxq     []rxFrame
	rxMax   int // receive buffer, bytes (0: no limit)
	rxBytes int // bytes of the frames in rxq
	// txAhead is how far the uplink's queue may reach beyond the last
	// packet handed over before the arbiter takes no more send work:
	// the transmit buffer at line rate (0: no limit).
	txAhead  sim.Time
	txBuf    int      // the transmit buffer, bytes (0: no limit)
	progAt   sim.Time // a progress event is scheduled for this time (0: none)
	timer    *sim.Timer
	cqe      CQEHandler
	wr       WriteHandler
	batch    []*link.Buf
	costs    Costs
	trace    Tracer
	observe  func(*transport.Bill)
	metadata bool
	core     transport.CoreConfig
}

// DMA returns the NIC's DMA cluster.
func (n *NIC) DMA() *dma.Cluster { return n.dmac }

// Core returns the device's configuration, defaults filled in.
func (n *NIC) Core() transport.CoreConfig { return n.core }

// Kick has the NIC look for work now: after a control-path call (a QP
// moved to RTS with work queued, a QP flushed to ERR) that rang no
// doorbell.
func (n *NIC) Kick() { n.scheduleProgress(n.s.Now()) }

// Costs accumulates where the NIC's time went, for the latency breakdown
// and the pipeline's utilisation.
type Costs struct {
	Steps         int
	UnitBusy      sim.Time // processing units, summed
	MissStall     sim.Time // of which waiting for cache misses and WQE fetches
	MissParked    sim.Time // steps' reads waited for parked, the unit serving others (engine.misses_in_flight)
	Parked        int      // steps parked
	WQEPrefetched int      // WQEs a step found read ahead at their doorbell
	MergedMisses  int      // steps that found their context still being read by another's miss, and waited for it
	MissTableWait sim.Time // misses' waits for a free entry of their cache's miss table
	Atomics       int      // atomics run by the atomic unit
	// AtomicLockWait is the atomics' wait for their lock (an atomic to
	// the same address or bucket ahead), AtomicUnitWait for a free
	// atomic unit after it.
	AtomicLockWait, AtomicUnitWait sim.Time
	DMAReadTime                    sim.Time
	DMAWriteTime                   sim.Time
	RxDrops                        int
	WQEByMMIO                      int
	WQEFetched                     int
}

// New builds a NIC attached to a fabric port.
func New(s *sim.Sim, cfg Config) (*NIC, error) {
	p := cfg.Profile
	if p == nil || cfg.Port == nil {
		return nil, errors.New("nicmodel: a profile and a fabric port are required")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pcie, err := timing.NewPCIe(p.PCIeConfig())
	if err != nil {
		return nil, err
	}
	mtu, ok := wire.MTUFromBytes(p.Link.MTUBytes)
	if !ok {
		return nil, fmt.Errorf("nicmodel: link MTU %d is not a RoCE MTU", p.Link.MTUBytes)
	}
	if cfg.MTU != 0 {
		if cfg.MTU.Bytes() > mtu.Bytes() {
			return nil, fmt.Errorf("nicmodel: MTU %d exceeds the profile's link MTU %d", cfg.MTU.Bytes(), mtu.Bytes())
		}
		mtu = cfg.MTU
	}
	// The same device as in real time (transport.NewCore), assembled by
	// the caller.
	hw := cfg.Core
	hw.Defaults()
	maxQP := hw.MaxQP
	n := &NIC{
		s: s, prof: p, port: cfg.Port, gid: wire.GIDFromAddr(cfg.Port.Addr()),
		pcie:     pcie,
		pcieBps:  p.PCIeBytesPerSec(),
		units:    timing.NewPool(max(p.Engine.Units, 1)),
		dmaq:     timing.NewPool(max(p.DMA.Engines, 1)),
		wqeMM:    make([]int32, maxQP),
		wqePF:    make([]int32, maxQP),
		wqePFAt:  make([]sim.Time, maxQP),
		owner:    make([]*transport.QP, maxQP),
		qpAt:     [2][]sim.Time{make([]sim.Time, maxQP), make([]sim.Time, maxQP)},
		isParked: make([]bool, maxQP),
		qpcFill:  make([]sim.Time, maxQP),
		mptFill:  map[uint32]sim.Time{},
		mttFill:  map[uint32]sim.Time{},
		respAt:   make([]sim.Time, maxQP),
		respPSN:  make([]wire.PSN, maxQP),
		rxMax:    p.Engine.RxBufferBytes,
		txAhead:  sim.Time(math.Ceil(float64(p.Engine.TxBufferBytes) * 8 / p.Link.RateGbps)),
		txBuf:    p.Engine.TxBufferBytes,
		metadata: cfg.Metadata,
		atom:     newAtomicUnit(&p.Atomic),
	}
	for i, c := range [numCaches]profile.Cache{p.Caches.QPC, p.Caches.CQC, p.Caches.MPT, p.Caches.MTT} {
		if c.OutstandingMisses > 0 {
			n.mshr[i] = make([]sim.Time, c.OutstandingMisses)
		}
	}
	hw.Engine = transport.Config{
		LocalMTU: mtu, GID: n.gid,
		Doorbell: n.doorbell,
		Billing:  true,
		Metadata: cfg.Metadata,
		DCQCN:    p.DCQCNConfig(),
		TIMELY:   p.TIMELYConfig(),
		Event:    cfg.Event,
		Trace:    cfg.Trace,
	}
	core, err := transport.NewCore(hw)
	if err != nil {
		return nil, fmt.Errorf("nicmodel: %w", err)
	}
	n.Engine, n.ATU, n.QPs, n.CQs, n.AHs, n.dmac = core.Engine, core.ATU, core.QPs, core.CQs, core.AHs, core.DMA
	n.core = core.Config
	n.Engine.SetGate(busyGate{n})
	n.timer = s.NewTimer(n, evTimer, 0)
	cfg.Port.Attach(n)
	cfg.Port.OnUplinkResume(func() { n.scheduleProgress(n.s.Now()) })
	return n, nil
}

// SetCQEHandler sets who hears of visible completions (the workload).
func (n *NIC) SetCQEHandler(h CQEHandler) { n.cqe = h }

// SetTracer sets the stage tracer (nil: off).
func (n *NIC) SetTracer(t Tracer) { n.trace = t }

func (n *NIC) tracef(at sim.Time, stage string, qpn uint32) {
	if n.trace != nil {
		n.trace(at, n, stage, qpn)
	}
}

// leaveNames name a step's packets leaving: a transmit step's requests, or
// the ACKs (and responses) a receive step generates.
var leaveNames = [2]string{"request leaves NIC", "ACK/response leaves NIC"}

// stage names for receive (rx) and transmit steps, prebuilt so that the
// tracer costs nothing when it is off.
var stageNames = [2][5]string{
	{"TX unit starts", "TX context/WQE/translation reads done", "TX unit processed the received packets", "TX unit done (processing)"},
	{"RX unit starts", "RX context/WQE/translation reads done", "RX unit processed the received packets", "RX unit done (processing)"},
}

// SetStepObserver sets who is shown every step's bill as the model
// charges it (nil: no one): a workload attributes the caches' lookups
// and misses to the QPs, and so to the tenants, they were for.
func (n *NIC) SetStepObserver(f func(b *transport.Bill)) { n.observe = f }

// SetWriteHandler sets who hears of visible RDMA WRITE data.
func (n *NIC) SetWriteHandler(h WriteHandler) { n.wr = h }

// GID returns the NIC's GID 0.
func (n *NIC) GID() wire.GID { return n.gid }

// Addr returns the NIC's IP address.
func (n *NIC) Addr() netip.Addr { return n.port.Addr() }

// PCIe returns the NIC's PCIe link model.
func (n *NIC) PCIe() *timing.PCIe { return n.pcie }

// Costs returns where the NIC's time went.
func (n *NIC) Costs() Costs { return n.costs }

// Units returns the processing units' pool (utilisation statistics).
func (n *NIC) Units() *timing.Pool { return n.units }

// DMAEngines returns the DMA engines' pool.
func (n *NIC) DMAEngines() *timing.Pool { return n.dmaq }

// Handle is the NIC's event handler.
func (n *NIC) Handle(s *sim.Sim, ev sim.Event) {
	switch ev.Kind {
	case evProgress:
		if n.progAt == ev.At {
			n.progAt = 0
		}
	case evDoorbell:
		qp := ev.Ptr.(*transport.QP)
		n.Engine.Ring(qp)
	case evTimer:
		n.Engine.Tick(int64(s.Now()))
	case evCQE:
		if n.cqe != nil {
			n.cqe.CQEVisible(ev.Ptr.(*transport.CQ), int(ev.Arg))
		}
		return
	case evWrite:
		if n.wr != nil {
			n.wr.WriteVisible(uint32(ev.Arg>>32), int(uint32(ev.Arg)))
		}
		return
	case evResume:
		n.resume(ev.Ptr.(*parkedStep))
	case evDepart:
		n.depart(ev.Ptr.(*parkedStep))
	}
	n.progress()
}

// KindName names the NIC's events in traces.
func (n *NIC) KindName(k int32) string {
	return [...]string{"progress", "doorbell", "timer", "cqe", "write", "resume", "depart"}[k]
}

// Deliver is the fabric's way in: frames wait for a processing unit in the
// NIC's receive buffer.
func (n *NIC) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		qpn, coalesce := rxInfo(b.Bytes())
		n.tracef(n.s.Now(), "frame arrives", qpn)
		if n.rxMax > 0 && n.rxBytes+b.Len() > n.rxMax {
			n.costs.RxDrops++
			b.Release()
			continue
		}
		n.rxq = append(n.rxq, rxFrame{b: b, qpn: qpn, coalesce: coalesce})
		n.rxBytes += b.Len()
	}
	n.progress()
}

// doorbell is the engine's doorbell hook: the host's MMIO write reaches
// the NIC after the PCIe posted-write latency. A lone WQE small enough
// travels with the doorbell (BlueFlame) and needs no fetch.
func (n *NIC) doorbell(qp *transport.QP, wqes, lastWQEBytes int) {
	e := &n.prof.Engine
	slot, ok := n.slot(qp.QPN)
	if ok && n.owner[slot] != qp {
		n.owner[slot] = qp
		n.wqeMM[slot], n.wqePF[slot] = 0, 0
	}
	size := e.DoorbellBytes
	if ok && wqes == 1 && e.WQEByMMIO && lastWQEBytes <= e.WQEByMMIOMaxBytes {
		size = lastWQEBytes
		n.wqeMM[slot]++
	}
	at := n.pcie.MMIO(n.s.Now(), size)
	n.tracef(at, "doorbell arrives (MMIO)", qp.QPN)
	if k := min(wqes, e.WQEPrefetch); ok && k > 1 {
		// A post list: its WQEs are read in one go from the doorbell's
		// arrival (as many as the prefetch takes; the rest one by one).
		ready := n.pcie.Read(at, k*max(e.WQEBytes, lastWQEBytes))
		n.wqePF[slot] += int32(k)
		n.wqePFAt[slot] = max(n.wqePFAt[slot], ready)
		n.tracef(ready, "WQEs prefetched", qp.QPN)
	}
	n.s.Schedule(sim.Event{At: at, Kind: evDoorbell, Ptr: qp, H: n})
}

// progress serves waiting work while a processing unit is free now:
// received frames first (they carry ACKs and free the peer's window), then
// the arbiter's next packet. Each side of a QP is in one unit at a time:
// its frames wait, or the arbiter's gate passes it over, until its step is
// done, so a free unit takes another QP's work rather than waiting.
func (n *NIC) progress() {
	now := n.s.Now()
	n.unpark(now)
	blocked := false // work waits for a QP that is in a unit
	for {
		unit, start := n.units.Earliest(now)
		if start > now {
			n.scheduleProgress(start)
			break
		}
		if n.takeRx(now) > 0 {
			n.Engine.Receive(int64(now), n.batch)
			clear(n.batch)
			n.charge(unit, now)
			continue
		}
		blocked = len(n.rxq) > 0
		if n.txAhead > 0 {
			// The transmit buffer holds what waits for the wire when the
			// last packet handed over enters it (packets are handed over
			// when their payload will be in, which may be ahead of now).
			// Full, the arbiter picks the next packet when the wire has
			// taken enough: free-txAhead is after lastTx, so by then the
			// buffer measured from now has room. The packets of a
			// priority PFC pauses do not drain: they count apart
			// (UplinkFreeAt leaves them out), and once they fill the
			// priority's buffer the gate passes over its QPs until the
			// resume (pfcFull).
			if free := n.port.UplinkFreeAt(); free-max(now, n.lastTx) > n.txAhead {
				n.scheduleProgress(free - n.txAhead)
				break
			}
		}
		more := n.Engine.Run(int64(now), 1)
		if bill := n.Engine.Bill(); bill.TxPackets == 0 && bill.WQEFetches == 0 && bill.CQEWrites == 0 {
			n.Engine.ResetBill()
			n.Engine.ClearOutbox()
			if more {
				// A turn that sent nothing (window or fence): the engine
				// is waiting for the peer; an arrival will wake it.
				continue
			}
			break
		}
		n.charge(unit, now)
		if !more {
			break
		}
	}
	if blocked || len(n.parked) > 0 {
		// Work waits for a QP whose step is in a unit: look again when
		// the first such step is done, not at every unit's finish.
		if t := n.firstUnblocked(now); t != sim.Never {
			n.scheduleProgress(t)
		}
	}
	if d, ok := n.Engine.NextDeadline(); ok {
		at := max(sim.Time(d), now)
		if cur, armed := n.timer.Deadline(); !armed || cur != at {
			n.timer.Reset(at)
		}
	}
}

// takeRx moves into n.batch the received frames a unit takes next: the
// first waiting frame whose QP is not in a unit and, if it is a WRITE or
// SEND request, the requests of the same kind of that QP waiting behind
// it (up to rxBurst, in order), which the responder answers with one
// coalesced ACK, as hardware does when requests queue up. READ and atomic
// requests each need their own response, and responses and ACKs their own
// completion, so they are taken one at a time. The other frames keep their
// order. It returns how many frames it took.
func (n *NIC) takeRx(now sim.Time) int {
	for i := range n.rxq {
		first := n.rxq[i]
		if n.busy(first.qpn, rxSide, now) {
			continue
		}
		n.batch = append(n.batch[:0], first.b)
		n.rxBytes -= first.b.Len()
		coalesce := first.coalesce
		kept := i
		for j, f := range n.rxq[i+1:] {
			if coalesce && len(n.batch) < rxBurst {
				if f.qpn == first.qpn && f.coalesce {
					n.batch = append(n.batch, f.b)
					n.rxBytes -= f.b.Len()
					continue
				}
				if f.qpn == first.qpn {
					coalesce = false // keep the QP's frames in order
				}
			} else if !coalesce {
				kept += copy(n.rxq[kept:], n.rxq[i+1+j:])
				break
			}
			n.rxq[kept] = f
			kept++
		}
		clear(n.rxq[kept:])
		n.rxq = n.rxq[:kept]
		return len(n.batch)
	}
	return 0
}

// rxFrame is a received frame waiting for a unit, with what takeRx needs
// of its BTH read once on arrival.
type rxFrame struct {
	b        *link.Buf
	qpn      uint32
	coalesce bool
}

// The two sides of a QP's processing.
const (
	txSide = 0
	rxSide = 1
)

// firstUnblocked returns when the first step that holds back waiting work
// finishes: a waiting frame's QP's receive step, a parked QP's transmit
// step; Never if none of them is in a unit at now (a parked step wakes
// the NIC when it resumes, PFC when the uplink resumes). A QP's step ends
// when its unit frees, so this is the first unit's finish that unblocks
// anything: waking at every unit's finish instead cost an event per step
// for nothing while one QP keeps the NIC busy.
func (n *NIC) firstUnblocked(now sim.Time) sim.Time {
	t := sim.Never
	for _, f := range n.rxq {
		if slot, ok := n.slot(f.qpn); ok {
			if at := n.qpAt[rxSide][slot]; at > now && at < t {
				t = at
			}
		}
	}
	for _, qp := range n.parked {
		if at := n.qpAt[txSide][qp.QPN-firstQPN]; at > now && at < t {
			t = at
		}
	}
	return t
}

// busy reports whether QP qpn's last step on one side is still in a unit
// at now.
func (n *NIC) busy(qpn uint32, side int, now sim.Time) bool {
	slot, ok := n.slot(qpn)
	return ok && n.qpAt[side][slot] > now
}

// rxParked reports whether QP qpn's receive step is parked waiting for
// its reads: what the QP sends may follow from it, so it sends nothing
// meanwhile.
func (n *NIC) rxParked(qpn uint32) bool {
	slot, ok := n.slot(qpn)
	return ok && n.qpAt[rxSide][slot] == sim.Never
}

// firstQPN is the number of the first QP; QP qpn's per-QP state is at
// slot qpn-firstQPN.
const firstQPN = transport.FirstQPN

// slot returns QP qpn's slot, false for a number no QP can have (a frame
// for an unknown QP, a step for none).
func (n *NIC) slot(qpn uint32) (int, bool) {
	i := int(qpn) - firstQPN
	return i, i >= 0 && i < len(n.wqeMM)
}

// unpark gives the arbiter back the QPs whose step has finished.
func (n *NIC) unpark(now sim.Time) {
	kept := n.parked[:0]
	for _, qp := range n.parked {
		if n.busy(qp.QPN, txSide, now) || n.pfcFull(qp) {
			kept = append(kept, qp)
			continue
		}
		n.isParked[qp.QPN-firstQPN] = false
		n.Engine.Unpark(qp)
	}
	clear(n.parked[len(kept):])
	n.parked = kept
}

// pfcFull reports whether PFC pauses the priority of the QP's packets
// (its traffic class) with that priority's transmit buffer full: more
// would only pile up in front of the paused uplink. Never with the
// unlimited buffer, nor for a UD QP, whose packets take their traffic
// class from each work request's address handle, not from the QP.
func (n *NIC) pfcFull(qp *transport.QP) bool {
	if n.txBuf == 0 || qp.Type == transport.UD {
		return false
	}
	paused, waiting := n.port.UplinkPaused(qp.TrafficClass() >> 5)
	return paused && waiting >= n.txBuf
}

// busyGate is the arbiter's gate: it passes over a QP that is in a unit,
// or whose priority PFC has stopped (pfcFull); the QP is parked and given
// back by unpark when its step is done and its priority resumed
// (OnUplinkResume wakes the NIC).
type busyGate struct{ n *NIC }

// Parked reports whether the gate holds QP index q back (sched.Parker):
// its doorbells wait, unpark rings it.
func (g busyGate) Parked(q uint32) bool {
	qp := g.n.QPs.ByIndex(q)
	if qp == nil {
		return false
	}
	slot, ok := g.n.slot(qp.QPN) // none for QP1 (GSI): it is never parked
	return ok && g.n.isParked[slot]
}

func (g busyGate) Admit(q uint32, gr sched.Grant) (sched.Grant, bool) {
	n := g.n
	qp := n.QPs.ByIndex(q)
	if qp == nil || !n.busy(qp.QPN, txSide, n.s.Now()) && !n.rxParked(qp.QPN) && !n.pfcFull(qp) {
		return gr, true
	}
	if slot := qp.QPN - firstQPN; !n.isParked[slot] { // a parked QP rung again is refused again
		n.isParked[slot] = true
		n.parked = append(n.parked, qp)
	}
	return gr, false
}

func (n *NIC) scheduleProgress(at sim.Time) {
	if n.progAt != 0 && n.progAt <= at {
		return
	}
	n.progAt = at
	n.s.Schedule(sim.Event{At: at, Kind: evProgress, H: n})
}

// charge charges the engine's step and starts its next bill. The bill
// is read where the engine keeps it: a step's bill is some 300 bytes,
// copied out twice per packet before.
func (n *NIC) charge(unit int, now sim.Time) {
	n.chargeBill(unit, now, n.Engine.Bill())
	n.Engine.ResetBill()
}

// chargeBill turns one step's bill into time: the step's dependent reads
// (cache misses, WQE fetches) are issued, and the unit either stalls on
// them or, while fewer than engine.misses_in_flight steps are parked, parks
// the step until they are back (park, resume); finishStep charges the
// rest.
func (n *NIC) chargeBill(unit int, now sim.Time, b *transport.Bill) {
	p := n.prof
	if n.observe != nil {
		n.observe(b)
	}
	slot, hasQP := n.slot(b.QP)
	kind := txSide
	if b.RxPackets > 0 {
		kind = rxSide
	}
	start := now
	if hasQP {
		// A step waits for the QP's previous step on its side. A send
		// step also waits for a receive step in progress: what it sends
		// (a READ response, requests the ACK let through) follows from
		// what that step received. (A step without a QP, for a frame
		// the engine dropped, waits for nothing.)
		start = max(start, n.after(kind, slot))
		if kind == txSide {
			start = max(start, n.after(rxSide, slot))
		}
	}
	t := start
	qpn := b.QP
	n.tracef(start, stageNames[kind][0], qpn)
	read := func(bytes int) { t = n.pcie.Read(t, bytes) }
	miss := func(c int, bytes int) { t = n.missRead(c, t, bytes) }
	if hasQP && n.qpcFill[slot] > t {
		// The context is on its way (another step's miss): wait for it.
		t = n.qpcFill[slot]
		n.costs.MergedMisses++
	}
	for range b.QPCMisses {
		miss(qpcCache, p.Caches.QPC.EntryBytes)
		if hasQP {
			n.qpcFill[slot] = t
		}
	}
	for range b.CQCMisses {
		miss(cqcCache, p.Caches.CQC.EntryBytes)
	}
	for range b.WQEFetches {
		if hasQP && n.wqeMM[slot] > 0 {
			n.wqeMM[slot]--
			n.costs.WQEByMMIO++
			continue
		}
		if hasQP && n.wqePF[slot] > 0 {
			n.wqePF[slot]--
			n.costs.WQEPrefetched++
			t = max(t, n.wqePFAt[slot])
			continue
		}
		n.costs.WQEFetched++
		read(max(p.Engine.WQEBytes, b.WQEBytes/max(b.WQEFetches, 1)))
	}
	if b.RecvWQEFetches > 0 {
		read(b.RecvWQEBytes)
	}
	if b.MPTLookups > 0 {
		t = n.fill(n.mptFill, b.MPTIndex, t, b.MPTMisses, mptCache, p.Caches.MPT.EntryBytes)
	}
	if b.MTTLookups > 0 {
		t = n.fill(n.mttFill, b.MTTIndex, t, b.MTTMisses, mttCache, p.Caches.MTT.EntryBytes)
	}
	stall := t - start
	if stall > 0 && hasQP && n.inFlight < p.Engine.MissesInFlight {
		n.park(start, t, kind, slot, b)
		return
	}
	n.finishStep(unit, start, t, kind, slot, hasQP, b, n.Engine.Outbox())
	n.Engine.ClearOutbox()
}

// The caches, as the miss tables index them.
const (
	qpcCache = iota
	cqcCache
	mptCache
	mttCache
	numCaches
)

// missRead reads a cache entry of bytes that missed at t, through the
// cache's miss table: with every entry busy, the read waits for the first
// to free. It returns when the entry is back.
func (n *NIC) missRead(c int, t sim.Time, bytes int) sim.Time {
	tbl := n.mshr[c]
	if tbl == nil {
		return n.pcie.Read(t, bytes)
	}
	e := 0
	for i, at := range tbl {
		if at < tbl[e] {
			e = i
		}
	}
	if tbl[e] > t {
		n.costs.MissTableWait += tbl[e] - t
		t = tbl[e]
	}
	tbl[e] = n.pcie.Read(t, bytes)
	return tbl[e]
}

// fill reads a step's misses of one translation cache from t, and
// returns when they are back. The step's entries are named by key (its
// last translation's): a step that misses records when its read of them
// is back; one that found them in the cache waits until then if that is
// later (the read is still on its way: the miss is merged), as a step
// whose QP context is being read does (qpcFill).
func (n *NIC) fill(tbl map[uint32]sim.Time, key uint32, t sim.Time, misses, c, bytes int) sim.Time {
	if misses == 0 {
		if at, ok := tbl[key]; ok && at > t {
			n.costs.MergedMisses++
			return at
		}
		return t
	}
	for range misses {
		t = n.missRead(c, t, bytes)
	}
	pruneDone(tbl, pruneFills, n.s.Now())
	tbl[key] = t
	return t
}

// pruneFills is the size past which a fill table drops the reads that
// are back.
const pruneFills = 4096

// after returns when QP slot's last step on one side finishes; a parked
// step (Never) is not waited for by a step that got past the gate.
func (n *NIC) after(side, slot int) sim.Time {
	if at := n.qpAt[side][slot]; at != sim.Never {
		return at
	}
	return 0
}

// parkedStep is a step whose reads (cache misses, WQE fetches) were
// issued at issued and are back at ready; its unit serves others
// meanwhile, and it resumes then on the first free unit.
type parkedStep struct {
	ready      sim.Time
	kind, slot int
	bill       transport.Bill
	out        []*link.Buf // its packets, built, waiting to leave
}

// park sets a step aside until its reads are back: the QP's side is busy
// (frames for it wait; the arbiter passes it over) until it resumes.
func (n *NIC) park(issued, ready sim.Time, kind, slot int, b *transport.Bill) {
	ps := n.spareStep()
	cqs, out := ps.bill.CQs, ps.out
	ps.ready, ps.kind, ps.slot, ps.bill = ready, kind, slot, *b
	ps.bill.CQs = append(cqs[:0], b.CQs...) // the engine reuses its array
	ps.out = append(out[:0], n.Engine.Outbox()...)
	n.Engine.ClearOutbox()
	n.qpAt[kind][slot] = sim.Never
	n.inFlight++
	n.costs.MissParked += ready - issued
	n.costs.Parked++
	n.tracef(issued, "parked for its reads", b.QP)
	n.s.Schedule(sim.Event{At: ready, Kind: evResume, Ptr: ps, H: n})
}

// spareStep returns a parked step done with, or a new one.
func (n *NIC) spareStep() *parkedStep {
	if k := len(n.spare); k > 0 {
		ps := n.spare[k-1]
		n.spare = n.spare[:k-1]
		return ps
	}
	return new(parkedStep)
}

// depart hands an atomic step's packets to the port now that its
// response is ready, behind what the port has been handed.
func (n *NIC) depart(ps *parkedStep) {
	at := max(n.s.Now(), n.lastTx)
	n.port.SendAt(at, ps.out)
	n.lastTx = at
	n.tracef(at, leaveNames[rxSide], ps.bill.QP)
	clear(ps.out)
	n.spare = append(n.spare, ps)
}

// resume finishes a parked step on the unit free first, now that its reads
// are back.
func (n *NIC) resume(ps *parkedStep) {
	now := n.s.Now()
	n.inFlight--
	n.qpAt[ps.kind][ps.slot] = 0
	unit, start := n.units.Earliest(now)
	n.tracef(now, "parked step's reads back", ps.bill.QP)
	n.finishStep(unit, start, start, ps.kind, ps.slot, true, &ps.bill, ps.out)
	// The QP's side is busy until the step is done: look again then.
	n.scheduleProgress(n.qpAt[ps.kind][ps.slot])
	clear(ps.out) // the port has the frames now
	n.spare = append(n.spare, ps)
}

// finishStep charges a step whose reads are back at t (start <= t: the
// unit has stalled from start for them): the unit processes its packets,
// payload DMA runs on a DMA engine, its packets (out) leave when their
// payload is in, in order, and its completions are written after its
// payload writes and become visible to the host a PCIe write later.
func (n *NIC) finishStep(unit int, start, t sim.Time, kind, slot int, hasQP bool, b *transport.Bill, out []*link.Buf) {
	p := n.prof
	qpn := b.QP
	stall := t - start
	if stall > 0 {
		n.tracef(t, stageNames[kind][1], qpn)
	}
	// A receive step places data once its received packets are
	// processed; the packets it sends (ACKs, an atomic's response) are
	// built after, while the placement proceeds.
	rxProc := sim.Time(int64(b.RxPackets) * p.Engine.RxPacketNs)
	txProc := sim.Time(int64(b.TxPackets) * p.Engine.TxPacketNs)
	if rxProc+txProc == 0 {
		txProc = sim.Time(p.Engine.TxPacketNs) // a local operation, a completion
	}
	_, done := n.units.ServeOn(unit, start, stall+rxProc+txProc)
	placed := t + rxProc
	if rxProc > 0 {
		n.tracef(placed, stageNames[kind][2], qpn)
	}
	n.tracef(done, stageNames[kind][3], qpn)
	if hasQP {
		n.qpAt[kind][slot] = done
	}
	n.costs.Steps++
	n.costs.UnitBusy += stall + rxProc + txProc
	n.costs.MissStall += stall

	// A DMA engine is occupied while it issues a descriptor's requests and
	// moves its data (its overhead plus the data's time at PCIe speed);
	// it does not wait out a read's round trip: reads are split
	// transactions, bounded by the PCIe model's read tags.
	ready := done
	ov := sim.Time(p.DMA.DescriptorOverheadNs)
	if b.DMAReadBytes > 0 {
		eng, ds := n.dmaq.Earliest(done)
		n.dmaq.ServeOn(eng, done, ov+n.pcieTime(b.DMAReadBytes))
		fin := n.pcie.Read(ds+ov, b.DMAReadBytes)
		n.costs.DMAReadTime += fin - ds
		ready = max(ready, fin)
		n.tracef(fin, "payload DMA read done", qpn)
	}
	writesDone := placed
	if b.DMAWriteBytes > 0 {
		eng, ds := n.dmaq.Earliest(placed)
		n.dmaq.ServeOn(eng, placed, ov+n.pcieTime(b.DMAWriteBytes))
		sent, visible := n.pcie.Write(ds+ov, b.DMAWriteBytes)
		n.costs.DMAWriteTime += sent - ds
		writesDone = sent
		n.tracef(visible, "payload written, visible to host", qpn)
		if n.wr != nil && b.RxWriteBytes > 0 {
			n.s.Schedule(sim.Event{At: visible, Kind: evWrite, Arg: uint64(b.QP)<<32 | uint64(uint32(b.RxWriteBytes)), H: n})
		}
	}
	late := false // the packets leave at an event of their own (depart)
	switch {
	case b.Atomics > 0 && n.atom == nil:
		// A read-modify-write of host memory: a read and a posted write.
		r := n.pcie.Read(done, 8*b.Atomics)
		sent, _ := n.pcie.Write(r, 8*b.Atomics)
		ready = max(ready, r)
		writesDone = max(writesDone, sent)
	case b.Atomics > 0:
		resp, written := n.atomics(done, b)
		writesDone = max(writesDone, written)
		if hasQP {
			if n.respAt[slot] <= n.s.Now() {
				n.respPSN[slot] = wire.PSN(b.AtomicPSN)
			}
			n.respAt[slot] = max(n.respAt[slot], resp)
		}
	}
	if hasQP && n.respAt[slot] > n.s.Now() && respondsFrom(out, n.respPSN[slot]) {
		// The QP's answers wait for its atomic's original value (the
		// engine built the response at once; the atomic unit decides
		// when it may leave), and its later answers follow it. They
		// join the port's order when they are ready, at an event of
		// their own, so as not to hold back the other QPs' packets.
		ready = max(ready, n.respAt[slot])
		n.respAt[slot] = ready
		late = true
	}
	// The port is handed the packets now with the time they leave: it
	// queues them for the wire from then, without an event per packet.
	depart := max(ready, n.lastTx)
	if len(out) > 0 && late {
		ps := n.spareStep()
		ps.out = append(ps.out[:0], out...)
		ps.bill.QP = qpn
		n.s.Schedule(sim.Event{At: ready, Kind: evDepart, Ptr: ps, H: n})
	} else if len(out) > 0 {
		n.port.SendAt(depart, out)
		n.lastTx = depart
		n.tracef(depart, leaveNames[kind], qpn)
	}
	if b.CQEWrites > 0 {
		_, visible := n.pcie.Write(max(writesDone, placed), b.CQEWrites*p.Engine.CQEBytes)
		n.tracef(visible, "CQE visible to host", qpn)
		for _, c := range b.CQs {
			n.s.Schedule(sim.Event{At: visible, Kind: evCQE, Ptr: c.CQ, Arg: uint64(c.N), H: n})
		}
	}
}

// rxBurst bounds the frames of one QP a unit takes in one step.
const rxBurst = 16

// rxInfo reads a frame's BTH: its destination QP (0 if the frame is too
// short to have one; the engine drops such frames anyway), and whether it
// is a WRITE or SEND request (whose ACKs coalesce).
func rxInfo(f []byte) (qpn uint32, coalesce bool) {
	bth, ok := bthOf(f)
	if !ok {
		return 0, false
	}
	fl := bth.Opcode().Info().Flags
	return bth.DestQP(), fl.Has(wire.FlagRequest) && (fl.Has(wire.FlagWrite) || fl.Has(wire.FlagSend))
}

// respondsFrom reports whether any of a step's frames is a response (an
// ACK, a READ or atomic response: what a responder sends, in PSN order)
// for PSN psn or a later one.
func respondsFrom(out []*link.Buf, psn wire.PSN) bool {
	for _, b := range out {
		bth, ok := bthOf(b.Bytes())
		if ok && !bth.Opcode().Info().Flags.Has(wire.FlagRequest) && !bth.PSN().Before(psn) {
			return true
		}
	}
	return false
}

// bthOf returns a RoCEv2 frame's BTH, false if the frame is too short to
// have one.
func bthOf(f []byte) (wire.BTH, bool) {
	h := wire.IPv4HeaderSize
	if len(f) > 0 && f[0]>>4 == 6 {
		h = wire.IPv6HeaderSize
	}
	h += wire.UDPHeaderSize
	if len(f) < h+wire.BTHSize {
		return nil, false
	}
	return wire.BTH(f[h:]), true
}

// pcieTime is the time n bytes take at the PCIe link's bandwidth.
func (n *NIC) pcieTime(bytes int) sim.Time {
	bps := n.pcieBps
	return sim.Time((int64(bytes)*1_000_000_000 + bps - 1) / bps)
}

var _ link.Dispatcher = (*NIC)(nil)
