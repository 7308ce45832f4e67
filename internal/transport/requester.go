package transport

import (
	"encoding/binary"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// reqState is the requester's and completer's part of the QPC.
//
// The send queue is walked by three indices (all modulo the ring):
//
//	sq.ci <= compIdx <= next <= sq.pi
//	  retired   acknowledged   sent (next may be partly sent: off > 0)
//
// PSNs: una is the oldest PSN not acknowledged, psn the next to send, and
// maxPSN one past the highest ever sent (go-back-N resends below it).
type reqState struct {
	psn     wire.PSN
	una     wire.PSN
	maxPSN  wire.PSN
	next    uint32
	off     uint32
	compIdx uint32
	nakPSN  wire.PSN

	// The retry window. A local ACK timeout says the responder did not
	// answer in time: it may be slow, its intake overflowing. Resending
	// everything outstanding at once (go-back-N) would flood it again, so
	// after a timeout the requester keeps at most cwnd PSNs outstanding
	// (a READ's response PSNs count), starting from one request, and lets
	// the window grow with every PSN acknowledged: doubling up to
	// ssthresh, half the flight at the timeout, then one PSN per window,
	// until it is wide open again (cwnd 0). The timer is not stretched, so
	// a dead peer still fails the QP after (retry_cnt + 1) timeouts.
	cwnd, ssthresh uint32
	cwndAcked      uint32   // PSNs acknowledged toward the next +1 above ssthresh
	cwndUna        wire.PSN // una when the window last grew

	// readPSNs are the response PSNs of this QP's READs outstanding, its
	// share of the engine's read budget; readWait says it waits for room.
	readPSNs uint32
	readWait bool

	rdAtomic   uint8 // READ/atomic WQEs outstanding (at most max_rd_atomic)
	retries    uint8 // retry_cnt left
	rnrRetries uint8 // rnr_retry left (7: infinite)
	rnrWait    bool  // waiting for the RNR timer
	retry      bool  // go back to una at the next turn
	recovering bool  // went back; ignore stale evidence until progress
	nakSeen    bool  // a sequence NAK for nakPSN was acted on
	drainSent  bool  // SQ_DRAINED reported
}

// requestOpcodes maps (WR opcode, first, last) to the RC opcode; UC adds
// 0x20 (same low five bits), UD has its own two.
var requestOpcodes = func() (t [numWROpcodes][2][2]wire.Opcode) {
	set := func(op WROpcode, only, first, middle, last wire.Opcode) {
		t[op][1][1], t[op][1][0], t[op][0][0], t[op][0][1] = only, first, middle, last
	}
	set(WRSend, wire.OpRCSendOnly, wire.OpRCSendFirst, wire.OpRCSendMiddle, wire.OpRCSendLast)
	set(WRSendWithImm, wire.OpRCSendOnlyImm, wire.OpRCSendFirst, wire.OpRCSendMiddle, wire.OpRCSendLastImm)
	set(WRSendWithInv, wire.OpRCSendOnlyInv, wire.OpRCSendFirst, wire.OpRCSendMiddle, wire.OpRCSendLastInv)
	set(WRRDMAWrite, wire.OpRCWriteOnly, wire.OpRCWriteFirst, wire.OpRCWriteMiddle, wire.OpRCWriteLast)
	set(WRRDMAWriteWithImm, wire.OpRCWriteOnlyImm, wire.OpRCWriteFirst, wire.OpRCWriteMiddle, wire.OpRCWriteLastImm)
	set(WRRDMARead, wire.OpRCReadRequest, wire.OpRCReadRequest, wire.OpRCReadRequest, wire.OpRCReadRequest)
	set(WRAtomicCmpAndSwp, wire.OpRCCompareSwap, wire.OpRCCompareSwap, wire.OpRCCompareSwap, wire.OpRCCompareSwap)
	set(WRAtomicFetchAndAdd, wire.OpRCFetchAdd, wire.OpRCFetchAdd, wire.OpRCFetchAdd, wire.OpRCFetchAdd)
	set(WRFlush, wire.OpRCFlush, wire.OpRCFlush, wire.OpRCFlush, wire.OpRCFlush)
	set(WRAtomicWrite, wire.OpRCAtomicWrite, wire.OpRCAtomicWrite, wire.OpRCAtomicWrite, wire.OpRCAtomicWrite)
	return t
}()

func requestOpcode(t QPType, op WROpcode, first, last bool) wire.Opcode {
	o := requestOpcodes[op][b2i(first)][b2i(last)]
	switch t {
	case UC:
		return o | 0x20
	case UD:
		if op == WRSendWithImm {
			return wire.OpUDSendOnlyImm
		}
		return wire.OpUDSendOnly
	}
	return o
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// packets returns how many packets a message of n bytes takes at mtu.
func packets(n, mtu uint32) uint32 {
	if n == 0 {
		return 1
	}
	return (n + mtu - 1) / mtu
}

// ackTimeout returns the local ACK timeout in ns: 4.096 µs × 2^timeout.
func ackTimeout(t uint8) int64 {
	if t == 0 {
		return 0 // infinite
	}
	return 4096 << t
}

// requesterReady reports whether the requester could send now.
func (rqr *requester) requesterReady(qp *QP) bool {
	st := QPState(qp.state.Load())
	if st != QPSRTS && st != QPSSQD {
		return st == QPSSQE && qp.sq.ci.Load() != qp.sq.pi.Load()
	}
	req := &qp.req
	if req.rnrWait {
		return false
	}
	if req.retry {
		return true
	}
	if req.next == qp.sq.fetched {
		// Nothing fetched is left to start: ready if the poster has
		// published more (the turn fetches it).
		return qp.sq.pi.Load() != qp.sq.fetched
	}
	w := qp.sq.slot(req.next)
	if w.state == wqeDone || w.bad {
		return true
	}
	if req.off == 0 && w.state == wqePosted {
		if st == QPSSQD {
			return false
		}
		info := &wrInfos[w.op]
		if w.flags&SendFence != 0 && req.rdAtomic > 0 {
			return false
		}
		if info.readAtom && req.rdAtomic >= qp.attr.MaxRdAtomic {
			return false
		}
		if w.op == WRRDMARead && !rqr.readFits(qp, w) {
			return false
		}
	}
	return !rqr.windowFull(qp, w)
}

// readPSNSpan bounds the PSNs a requester has outstanding: half of the
// 2^23 half-space in which a 24-bit PSN compares unambiguously.
const readPSNSpan = 1 << 22

// windowFull reports whether the requester must wait for acknowledgements
// before sending w's next packet. The window (MaxUnackedPSNs) bounds the
// request packets a resend may have to repeat; a READ request is one
// packet however many response PSNs it claims, so READs are bounded by
// max_rd_atomic and by the PSN space instead: a 1 MiB READ (1024 PSNs at
// MTU 1024) must not keep the next READ from being sent.
func (rqr *requester) windowFull(qp *QP, w *sendWQE) bool {
	e := rqr.e
	if qp.Type != RC {
		return false
	}
	out := qp.req.psn.Diff(qp.req.una)
	want := int32(1)
	if w.op == WRRDMARead {
		want = int32(packets(w.length-min(w.length, qp.req.off), qp.mtu))
		if out > 0 && out+want > readPSNSpan {
			return true
		}
	} else if out >= int32(e.cfg.MaxUnackedPSNs) {
		return true
	}
	// After a timeout: at most cwnd PSNs, but always one request.
	c := qp.req.cwnd
	return c != 0 && out > 0 && out+want > int32(c)
}

// cutWindow shrinks the retry window to one request after a local ACK
// timeout (see reqState).
func (rqr *requester) cutWindow(qp *QP) {
	e := rqr.e
	req := &qp.req
	req.ssthresh = max(uint32(req.maxPSN.Diff(req.una))/2, 2)
	req.cwnd, req.cwndAcked, req.cwndUna = 1, 0, req.una
	e.count(qp, RetryWindowCuts)
}

// growWindow widens the retry window by what was acknowledged since it
// last grew (see reqState), and opens it when it is wider than the
// requester's window.
func (rqr *requester) growWindow(qp *QP) {
	e := rqr.e
	req := &qp.req
	if req.cwnd == 0 {
		return
	}
	d := req.una.Diff(req.cwndUna)
	if d <= 0 {
		return
	}
	req.cwndUna = req.una
	acked := uint32(d)
	if req.cwnd < req.ssthresh {
		req.cwnd += acked
	} else {
		req.cwndAcked += acked
		for req.cwndAcked >= req.cwnd {
			req.cwndAcked -= req.cwnd
			req.cwnd++
		}
	}
	if req.cwnd >= 2*e.cfg.MaxUnackedPSNs {
		req.cwnd = 0
	}
}

// readFits reports whether the READ w may start now within the engine's
// read budget (Config.MaxReadPSNs: the response PSNs of all QPs' READs
// outstanding); if not, qp waits for room. A READ larger than the whole
// budget starts when nothing else is outstanding.
func (rqr *requester) readFits(qp *QP, w *sendWQE) bool {
	e := rqr.e
	if e.cfg.MaxReadPSNs == 0 || rqr.readPSNs == 0 {
		return true
	}
	if rqr.readPSNs+packets(w.length-min(w.length, qp.req.off), qp.mtu) <= rqr.readBudget {
		return true
	}
	if !qp.req.readWait {
		qp.req.readWait = true
		rqr.readWaiters = append(rqr.readWaiters, qp)
	}
	if !w.rdWaited {
		w.rdWaited = true
		e.count(qp, ReadBudgetWaits)
	}
	return false
}

// The read budget backs off as the local ACK timer fires, and recovers as
// READs complete: outstanding READs take a slow responder's answers for
// as long as it needs to send them all, and beyond the timeout they would
// all be asked for again. It halves at each timeout of a QP waiting for a
// READ (down to readBudgetMin) and grows back by a quarter of each
// completed READ's packets, up to Config.MaxReadPSNs.
const readBudgetMin = 64

func (rqr *requester) readBudgetCut() {
	e := rqr.e
	if e.cfg.MaxReadPSNs != 0 {
		rqr.readBudget = max(rqr.readBudget/2, min(readBudgetMin, e.cfg.MaxReadPSNs))
	}
}

func (rqr *requester) readBudgetGrow(n uint32) {
	e := rqr.e
	if e.cfg.MaxReadPSNs != 0 {
		rqr.readBudget = min(rqr.readBudget+max(n/4, 1), e.cfg.MaxReadPSNs)
	}
}

// readReserve takes the READ w's response PSNs from the read budget as
// it starts (sent for the first time, or again after a rewind).
func (rqr *requester) readReserve(qp *QP, w *sendWQE) {
	n := packets(w.length-min(w.length, qp.req.off), qp.mtu)
	w.rdRes = n
	qp.req.readPSNs += n
	rqr.readPSNs += n
}

// readRelease gives a READ's response PSNs back to the read budget when it
// is no longer outstanding (completed, failed, or to be sent again), and
// wakes the QPs that waited for room.
func (rqr *requester) readRelease(qp *QP, w *sendWQE) {
	n := w.rdRes
	if n == 0 {
		return
	}
	w.rdRes = 0
	qp.req.readPSNs -= n
	rqr.readPSNs -= n
	rqr.wakeReadWaiters()
}

// releaseReads gives back every READ reservation of qp (its send queue is
// flushed, reset or destroyed).
func (rqr *requester) releaseReads(qp *QP) {
	sq := qp.sq
	for i := sq.ci.Load(); i != sq.fetched; i++ {
		sq.slot(i).rdRes = 0
	}
	rqr.readPSNs -= qp.req.readPSNs
	qp.req.readPSNs = 0
	rqr.wakeReadWaiters()
}

// wakeReadWaiters rings every QP waiting for the read budget: each tries
// again, and those that still do not fit wait again. (Waking only as many
// as the room would take, oldest first, spreads the budget over more QPs
// at once, and against a slow peer that serves one QP's READs at a time
// each waits longer for its answers and times out more.)
func (rqr *requester) wakeReadWaiters() {
	e := rqr.e
	for _, q := range rqr.readWaiters {
		q.req.readWait = false
		if !q.destroyed {
			e.arb.Ring(q.index)
		}
	}
	clear(rqr.readWaiters)
	rqr.readWaiters = rqr.readWaiters[:0]
}

// serveRequests sends packets of the WQEs at the head of the send queue,
// within the grant.
func (rqr *requester) serveRequests(qp *QP, g sched.Grant) (pkts, bytes int) {
	e := rqr.e
	st := QPState(qp.state.Load())
	if st == QPSSQE {
		e.flushSQ(qp)
		return 0, 0
	}
	if st != QPSRTS && st != QPSSQD {
		return 0, 0
	}
	req, sq := &qp.req, qp.sq
	if req.rnrWait {
		return 0, 0
	}
	if req.retry {
		rqr.rewind(qp)
	}
	if qp.rd != nil && qp.rd.resendPending {
		qp.rd.resendPending = false
		n, ok := e.comp.resendRead(qp)
		if !ok {
			e.retire(qp)
			return pkts, bytes
		}
		if n >= 0 {
			pkts++
		}
	}
	if !e.fetchSend(qp) {
		// The program's producer index is garbage: its QP goes to
		// the error state (what was fetched is flushed), the
		// asynchronous error says why; other QPs go on.
		e.toError(qp)
		e.cfg.Event(Event{Type: EventQPFatal, QP: qp})
		return pkts, bytes
	}
	for pkts < g.Packets && bytes < g.Bytes {
		if req.next == sq.fetched {
			break
		}
		w := sq.slot(req.next)
		if w.state == wqeDone { // a local operation finished before a rewind
			req.next++
			continue
		}
		if w.bad {
			// The fetch refused it: a local QP operation error, which
			// moves the QP to the error state (its completion says so).
			e.wqeDone(qp, w, WCLocQPOpErr)
			req.next++
			e.retire(qp)
			return pkts, bytes
		}
		info := &wrInfos[w.op]
		if w.state == wqePosted {
			if st == QPSSQD && req.off == 0 {
				break // draining: start nothing new
			}
			if w.flags&SendFence != 0 && req.rdAtomic > 0 {
				break
			}
			if info.local {
				e.bill.WQEFetches++
				e.bill.WQEBytes += sendWQEBytes(qp.Type, w)
				rqr.executeLocal(qp, w)
				req.next++
				e.retire(qp)
				if QPState(qp.state.Load()) != st {
					return pkts, bytes
				}
				continue
			}
			if info.readAtom && req.rdAtomic >= qp.attr.MaxRdAtomic {
				break
			}
			if w.op == WRRDMARead && !rqr.readFits(qp, w) {
				break
			}
			if qp.Type == UD && w.length > qp.mtu {
				e.wqeDone(qp, w, WCLocLenErr)
				req.next++
				e.retire(qp)
				return pkts, bytes
			}
			if req.off == 0 {
				// Starting a WQE: the NIC reads it from the send queue
				// (a resend reads it again, as on hardware).
				e.bill.WQEFetches++
				e.bill.WQEBytes += sendWQEBytes(qp.Type, w)
				w.firstPSN = req.psn
				w.lastPSN = req.psn.Add(packets(w.length, qp.mtu) - 1)
				if info.atomic || info.nonPosted {
					w.lastPSN = req.psn // one request, one response PSN
				}
			}
			if rqr.windowFull(qp, w) {
				break
			}
			w.state = wqePending
			if info.readAtom {
				req.rdAtomic++
			}
			if w.op == WRRDMARead {
				rqr.readReserve(qp, w)
			}
		}
		if rqr.windowFull(qp, w) {
			break
		}
		if e.gatherBurst > 1 {
			if k := rqr.burstLen(qp, w, info, g, pkts, bytes); k > 0 {
				if n, ok := rqr.sendBurst(qp, w, info, k); ok {
					pkts += k
					bytes += n
					continue
				}
			}
		}
		n, ok := rqr.sendRequest(qp, w, info)
		if !ok {
			e.retire(qp)
			return pkts, bytes
		}
		pkts++
		bytes += n
	}
	e.retire(qp) // UC/UD WQEs complete once sent
	return pkts, bytes
}

// sendRequest builds and queues the next packet of w. It reports false if
// the WQE failed locally (it is then complete with an error).
func (rqr *requester) sendRequest(qp *QP, w *sendWQE, info *wrInfo) (int, bool) {
	e := rqr.e
	req := &qp.req
	route := &qp.attr.AV
	var udRoute wire.Route
	dest := qp.attr.DestQPN
	if qp.Type == UD {
		udRoute = w.ah.Route
		udRoute.Src = qp.attr.AV.Src
		udRoute.SrcPort = qp.attr.AV.SrcPort
		route = &udRoute
		dest = w.rqpn
	}
	p := rqr.buildRequest(qp, w, info, route, dest, req.psn, req.off)
	if p.n > 0 {
		if w.op == WRAtomicWrite {
			// The 8 bytes are in the WQE, as the program's memory held them.
			binary.LittleEndian.PutUint64(p.payload, w.cmpAdd)
		} else if w.inline {
			e.copyInline(qp, p.payload, qp.sq.inlineData(req.next)[p.off:p.off+p.n])
		} else if fault := rqr.gatherRequest(qp, route, &p); fault != atu.OK {
			p.b.Release()
			e.wqeDone(qp, w, WCLocProtErr)
			return 0, false
		}
	}
	rqr.finishRequest(qp, w, info, route, &p)
	return int(p.n), true
}

// request is a request packet being built: its frame, where its payload
// goes, and what finishRequest needs of it.
type request struct {
	b        *link.Buf
	payload  []byte // n bytes of the frame, for the DMA (or inline copy)
	psn      wire.PSN
	off, n   uint32 // the payload's offset in the message, and length
	pad      int
	padAt    int // where the pad starts in the frame
	op       wire.Opcode
	readAtom bool
	last     bool
	ackReq   bool
}

// buildRequest makes the frame of w's packet at psn and message offset
// off and writes its transport headers; the payload is left to fill.
func (rqr *requester) buildRequest(qp *QP, w *sendWQE, info *wrInfo, route *wire.Route, dest uint32, psn wire.PSN, off uint32) request {
	e := rqr.e
	req := &qp.req
	mtu := qp.mtu
	var n uint32
	var first, last bool
	switch {
	case info.readAtom:
		first, last = true, true
		if w.op == WRAtomicWrite {
			n = wire.AtomicWriteSize
		}
	default:
		n = min(w.length-off, mtu)
		first, last = off == 0, off+n >= w.length
	}
	op := requestOpcode(qp.Type, w.op, first, last)
	oi := op.Info()
	b, f, h := e.newFrame(route, op, int(n))
	pad := wire.PadLen(int(n))
	// AckReq on the last packet, every AckReqEvery packets of a long
	// message, and where the retry window closes: the responder ACKs
	// only what asks for it, and the window waits for that ACK.
	ackReq := qp.Type == RC && (last || uint32(psn.Diff(w.firstPSN))%e.cfg.AckReqEvery == e.cfg.AckReqEvery-1 ||
		(req.cwnd != 0 && uint32(psn.Diff(req.una))+1 >= req.cwnd))
	wire.BTH(f[h:]).Encode(&wire.BTHFields{
		Opcode:   op,
		SE:       last && w.flags&SendSolicited != 0 && (info.imm || w.op == WRSend || w.op == WRSendWithInv),
		PadCount: uint8(pad),
		PKey:     wire.DefaultPKey,
		DestQP:   dest,
		AckReq:   ackReq,
		PSN:      psn,
	})
	if o := oi.Offset(wire.HdrRETH); o >= 0 {
		va, length := w.raddr, w.length
		if w.op == WRRDMARead { // a resumed READ asks for the rest
			va += uint64(off)
			length -= off
		}
		wire.RETH(f[h+o:]).Encode(va, w.rkey, length)
	}
	if o := oi.Offset(wire.HdrFETH); o >= 0 {
		wire.FETH(f[h+o:]).Encode(uint8(w.rqkey), uint8(w.rqkey>>8))
	}
	if o := oi.Offset(wire.HdrAtomicETH); o >= 0 {
		swapAdd, compare := w.swap, w.cmpAdd
		if w.op == WRAtomicFetchAndAdd {
			swapAdd, compare = w.cmpAdd, 0
		}
		wire.AtomicETH(f[h+o:]).Encode(w.raddr, w.rkey, swapAdd, compare)
	}
	if o := oi.Offset(wire.HdrImmDt); o >= 0 {
		wire.ImmDt(f[h+o:]).SetImm(w.imm)
	}
	if o := oi.Offset(wire.HdrIETH); o >= 0 {
		wire.IETH(f[h+o:]).SetRKey(w.invKey)
	}
	if o := oi.Offset(wire.HdrDETH); o >= 0 {
		qkey := w.rqkey
		if qkey&0x80000000 != 0 { // high bit: use the QP's own Q_Key
			qkey = qp.attr.QKey
		}
		wire.DETH(f[h+o:]).Encode(qkey, qp.QPN)
	}
	p := request{b: b, psn: psn, off: off, n: n, pad: pad, padAt: h + oi.HdrLen + int(n), op: op, readAtom: info.readAtom, last: last, ackReq: ackReq}
	if n > 0 {
		p.payload = f[h+oi.HdrLen : p.padAt]
	}
	return p
}

// finishRequest pads and queues a built request whose payload is in
// place, and advances the send queue past it.
func (rqr *requester) finishRequest(qp *QP, w *sendWQE, info *wrInfo, route *wire.Route, p *request) {
	e := rqr.e
	req := &qp.req
	if p.n > 0 {
		clear(p.b.Bytes()[p.padAt : p.padAt+p.pad])
	}
	psn := p.psn
	e.send(qp, p.b, route)
	if e.cfg.TIMELY != nil && (p.ackReq || psn.Before(req.maxPSN)) {
		e.probeSent(qp, uint32(psn), psn.Before(req.maxPSN))
	}
	if psn.Before(req.maxPSN) {
		e.count(qp, RetransPackets)
		if info.readAtom && e.cfg.Trace != nil {
			e.tracef("qp %#x requester: resend %v psn %v", qp.QPN, p.op, psn)
		}
	}
	switch {
	case info.readAtom:
		req.psn = w.lastPSN.Next()
		req.off = 0
		req.next++
	case p.last:
		req.psn = psn.Next()
		req.off = 0
		if qp.Type != RC {
			e.sentByRef(qp, w, req.next) // done, or once its frames are consumed
		}
		req.next++
	default:
		req.psn = psn.Next()
		req.off = p.off + p.n
	}
	if req.psn.After(req.maxPSN) {
		req.maxPSN = req.psn
	}
	if qp.Type == RC && qp.timer.retransAt == 0 {
		if t := ackTimeout(qp.attr.Timeout); t != 0 {
			qp.timer.retransAt = e.now + t
			e.schedule(qp)
		}
	}
}

// MaxGatherBurst bounds Engine.SetGatherBurst: the packets a requester
// builds before it gathers their payloads with one DMA access.
const MaxGatherBurst = 64

// SetGatherBurst has the requester build up to n packets of a SEND or
// WRITE at once and gather their payloads with one DMA access (the
// bus's vectored gather: one process_vm_readv for a program's memory,
// where each packet would make one), when the host memory behind the
// DMA engines supports it; 0 or 1 turns it off (the default: a gather
// from the program's own memory costs a copy either way). A NIC that
// serves other processes turns it on. The packets, their order and their
// bytes on the wire are the same either way.
func (e *Engine) SetGatherBurst(n int) {
	e.gatherBurst = min(max(n, 0), MaxGatherBurst)
	if !e.cfg.DMA.Vectored() {
		e.gatherBurst = 0
	}
}

// burstLen is how many packets of w, from the next, sendBurst may build
// at once: none unless the burst is on and two or more packets of the
// message are left; no more than the retry window takes, nor than the
// grant's room (packets, and bytes, which the loop of serveRequests
// checks before each packet).
func (rqr *requester) burstLen(qp *QP, w *sendWQE, info *wrInfo, g sched.Grant, pkts, bytes int) int {
	e := rqr.e
	req := &qp.req
	if w.inline || info.readAtom || qp.Type == UD || req.cwnd != 0 || w.length-req.off <= qp.mtu {
		return 0
	}
	k := min(e.gatherBurst, int(packets(w.length-req.off, qp.mtu)))
	if qp.Type == RC {
		k = min(k, int(e.cfg.MaxUnackedPSNs)-int(req.psn.Diff(req.una)))
	}
	room := 0
	for room < k && pkts+room < g.Packets && bytes < g.Bytes {
		bytes += int(qp.mtu)
		room++
	}
	if room < 2 {
		return 0
	}
	return room
}

// sendBurst sends the next k packets of w (burstLen's), their payloads
// gathered with one DMA access. If the gather faults, it sends nothing
// and reports false: the caller sends packet by packet, and the faulting
// packet fails the WQE as it would alone.
func (rqr *requester) sendBurst(qp *QP, w *sendWQE, info *wrInfo, k int) (int, bool) {
	e := rqr.e
	req := &qp.req
	route := &qp.attr.AV
	ps := rqr.burst[:k]
	dsts := rqr.dsts[:k]
	psn, off := req.psn, req.off
	for i := range ps {
		ps[i] = rqr.buildRequest(qp, w, info, route, qp.attr.DestQPN, psn, off)
		dsts[i] = ps[i].payload
		psn, off = psn.Next(), off+ps[i].n
	}
	first := ps[0].off
	total := off - first
	segs, f := e.translateSGL(qp, qp.PD, qp.sq.sges(req.next), uint64(first), uint64(total), atu.LocalRead)
	if f == atu.OK {
		f = e.dmaGatherV(qp, dsts, int(total), segs)
	}
	e.releaseSegs(segs)
	clear(dsts)
	if f != atu.OK {
		for i := range ps {
			ps[i].b.Release()
			ps[i] = request{}
		}
		return 0, false
	}
	for i := range ps {
		rqr.finishRequest(qp, w, info, route, &ps[i])
		ps[i] = request{}
	}
	return int(total), true
}

// gatherRequest fills request p's payload from the SGL of the WQE being
// sent: by reference to the program's memory where Config.PayloadRefs
// allows it (RC, ICRC offloaded, one extent of the program's own memory),
// else by a DMA gather. Either way the same translation checks the
// access first, and a retransmission translates and lends again.
func (rqr *requester) gatherRequest(qp *QP, route *wire.Route, p *request) atu.Fault {
	e := rqr.e
	sgl := qp.sq.sges(qp.req.next)
	lend := e.cfg.PayloadRefs && !qp.gsi && !e.cfg.Metadata && e.icrcOffloaded(route)
	segs, f := e.windowSGL(&e.xw[xwGather], qp, p.off == 0 && p.last, qp.PD, sgl, uint64(p.off), uint64(len(p.payload)), atu.LocalRead)
	if f == atu.OK && !(lend && rqr.lendPayload(qp, p, segs)) {
		f = e.dmaGather(qp, p.payload, segs)
	}
	e.releaseSegs(segs)
	return f
}

// lendPayload makes request p's payload a reference to segs, if they
// are one extent of the program's own memory; false: gather them.
func (rqr *requester) lendPayload(qp *QP, p *request, segs []atu.Seg) bool {
	mem, region, ok := rqr.e.cfg.DMA.Lend(segs)
	if !ok || len(mem) != len(p.payload) {
		return false
	}
	l := rqr.e.lending(qp)
	p.b.SetRef(cap(p.b.Bytes())-cap(p.payload), mem, region, &l.loan)
	if qp.Type != RC {
		// Its work completes once the frame is consumed (byref.go).
		s := &l.slots[qp.req.next%qp.sq.depth]
		s.out.Add(1)
		p.b.SetConsumer(s)
	}
	rqr.e.c[TxPayloadRefs]++ // this NIC's DMA engines move none of it
	return true
}

// scatter translates [off, off+len(src)) of a local SGL for writing and has
// a DMA engine copy src into it. pd is the SGL's protection domain.
func (e *Engine) scatter(qp *QP, pd uint32, sgl []SGE, off uint64, src []byte) atu.Fault {
	segs, f := e.translateSGL(qp, pd, sgl, off, uint64(len(src)), atu.LocalWrite)
	if f == atu.OK {
		f = e.dmaScatter(qp, segs, src)
	}
	e.releaseSegs(segs)
	return f
}

// translateSGL translates bytes [off, off+n) of an SGL with the given
// rights into host segments (in the engine's scratch slice). The SGL must
// cover the range: a shorter one is FaultBounds.
func (e *Engine) translateSGL(qp *QP, pd uint32, sgl []SGE, off, n uint64, access atu.Access) ([]atu.Seg, atu.Fault) {
	segs := e.segs[:0]
	for _, s := range sgl {
		if n == 0 {
			break
		}
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		take := min(uint64(s.Length)-off, n)
		var f atu.Fault
		segs, f = e.translate(&atu.Request{Key: s.LKey, PD: pd, QPN: qp.QPN, VA: s.Addr + off, Len: take, Access: access}, segs)
		if f != atu.OK {
			return segs, f
		}
		off = 0
		n -= take
	}
	if n != 0 {
		return segs, atu.FaultBounds
	}
	return segs, atu.OK
}

// releaseSegs hands the scratch slice back, dropping its references to
// host memory. One that a long SGL grew past maxScratchSegs is let go:
// scratch sized by one unusual request is not kept for the device's life.
func (e *Engine) releaseSegs(segs []atu.Seg) {
	clear(segs)
	if cap(segs) > maxScratchSegs {
		segs = make([]atu.Seg, 0, 64)
	}
	e.segs = segs[:0]
}

// maxScratchSegs bounds the translation scratch the engine keeps: the
// segments of the largest packet (a 4 KiB MTU of 4 KiB pages, split by an
// SGL of up to MaxSGE pieces) with room to spare.
const maxScratchSegs = 1024

// executeLocal runs a BIND_MW or LOCAL_INV work request.
func (rqr *requester) executeLocal(qp *QP, w *sendWQE) {
	e := rqr.e
	switch w.op {
	case WRBindMW:
		f := e.cfg.ATU.BindMW(atu.Bind{MW: w.invKey, NewKey: w.imm, MR: w.rkey, PD: qp.PD, QPN: qp.QPN,
			VA: w.raddr, Length: w.cmpAdd, Access: atu.Access(w.rqkey)})
		if f != atu.OK {
			e.wqeDone(qp, w, WCMWBindErr)
			return
		}
	case WRLocalInv:
		if f := e.cfg.ATU.Invalidate(w.invKey, qp.PD, qp.QPN, false); f != atu.OK {
			e.wqeDone(qp, w, WCLocProtErr)
			return
		}
	}
	e.wqeDone(qp, w, WCSuccess)
}

// wqeDone marks a WQE complete (it retires, with a CQE if it is signaled
// or failed, once every older WQE has).
func (e *Engine) wqeDone(qp *QP, w *sendWQE, status WCStatus) {
	if w.state == wqeDone {
		return
	}
	if w.state == wqePending && wrInfos[w.op].readAtom {
		qp.req.rdAtomic--
		if w.op == WRRDMARead && status == WCSuccess {
			e.req.readBudgetGrow(w.rdRes)
		}
		e.req.readRelease(qp, w)
	}
	w.state = wqeDone
	w.status = status
}

// retire advances the completer over finished WQEs and writes their
// completions, in posting order. A failed WQE moves the QP to ERR (RC) or
// SQE (UC, UD), which flushes the rest; a flushed one (WR_FLUSH_ERR,
// behind a UC or UD work request that waited for its frames: flushSQ)
// was counted when flushed and changes nothing.
func (e *Engine) retire(qp *QP) {
	req, sq := &qp.req, qp.sq
	for req.compIdx != req.next && sq.slot(req.compIdx).state == wqeDone {
		req.compIdx++
	}
	ci := sq.ci.Load()
	for ci != req.compIdx {
		w := sq.slot(ci)
		status := w.status
		var wc WC
		signal := status != WCSuccess || qp.sigAll || w.flags&SendSignaled != 0
		if signal {
			wc = WC{WRID: w.wrid, Status: status, Opcode: wrInfos[w.op].wc, QPNum: qp.QPN}
			switch {
			case status != WCSuccess:
				if status != WCWRFlushErr { // counted when flushed
					e.count(qp, ReqCQEError)
				}
			case w.op == WRRDMARead, wrInfos[w.op].nonPosted:
				wc.ByteLen = w.length // a FLUSH's length, an ATOMIC WRITE's 8 (rxe's)
			case wrInfos[w.op].atomic:
				wc.ByteLen = 8
			}
		}
		// Free the slot before the completion is visible: an
		// application that polled a completion may post into its slot.
		ci++
		sq.setCI(ci)
		if signal {
			wasErr := qp.attr.State == QPSErr
			e.cqe(qp, qp.sendCQN(), &wc, false)
			if !wasErr && qp.attr.State == QPSErr {
				return // the CQ was full: the QP is in error now, and its flush retired the rest
			}
		}
		if status != WCSuccess && status != WCWRFlushErr {
			if qp.Type == RC {
				e.toError(qp)
			} else {
				e.toSQE(qp)
			}
			return
		}
	}
	e.req.checkDrained(qp)
}

// pendingEnd is one past the last WQE that may be waiting for a response:
// next, or next+1 while next is partly sent (pending).
func (rqr *requester) pendingEnd(qp *QP) uint32 {
	req, sq := &qp.req, qp.sq
	if req.next != sq.fetched && sq.slot(req.next).state == wqePending {
		return req.next + 1
	}
	return req.next
}

// rewind goes back to the oldest unacknowledged PSN (go-back-N): every
// WQE from there on is sent again, a partly answered READ as a new READ
// for the rest.
func (rqr *requester) rewind(qp *QP) {
	req, sq := &qp.req, qp.sq
	req.retry = false
	qp.rd.cancelResend() // go-back-N asks for everything from una again
	end := rqr.pendingEnd(qp)
	if n := end - req.compIdx; n > sq.depth {
		panic("transport: send queue indices out of order (compIdx past next)")
	}
	found := false
	for i := req.compIdx; i != end; i++ {
		w := sq.slot(i)
		if w.state != wqePending {
			continue
		}
		if wrInfos[w.op].readAtom {
			req.rdAtomic--
			rqr.readRelease(qp, w)
		}
		w.state = wqePosted
		if !found {
			found = true
			req.next = i
			req.off = 0
			if !wrInfos[w.op].atomic {
				req.off = uint32(req.una.Diff(w.firstPSN)) * qp.mtu
			}
		}
	}
	if !found {
		if req.psn.Before(req.una) {
			req.psn = req.una
		}
		return
	}
	req.psn = req.una
}

// checkDrained reports SQ_DRAINED once a QP in SQD has nothing in flight.
func (rqr *requester) checkDrained(qp *QP) {
	e := rqr.e
	if qp.attr.State != QPSSQD || qp.req.drainSent {
		return
	}
	if qp.req.compIdx != qp.req.next || qp.req.off != 0 {
		return
	}
	qp.req.drainSent = true
	qp.attr.SQDraining = false
	if qp.attr.EnSQDAsyncNotify {
		e.cfg.Event(Event{Type: EventSQDrained, QP: qp})
	}
}
