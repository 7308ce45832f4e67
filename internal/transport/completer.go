package transport

import (
	"encoding/binary"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// completerRecv handles a response (ACK, NAK, RDMA READ response, atomic
// ACK) on an RC QP: it retires the WQEs the response acknowledges, places
// READ and atomic results, and reacts to NAKs (IBTA 9.7.5.1, 9.9.2).
func (cpl *completer) completerRecv(qp *QP, p *wire.Packet) {
	e := cpl.e
	req, sq := &qp.req, qp.sq
	psn := p.BTH.PSN()
	flags := p.Info.Flags
	if !psn.Before(req.maxPSN) || psn.Before(req.una) {
		// A response for a PSN never sent, or one already acknowledged
		// (a duplicate ACK, a late READ response): nothing to do.
		if !psn.Before(req.maxPSN) {
			e.count(qp, RxGhostResponse)
		}
		return
	}
	var syn wire.Syndrome
	kind := wire.AckKindACK
	if p.AETH != nil {
		syn = p.AETH.Syndrome()
		kind = syn.Kind()
	}
	if kind == wire.AckKindReserved {
		e.count(qp, RxGhostResponse) // a syndrome IBTA reserves: a confused or forged response
		return
	}
	if flags.Has(wire.FlagAck) {
		e.count(qp, AcksReceived)
	}
	// ackThrough: the last PSN this response says the responder has
	// received and executed. A NAK names the PSN that failed.
	ackThrough := psn
	if kind != wire.AckKindACK {
		ackThrough = psn.Add(wire.PSNMask) // psn - 1
	} else if e.cfg.TIMELY != nil {
		e.probeAcked(qp, uint32(ackThrough))
	}
	progress := false
	var w *sendWQE
	// The end is fixed before the walk: when the WQE at next (one being
	// sent, partly) completes, pendingEnd moves back to next, behind
	// compIdx, and the walk would go on through the ring's retired slots
	// (their state is still done) for 2^32 indices, holding the engine.
	end := e.req.pendingEnd(qp)
	for {
		if req.compIdx == end {
			w = nil
			break
		}
		w = sq.slot(req.compIdx)
		if w.state == wqeDone {
			req.compIdx++
			continue
		}
		if w.state != wqePending {
			w = nil
			break
		}
		// A FLUSH or ATOMIC WRITE is answered by a zero-length READ
		// response, but an ACK of its PSN or a later one completes it
		// too (as rxe's completer takes it): it is acknowledged like a
		// WRITE.
		ra := wrInfos[w.op].readAtom && !wrInfos[w.op].nonPosted
		if ra && !ackThrough.Before(w.firstPSN) && !(flags.Has(wire.FlagReadResp) || flags.Has(wire.FlagAtomicAckETH)) &&
			(kind == wire.AckKindACK || psn.After(w.lastPSN)) {
			// An ACK or NAK covering an outstanding READ/atomic whose
			// response never came: the response was lost (implied NAK).
			// A NAK of a PSN inside a READ is that READ's own (the
			// responder could not read its memory from there on): the
			// responses before it came, and the switch below fails it.
			cpl.impliedNAK(qp)
			cpl.afterCompletion(qp, progress)
			return
		}
		if ra && ackThrough.After(w.lastPSN) {
			if w.op == WRRDMARead && flags.Has(wire.FlagReadResp) {
				// A later READ's response while this one has a gap:
				// keep it (see readrecovery.go).
				progress = cpl.readAhead(qp, p, psn) || progress
			} else {
				cpl.impliedNAK(qp)
			}
			cpl.afterCompletion(qp, progress)
			return
		}
		// A SEND or WRITE is acknowledged by an ACK of its last PSN or by
		// any response to a later one; a READ response or atomic ACK
		// that names its last PSN is a confused peer, not an ACK.
		plainAck := flags.Has(wire.FlagAck) && !flags.Has(wire.FlagAtomicAckETH)
		if !ra && (ackThrough.After(w.lastPSN) || (ackThrough == w.lastPSN && plainAck)) {
			req.una = w.lastPSN.Next()
			e.wqeDone(qp, w, WCSuccess)
			req.compIdx++
			progress = true
			continue
		}
		break
	}
	if w == nil {
		cpl.afterCompletion(qp, progress)
		return
	}
	switch {
	case flags.Has(wire.FlagReadResp):
		progress = cpl.readResponse(qp, req.compIdx, w, p, psn) || progress
	case flags.Has(wire.FlagAtomicAckETH):
		progress = cpl.atomicAck(qp, req.compIdx, w, p, psn) || progress
	case kind == wire.AckKindACK:
		if !wrInfos[w.op].readAtom && !psn.Before(w.firstPSN) {
			// A coalesced ACK inside a multi-packet message.
			if psn.Next().After(req.una) {
				req.una = psn.Next()
				progress = true
			}
		}
	case kind == wire.AckKindRNRNAK || kind == wire.AckKindNAK:
		// A NAK implicitly acknowledges every PSN before it.
		if psn.After(req.una) {
			req.una = psn
			progress = true
			cpl.resetRetries(qp)
		}
		if kind == wire.AckKindRNRNAK {
			cpl.rnrNAK(qp, w, syn)
		} else {
			cpl.nak(qp, w, psn, syn.NAKCode())
		}
	}
	cpl.afterCompletion(qp, progress)
}

// afterCompletion retires what completed, restarts the timers on
// progress and wakes the requester.
func (cpl *completer) afterCompletion(qp *QP, progress bool) {
	e := cpl.e
	req := &qp.req
	qp.rd.forget(req.una)
	if progress {
		cpl.resetRetries(qp)
		e.req.growWindow(qp)
		if qp.sq.after(req.compIdx, req.next) {
			// The responder acknowledged the WQE being sent again (an
			// ACK that was late, not lost): carry on after it.
			req.next, req.off = req.compIdx, 0
			if req.psn.Before(req.una) {
				req.psn = req.una
			}
		}
		if req.psn.Before(req.una) {
			// An ACK for packets sent before a go-back overtook the
			// resend: continue from what the responder has.
			req.retry = true
		}
		qp.timer.retransAt = 0
		if req.una != req.maxPSN {
			if t := ackTimeout(qp.attr.Timeout); t != 0 {
				qp.timer.retransAt = e.now + t
				e.schedule(qp)
			}
		}
	}
	e.retire(qp)
	if e.req.requesterReady(qp) {
		e.arb.Ring(qp.index)
	}
}

// resetRetries restores the retry budgets after the responder showed
// progress: retry_cnt and rnr_retry count consecutive failures.
func (cpl *completer) resetRetries(qp *QP) {
	req := &qp.req
	req.retries = qp.attr.RetryCnt
	req.rnrRetries = qp.attr.RNRRetry
	req.nakSeen = false
	req.recovering = false
}

// readResponse places one RDMA READ response packet.
func (cpl *completer) readResponse(qp *QP, idx uint32, w *sendWQE, p *wire.Packet, psn wire.PSN) bool {
	e := cpl.e
	req := &qp.req
	if wrInfos[w.op].nonPosted {
		// FLUSH, ATOMIC WRITE: a zero-length READ RESPONSE ONLY of the
		// request's PSN.
		if psn != w.firstPSN || len(p.Payload) != 0 || p.Op != wire.OpRCReadRespOnly {
			e.count(qp, RxGhostResponse)
			return false
		}
		req.una = psn.Next()
		e.wqeDone(qp, w, WCSuccess)
		req.compIdx++
		return true
	}
	if w.op != WRRDMARead || psn.Before(w.firstPSN) || psn.After(w.lastPSN) {
		e.count(qp, RxGhostResponse)
		return false
	}
	if psn != req.una {
		// Responses before this one were lost: keep it, and ask again
		// for the rest of the READ once the responder has sent it all.
		return cpl.readAhead(qp, p, psn)
	}
	off, want, ok := readSlot(qp, w, p, psn)
	if !ok {
		e.count(qp, RxGhostResponse) // malformed response: drop, the timer retries
		return false
	}
	if want > 0 {
		f, ok := e.scatterReceived(placedWrite{qp: qp, psn: psn, w: w}, &e.xw[xwReadTarget], w.firstPSN == w.lastPSN, qp.PD, qp.sq.sges(idx), uint64(off), p.Payload, psn != w.lastPSN)
		if !ok {
			return true // a response of this READ before this one faulted
		}
		if f != atu.OK {
			e.wqeDone(qp, w, WCLocProtErr)
			req.una = psn.Next()
			return true
		}
	}
	req.una = psn.Next()
	if psn == w.lastPSN {
		cpl.readDone(qp, w, idx)
	}
	cpl.readAdvance(qp)
	cpl.readRecover(qp)
	return true
}

// readSlot returns where READ response psn of w goes (offset in the READ
// and length) and whether p has that length and is marked last exactly
// when it is w's last packet.
func readSlot(qp *QP, w *sendWQE, p *wire.Packet, psn wire.PSN) (off, want uint32, ok bool) {
	off = uint32(psn.Diff(w.firstPSN)) * qp.mtu
	want = min(qp.mtu, w.length-off)
	ok = uint32(len(p.Payload)) == want && (psn == w.lastPSN) == p.Info.Flags.Has(wire.FlagLast)
	return off, want, ok
}

// atomicAck places an atomic's original value.
func (cpl *completer) atomicAck(qp *QP, idx uint32, w *sendWQE, p *wire.Packet, psn wire.PSN) bool {
	e := cpl.e
	if !wrInfos[w.op].atomic || psn != w.firstPSN {
		e.count(qp, RxGhostResponse)
		return false
	}
	binary.NativeEndian.PutUint64(cpl.orig[:], p.AtomicAckETH.OrigData())
	qp.req.una = psn.Next()
	if f := e.scatter(qp, qp.PD, qp.sq.sges(idx), 0, cpl.orig[:]); f != atu.OK {
		e.wqeDone(qp, w, WCLocProtErr)
		return true
	}
	e.wqeDone(qp, w, WCSuccess)
	qp.req.compIdx++
	return true
}

// rnrNAK handles "receiver not ready": wait the responder's RNR timer and
// send again from the NAKed PSN, up to rnr_retry times (7: forever).
func (cpl *completer) rnrNAK(qp *QP, w *sendWQE, syn wire.Syndrome) {
	e := cpl.e
	req := &qp.req
	e.count(qp, RNRNAKRetryErr)
	if qp.attr.RNRRetry != 7 {
		if req.rnrRetries == 0 {
			e.wqeDone(qp, w, WCRNRRetryExcErr)
			return
		}
		req.rnrRetries--
	}
	req.rnrWait = true
	qp.timer.retransAt = 0
	qp.timer.rnrAt = e.now + int64(wire.RNRTimerDuration(syn.RNRTimer()))
	e.schedule(qp)
}

// nak handles a NAK: a PSN sequence error goes back to the NAKed PSN; the
// other codes fail the WQE with the matching status.
func (cpl *completer) nak(qp *QP, w *sendWQE, psn wire.PSN, code wire.NAKCode) {
	e := cpl.e
	req := &qp.req
	if e.cfg.Trace != nil {
		e.tracef("qp %#x completer: NAK %v psn %v (una %v psn %v)", qp.QPN, code, psn, req.una, req.psn)
	}
	switch code {
	case wire.NAKPSNSeqErr:
		e.count(qp, PacketSeqErr)
		if req.nakSeen && req.nakPSN == psn {
			return // the same NAK again (duplicated): already going back
		}
		req.nakSeen, req.nakPSN = true, psn
		req.recovering = false // a NAK is news from the responder: act on it
		cpl.retryFromUna(qp, false)
		return
	case wire.NAKInvalidRequest:
		e.count(qp, ReqRemoteInvalidRequest)
		e.wqeDone(qp, w, WCRemInvReqErr)
	case wire.NAKRemoteAccessErr:
		e.count(qp, ReqRemoteAccessErrors)
		e.wqeDone(qp, w, WCRemAccessErr)
	case wire.NAKRemoteOpErr:
		e.wqeDone(qp, w, WCRemOpErr)
	case wire.NAKInvalidRDRequest:
		e.wqeDone(qp, w, WCRemInvRDReqErr)
	default:
		e.wqeDone(qp, w, WCBadRespErr)
	}
}

// retryFromUna schedules go-back-N from the oldest unacknowledged PSN. A
// transport retry uses up one of retry_cnt; when none is left the WQE
// fails with RETRY_EXC_ERR. Once a retry is under way, further evidence of
// the same loss (responses that were in flight past the gap) is ignored
// until the responder shows progress or the timer fires (force).
func (cpl *completer) retryFromUna(qp *QP, force bool) bool {
	e := cpl.e
	req := &qp.req
	if !force && (req.retry || req.recovering) {
		return false
	}
	if req.retries == 0 {
		if w, idx, ok := cpl.oldestPending(qp); ok {
			e.wqeDone(qp, w, WCRetryExcErr)
			if idx == req.next {
				// It was being sent again (a retry window stops resends
				// mid-message): it is over now, so it can retire.
				req.next, req.off = idx+1, 0
			}
		}
		return false
	}
	if e.cfg.Trace != nil {
		e.tracef("qp %#x requester: go back to %v (force %v, retries left %d, psn %v, max %v)", qp.QPN, req.una, force, req.retries, req.psn, req.maxPSN)
	}
	req.retries--
	req.retry = true
	req.recovering = true
	e.arb.Ring(qp.index)
	return true
}

// impliedNAK reacts to a response that shows an earlier READ or atomic
// response was lost (IBTA 9.9.2.2 "implied NAK").
func (cpl *completer) impliedNAK(qp *QP) {
	e := cpl.e
	if cpl.retryFromUna(qp, false) {
		e.count(qp, ImpliedNAKSeqErr)
	}
}

// oldestPending returns the oldest WQE waiting for acknowledgement, and
// its send queue index.
func (cpl *completer) oldestPending(qp *QP) (*sendWQE, uint32, bool) {
	e := cpl.e
	req, sq := &qp.req, qp.sq
	end := e.req.pendingEnd(qp)
	for i := req.compIdx; i != end; i++ {
		if w := sq.slot(i); w.state == wqePending {
			return w, i, true
		}
	}
	return nil, 0, false
}

// retransTimeout is the local ACK timeout: nothing was acknowledged for
// 4.096 µs × 2^timeout.
func (cpl *completer) retransTimeout(qp *QP) {
	e := cpl.e
	if qp.attr.State != QPSRTS && qp.attr.State != QPSSQD {
		return
	}
	if _, _, ok := cpl.oldestPending(qp); !ok {
		return
	}
	e.count(qp, LocalAckTimeoutErr)
	if e.cfg.Trace != nil {
		e.tracef("qp %#x requester: local ACK timeout (una %v psn %v, recovering %v)", qp.QPN, qp.req.una, qp.req.psn, qp.req.recovering)
	}
	if cpl.retryFromUna(qp, true) {
		e.req.cutWindow(qp)
		if w, _, ok := cpl.oldestPending(qp); ok && w.op == WRRDMARead {
			e.req.readBudgetCut()
		}
	}
	if qp.req.retries > 0 || qp.req.retry {
		if t := ackTimeout(qp.attr.Timeout); t != 0 {
			qp.timer.retransAt = e.now + t
		}
	}
	e.retire(qp)
}

// rnrTimeout ends an RNR wait: send again from the NAKed PSN.
func (cpl *completer) rnrTimeout(qp *QP) {
	e := cpl.e
	if !qp.req.rnrWait {
		return
	}
	qp.req.rnrWait = false
	qp.req.retry = true
	if t := ackTimeout(qp.attr.Timeout); t != 0 {
		qp.timer.retransAt = e.now + t
	}
	e.arb.Ring(qp.index)
}
