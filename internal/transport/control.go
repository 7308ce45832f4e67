package transport

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/queue"
	"github.com/rnic/rnic/wire"
)

// The control path: create, modify, query and destroy QPs. The driver
// calls these on the engine's goroutine or under its lock, as firmware
// serializes commands with the QP's processing on hardware.

// ErrAttr is wrapped by every refused attribute value.
var ErrAttr = errors.New("invalid QP attribute")

// ErrNotSupported is wrapped when a feature this NIC lacks is asked for.
var ErrNotSupported = errors.New("not supported")

// ErrBusy is wrapped when a resource that exists once is taken (QP1).
var ErrBusy = errors.New("resource busy")

// GSIQPN is the general services interface's QP number, and GSIQKey the
// only Q_Key it takes (IBTA §13.5.1, §10.2.4): management datagrams (the
// connection manager's) go from QP1 to QP1.
const (
	GSIQPN  = 1
	GSIQKey = 0x80010000
)

// Bounds of a QP's rings (see CreateQP).
const (
	maxRingDepth  = 1 << 20
	maxRingSGEs   = 1 << 24
	maxRingInline = 1 << 28
)

// CreateQP builds a QP in RESET with number qpn in table slot index (both
// allocated by the device) and publishes it in the QP table.
//
// With in.GSI it builds QP1 instead, the general services interface
// (IBTA §13.5.1): a UD QP numbered GSIQPN whatever qpn and index say,
// outside the QP table, one per device, taking only GSIQKey.
func (e *Engine) CreateQP(in *QPInit, qpn, index uint32) (*QP, error) {
	if in.Type != RC && in.Type != UC && in.Type != UD {
		return nil, fmt.Errorf("%w: QP type %v", ErrNotSupported, in.Type)
	}
	if in.GSI {
		switch {
		case in.Type != UD:
			return nil, fmt.Errorf("%w: the GSI QP is a UD QP, not %v", ErrAttr, in.Type)
		case e.gsi != nil:
			return nil, fmt.Errorf("%w: QP1 exists already", ErrBusy)
		}
		qpn, index = GSIQPN, uint32(e.cfg.QPs.Cap())
	}
	if in.SendCQ == nil || in.RecvCQ == nil {
		return nil, fmt.Errorf("%w: a QP needs a send CQ and a receive CQ", ErrAttr)
	}
	c := in.Cap
	// The rings are host memory the application gives the NIC; refuse
	// sizes no device would offer rather than allocate them.
	if d, sge := max(c.MaxSendWR, c.MaxRecvWR), max(c.MaxSendSGE, c.MaxRecvSGE); d > maxRingDepth ||
		uint64(d)*uint64(max(sge, 1)) > maxRingSGEs || uint64(c.MaxSendWR)*uint64(c.MaxInlineData) > maxRingInline {
		return nil, fmt.Errorf("%w: queues of %d/%d WRs with %d/%d SGEs and %d inline bytes are too large",
			ErrAttr, c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData)
	}
	if m := in.SendMem; m != nil && !m.fits(c.MaxSendWR, queue.WQEHeaderLen) {
		return nil, fmt.Errorf("%w: a send ring of %d bytes in %d-byte slots for %d WRs", ErrAttr, len(m.Mem), m.SlotLen, c.MaxSendWR)
	}
	if m := in.RecvMem; m != nil && (in.SRQ != nil || !m.fits(c.MaxRecvWR, queue.RecvHeaderLen)) {
		return nil, fmt.Errorf("%w: a receive ring of %d bytes in %d-byte slots for %d WRs", ErrAttr, len(m.Mem), m.SlotLen, c.MaxRecvWR)
	}
	if err := e.arb.SetQueue(index, 0, 1); err != nil {
		return nil, err
	}
	qp := &QP{
		QPN: qpn, Type: in.Type, PD: in.PD, Opaque: in.Opaque,
		scq: in.SendCQ, rcq: in.RecvCQ, srq: in.SRQ, sigAll: in.SigAll,
		engine: e, index: index,
		sq: newSendRing(max(c.MaxSendWR, 1), max(c.MaxSendSGE, 1), c.MaxInlineData, in.SendMem),
	}
	recvSGE := c.MaxRecvSGE
	if in.SRQ != nil {
		recvSGE = in.SRQ.MaxSGE()
		in.SRQ.Refs.Add(1)
	} else {
		qp.rq = newRecvRing(max(c.MaxRecvWR, 1), max(c.MaxRecvSGE, 1), in.RecvMem)
	}
	qp.resp.recv.sge = make([]SGE, 0, max(recvSGE, 1))
	qp.attr.Cap = c
	qp.attr.Port = 1
	qp.attr.AV.Src = e.cfg.GID
	qp.attr.AV.SrcPort = e.sourcePort(qpn)
	in.SendCQ.Refs.Add(1)
	in.RecvCQ.Refs.Add(1)
	if in.GSI {
		qp.gsi = true
		e.gsi = qp
		return qp, nil
	}
	e.cfg.QPs.Set(index, qp)
	return qp, nil
}

// DestroyQP removes a QP. Outstanding work requests are discarded without
// completions, as ibv_destroy_qp does.
func (e *Engine) DestroyQP(qp *QP) {
	qp.destroyed = true
	e.dropRefs(qp)
	for i := range e.xw {
		e.xw[i].drop(qp)
	}
	if qp.req.readWait {
		e.req.readWaiters = slices.DeleteFunc(e.req.readWaiters, func(q *QP) bool { return q == qp })
	}
	e.req.releaseReads(qp)
	e.cfg.ATU.UnbindQP(qp.QPN)
	qp.state.Store(uint32(QPSReset))
	e.arb.Remove(qp.index)
	e.qpc.Invalidate(qp.QPN)
	e.unschedule(qp)
	if qp.gsi {
		e.gsi = nil
	} else {
		e.cfg.QPs.Release(qp.index)
	}
	qp.scq.Refs.Add(-1)
	qp.rcq.Refs.Add(-1)
	if qp.srq != nil {
		qp.srq.Refs.Add(-1)
	}
}

// Query returns the QP's attributes.
func (e *Engine) Query(qp *QP) QPAttr {
	a := qp.attr
	a.CurState = a.State
	return a
}

// Modify changes a QP's state and attributes (ibv_modify_qp): the
// transition must be in the state table with every required attribute and
// no attribute it does not take, and every value in range.
func (e *Engine) Modify(qp *QP, a *QPAttr, mask AttrMask) error {
	cur := qp.attr.State
	next := cur
	if mask&AttrState != 0 {
		next = a.State
	}
	if mask&AttrCurState != 0 && a.CurState != cur {
		return fmt.Errorf("%w: cur_state %v, but the QP is in %v", ErrAttr, a.CurState, cur)
	}
	if err := checkTransition(qp.Type, cur, next, mask); err != nil {
		return err
	}
	if err := e.checkValues(qp, a, mask); err != nil {
		return err
	}

	at := &qp.attr
	if mask&AttrAccessFlags != 0 {
		at.AccessFlags = a.AccessFlags
	}
	if mask&AttrPKeyIndex != 0 {
		at.PKeyIndex = a.PKeyIndex
	}
	if mask&AttrPort != 0 {
		at.Port = a.Port
	}
	if mask&AttrQKey != 0 {
		at.QKey = a.QKey
	}
	if mask&AttrAV != 0 {
		src := at.AV.Src
		at.AV = a.AV
		at.SL = a.SL
		if a.AV.Src == (wire.GID{}) {
			at.AV.Src = src
		}
		at.AV.SrcPort = e.sourcePort(qp.QPN)
		// The service level picks the arbiter's priority level, as a
		// hardware RNIC maps SLs to traffic classes.
		lvl := min(int(a.SL), e.cfg.Arbiter.Levels-1)
		if err := e.arb.SetQueue(qp.index, max(lvl, 0), 1); err != nil {
			return err
		}
	}
	if mask&AttrPathMTU != 0 {
		at.PathMTU = a.PathMTU
		qp.mtu = uint32(a.PathMTU.Bytes())
	}
	if mask&AttrTimeout != 0 {
		at.Timeout = a.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		at.RetryCnt = a.RetryCnt
		qp.req.retries = a.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		at.RNRRetry = a.RNRRetry
		qp.req.rnrRetries = a.RNRRetry
	}
	if mask&AttrRQPSN != 0 {
		at.RQPSN = a.RQPSN
		qp.resp.epsn = a.RQPSN
	}
	if mask&AttrMaxQPRdAtomic != 0 {
		at.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&AttrMinRNRTimer != 0 {
		at.MinRNRTimer = a.MinRNRTimer
	}
	if mask&AttrSQPSN != 0 {
		at.SQPSN = a.SQPSN
		qp.req.psn, qp.req.una, qp.req.maxPSN = a.SQPSN, a.SQPSN, a.SQPSN
		qp.rd = nil // nothing kept from the old PSN space
	}
	if mask&AttrMaxDestRdAtomic != 0 {
		at.MaxDestRdAtomic = a.MaxDestRdAtomic
		// The resources are allocated at the first READ or atomic
		// request (allocRes): a QP that only sends and writes never
		// holds them.
		n := max(int(a.MaxDestRdAtomic), 1)
		if int(qp.resp.resCap) != n {
			qp.resp.res, qp.resp.resCap = nil, uint8(n)
			qp.resp.queue.reset()
		}
	}
	if mask&AttrDestQPN != 0 {
		at.DestQPN = a.DestQPN
	}
	if mask&AttrEnSQDAsyncNotify != 0 {
		at.EnSQDAsyncNotify = a.EnSQDAsyncNotify
	}
	if qp.Type == UD && qp.mtu == 0 {
		qp.mtu = uint32(e.cfg.LocalMTU.Bytes())
	}

	if next != cur {
		e.enter(qp, cur, next)
	}
	// The NIC executes the modify command on the QP's context, which
	// leaves it in the QPC, as a firmware command writes a context
	// through the NIC's context cache: a miss counts (qpc_cache_miss),
	// and nothing is billed to the data path.
	if _, _, hit := e.qpc.Get(qp.QPN, e.loadQPFn); hit {
		e.c[QPCCacheHit]++
	} else {
		e.c[QPCCacheMiss]++
	}
	return nil
}

// sourcePort spreads QPs over UDP source ports for ECMP, as rxe does
// (0xC000 | hash of the QPN), unless the link fixes the port.
func (e *Engine) sourcePort(qpn uint32) uint16 {
	if e.cfg.SrcPort != 0 {
		return e.cfg.SrcPort
	}
	h := qpn * 0x9E3779B1
	return 0xC000 | uint16(h>>18)&0x3FFF
}

func (e *Engine) checkValues(qp *QP, a *QPAttr, mask AttrMask) error {
	switch {
	case mask&AttrAltPath != 0:
		return fmt.Errorf("%w: alternate paths (APM)", ErrNotSupported)
	case mask&AttrCap != 0:
		return fmt.Errorf("%w: resizing a QP's queues", ErrNotSupported)
	case mask&AttrRateLimit != 0:
		return fmt.Errorf("%w: per-QP rate limits", ErrNotSupported)
	case mask&AttrPKeyIndex != 0 && a.PKeyIndex != 0:
		return fmt.Errorf("%w: pkey_index %d (the P_Key table has one entry, 0xffff)", ErrAttr, a.PKeyIndex)
	case qp.gsi && mask&AttrQKey != 0 && a.QKey != GSIQKey:
		return fmt.Errorf("%w: qkey %#x (QP1 takes %#x only)", ErrAttr, a.QKey, uint32(GSIQKey))
	case mask&AttrPort != 0 && a.Port != 1:
		return fmt.Errorf("%w: port %d (the device has port 1)", ErrAttr, a.Port)
	case mask&AttrAccessFlags != 0 && a.AccessFlags&^(atu.LocalWrite|atu.RemoteWrite|atu.RemoteRead|atu.RemoteAtomic|atu.MWBind|atu.FlushGlobal|atu.FlushPersistent) != 0:
		return fmt.Errorf("%w: qp_access_flags %v", ErrAttr, a.AccessFlags)
	case mask&AttrPathMTU != 0 && (a.PathMTU < wire.MTU256 || a.PathMTU > wire.MTU4096):
		return fmt.Errorf("%w: path_mtu %d", ErrAttr, a.PathMTU)
	case mask&AttrPathMTU != 0 && a.PathMTU > e.cfg.LocalMTU:
		return fmt.Errorf("%w: path_mtu %d bytes exceeds the port's active MTU %d", ErrAttr, a.PathMTU.Bytes(), e.cfg.LocalMTU.Bytes())
	case mask&AttrTimeout != 0 && a.Timeout > 31:
		return fmt.Errorf("%w: timeout %d (5 bits)", ErrAttr, a.Timeout)
	case mask&AttrRetryCnt != 0 && a.RetryCnt > 7:
		return fmt.Errorf("%w: retry_cnt %d (3 bits)", ErrAttr, a.RetryCnt)
	case mask&AttrRNRRetry != 0 && a.RNRRetry > 7:
		return fmt.Errorf("%w: rnr_retry %d (3 bits)", ErrAttr, a.RNRRetry)
	case mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return fmt.Errorf("%w: min_rnr_timer %d (5 bits)", ErrAttr, a.MinRNRTimer)
	case mask&AttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > e.cfg.MaxQPInitRdAtom:
		return fmt.Errorf("%w: max_rd_atomic %d exceeds the device's max_qp_init_rd_atom %d", ErrAttr, a.MaxRdAtomic, e.cfg.MaxQPInitRdAtom)
	case mask&AttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > e.cfg.MaxQPRdAtom:
		return fmt.Errorf("%w: max_dest_rd_atomic %d exceeds the device's max_qp_rd_atom %d", ErrAttr, a.MaxDestRdAtomic, e.cfg.MaxQPRdAtom)
	case mask&AttrRQPSN != 0 && a.RQPSN > wire.PSNMask:
		return fmt.Errorf("%w: rq_psn %#x exceeds 24 bits", ErrAttr, uint32(a.RQPSN))
	case mask&AttrSQPSN != 0 && a.SQPSN > wire.PSNMask:
		return fmt.Errorf("%w: sq_psn %#x exceeds 24 bits", ErrAttr, uint32(a.SQPSN))
	case mask&AttrDestQPN != 0 && a.DestQPN > 0xFFFFFF:
		return fmt.Errorf("%w: dest_qp_num %#x exceeds 24 bits", ErrAttr, a.DestQPN)
	case mask&AttrAV != 0 && a.AV.Dst == (wire.GID{}):
		return fmt.Errorf("%w: address vector without a destination GID", ErrAttr)
	}
	return nil
}

// enter runs the effects of a state change.
func (e *Engine) enter(qp *QP, from, to QPState) {
	qp.attr.State = to
	switch to {
	case QPSReset:
		e.reset(qp)
	case QPSInit:
		// Receive WQEs may be posted from INIT on; nothing to do.
	case QPSRTR:
		qp.resp.nakSent = false
	case QPSRTS:
		qp.attr.SQDraining = false
		qp.req.drainSent = false
		if from == QPSSQE && qp.req.compIdx == qp.req.next {
			// (A flush behind work that waits for its frames sent by
			// reference keeps its indices: flushBehindRefs.)
			qp.req.next = qp.sq.ci.Load()
			qp.req.compIdx = qp.req.next
			qp.req.off = 0
		}
	case QPSSQD:
		qp.attr.SQDraining = true
		qp.req.drainSent = false
	case QPSErr:
		qp.state.Store(uint32(to))
		e.flush(qp)
		return
	}
	qp.state.Store(uint32(to))
	if to == QPSSQD {
		e.req.checkDrained(qp)
	}
	if e.req.requesterReady(qp) {
		// Work queued before the transition (an SQD or SQE QP back in
		// RTS) goes out now. A QP with none is not scheduled: its step
		// would do nothing.
		e.arb.Ring(qp.index)
	}
}

// reset empties the QP's queues without completions and clears its
// transport state (ibv_modify_qp to RESET).
func (e *Engine) reset(qp *QP) {
	e.arb.Remove(qp.index)
	e.dropRefs(qp)
	qp.sq.post.Lock()
	// The queue is emptied: what was posted is dropped. A producer index
	// of the application's own stays where it is (it is the
	// application's), and the engine starts from it.
	p := restartIndex(qp.sq.pi, &qp.sq.piOwn)
	qp.sq.setCI(p)
	qp.sq.fetched = p
	qp.sq.bad = false
	qp.sq.post.Unlock()
	if qp.rq != nil {
		qp.rq.post.Lock()
		p := restartIndex(qp.rq.pi, &qp.rq.piOwn)
		qp.rq.setCI(p)
		qp.rq.setDone(p) // what was posted counts as retired
		qp.rq.bad.Store(false)
		qp.rq.post.Unlock()
	}
	res := qp.resp.res
	clear(res)
	e.req.releaseReads(qp)
	qp.req = reqState{next: qp.sq.fetched, compIdx: qp.sq.fetched} // the requester and the completer start at the ring's index
	qp.resp = respState{res: res, resCap: qp.resp.resCap, recv: recvSlot{sge: qp.resp.recv.sge[:0]}}
	e.unschedule(qp)
	qp.cc = nil // a QP connected again starts at the line rate
	qp.attr = QPAttr{Cap: qp.attr.Cap, Port: 1, AV: wire.Route{Src: qp.attr.AV.Src, SrcPort: qp.attr.AV.SrcPort}}
	qp.mtu = 0
}

// restartIndex is where a queue starts again after RESET: 0 for a queue
// whose producer index is the engine's own (set back to 0), the
// program's producer index for a ring of the program's.
func restartIndex(pi, own *atomic.Uint32) uint32 {
	if pi == own {
		pi.Store(0)
		return 0
	}
	return pi.Load()
}

// toError moves a QP to ERR: everything outstanding completes with
// WR_FLUSH_ERR.
func (e *Engine) toError(qp *QP) {
	if qp.attr.State == QPSErr {
		return
	}
	qp.attr.State = QPSErr
	qp.state.Store(uint32(QPSErr))
	e.flush(qp)
}

// toSQE moves a UC or UD QP to SQE after a send error: the send queue is
// flushed until the application moves the QP back to RTS.
func (e *Engine) toSQE(qp *QP) {
	if qp.attr.State == QPSErr || qp.attr.State == QPSSQE {
		return
	}
	qp.attr.State = QPSSQE
	qp.state.Store(uint32(QPSSQE))
	e.flushSQ(qp)
}

// flush completes every outstanding WQE of an ERR QP with WR_FLUSH_ERR.
func (e *Engine) flush(qp *QP) {
	e.arb.Remove(qp.index)
	e.unschedule(qp)
	qp.req.rnrWait, qp.req.retry = false, false
	qp.resp.queue.reset()
	qp.resp.ack = false
	qp.resp.errPending = false
	e.flushSQ(qp)
	resp := &qp.resp
	if resp.haveRecv {
		resp.haveRecv = false
		e.count(qp, RespCQEFlushError)
		wc := WC{WRID: resp.recv.wrid, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.QPN}
		e.cqe(qp, qp.recvCQN(), &wc, false)
	}
	if qp.rq != nil {
		rq := qp.rq
		pi := rq.pi.Load()
		if pi-rq.ci.Load() > rq.depth {
			pi = rq.ci.Load() // garbage: what the program posted is unknown, nothing is flushed
		}
		for ci := rq.ci.Load(); ci != pi; ci++ {
			e.count(qp, RespCQEFlushError)
			wc := WC{WRID: le.Uint64(rq.slotMem(ci)[queue.RecvWRID:]), Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.QPN}
			rq.setCI(ci + 1)
			e.cqe(qp, qp.recvCQN(), &wc, false)
		}
	} else if qp.srq != nil && !qp.resp.lastWQE {
		qp.resp.lastWQE = true
		e.cfg.Event(Event{Type: EventQPLastWQEReached, QP: qp})
	}
}

// flushSQ completes every WQE on the send queue with WR_FLUSH_ERR.
func (e *Engine) flushSQ(qp *QP) {
	sq := qp.sq
	e.fetchSend(qp) // the WQEs published, for their wr_ids
	ci, pi := sq.ci.Load(), sq.fetched
	for ; ci != pi; ci++ {
		w := sq.slot(ci)
		if w.state == wqePending && qp.refsOut(ci) {
			e.flushBehindRefs(qp, ci, pi)
			return
		}
		e.count(qp, ReqCQEFlushError)
		var op WCOpcode
		if w.op < numWROpcodes {
			op = wrInfos[w.op].wc
		}
		wc := WC{WRID: w.wrid, Status: WCWRFlushErr, Opcode: op, QPNum: qp.QPN}
		sq.setCI(ci + 1)
		e.cqe(qp, qp.sendCQN(), &wc, false)
	}
	qp.req.next, qp.req.compIdx, qp.req.off, qp.req.rdAtomic = pi, pi, 0, 0
	e.req.releaseReads(qp)
}

// flushBehindRefs is flushSQ from index ci, a UC or UD work request whose
// frames sent by reference are still on their way: its buffer is not the
// program's yet, and completions keep their order. Every WQE up to pi
// that does not wait so is marked flushed, to be retired in order once
// the ones before it complete (retireConsumed).
func (e *Engine) flushBehindRefs(qp *QP, ci, pi uint32) {
	for ; ci != pi; ci++ {
		w := qp.sq.slot(ci)
		if w.state == wqeDone || w.state == wqePending && qp.refsOut(ci) {
			continue
		}
		e.count(qp, ReqCQEFlushError)
		e.wqeDone(qp, w, WCWRFlushErr)
	}
	qp.req.next, qp.req.off = pi, 0
	e.retire(qp)
}

// ForgetCQ drops a destroyed CQ's context from the CQC cache.
func (e *Engine) ForgetCQ(cqn uint32) { e.cqc.Invalidate(cqn) }

// QPCounters returns a QP's counters.
func (e *Engine) QPCounters(qp *QP) QPCounters {
	if qp.counters == nil {
		return QPCounters{}
	}
	return *qp.counters
}
