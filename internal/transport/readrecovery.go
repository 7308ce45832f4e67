package transport

import (
	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// READ recovery.
//
// A responder answers a QP's READs one after another, each in full, in PSN
// order. When a response packet is lost, plain go-back-N (IBTA 9.9.2.2,
// "implied NAK") asks again for everything from the gap: the READ with the
// gap from the missing PSN on, and every later READ in full. A responder
// with a backlog (rxe serves up to max_dest_rd_atomic queued READs before
// it reaches the new requests) then sends every later READ twice, the
// second copy again exposed to loss, and on a lossy path with 1 MiB READs
// (1024 packets at MTU 1024, at 1 % loss nearly every READ loses a packet)
// the backlog grows faster than it drains until retry_cnt runs out.
//
// So the completer keeps what arrives past a gap. Every READ response
// packet names its place exactly (PSN - first PSN of its READ, times the
// MTU), so a packet for any outstanding READ within readWindow PSNs of una
// is placed when it arrives and marked in a bitmap; una then moves over
// marked PSNs as the gap fills, completing READs in order. Only the READ
// at the head of the queue (the one holding una) is asked for again, and
// only once the responder has sent its last packet (a response at or past
// that READ's last PSN arrived): a READ request for the rest of it, from
// una, with the same PSN the original used there, which the responder
// treats as a duplicate and replays (IBTA 9.7.5.1.3 allows a duplicate READ
// for any part of the original). Later READs are left alone: their
// original responses arrive and are kept. One replay is asked for at a
// time: if it loses a packet too, the head READ is asked for again from
// the new una once the replay's last packet has arrived. The retransmission timer remains the
// fallback: when it fires, go-back-N resends everything from una (what
// was kept stays kept).
//
// The requests a peer replays only move forward within a READ (rxe
// accepts a duplicate only inside the range of the previous one), which
// holds: una never moves back.

// readWindow is how far past una READ responses are kept, in PSNs: 16
// READs of 1 MiB at MTU 1024. The bitmap (2 KiB) is allocated at the first
// response that arrives past a gap.
const readWindow = 1 << 14

// readRecovery is the completer's state for READ responses past a gap.
type readRecovery struct {
	win  []uint64 // bit psn%readWindow: a response for psn (> una) was placed
	base wire.PSN // the bits of PSNs before base are clear (base <= una)

	high      wire.PSN // highest READ response PSN seen past una
	highValid bool

	resendSet     bool     // the head READ was asked for again from resendPSN
	resendPending bool     // the requester is to send that request
	replayEnded   bool     // the replay's last packet arrived
	resendIdx     uint32   // send queue index of that READ
	resendPSN     wire.PSN // where the request starts
}

func (r *readRecovery) has(psn wire.PSN) bool {
	if r == nil || r.win == nil {
		return false
	}
	i := uint32(psn) % readWindow
	return r.win[i/64]&(1<<(i%64)) != 0
}

func (r *readRecovery) set(psn wire.PSN, una wire.PSN) {
	if r.win == nil {
		r.win = make([]uint64, readWindow/64)
		r.base = una
	}
	i := uint32(psn) % readWindow
	r.win[i/64] |= 1 << (i % 64)
}

func (r *readRecovery) clear(psn wire.PSN) {
	i := uint32(psn) % readWindow
	r.win[i/64] &^= 1 << (i % 64)
}

// forget clears the bits of the PSNs una has passed since the last call.
// A kept response's bit is normally cleared as readAdvance moves una over
// it, but una also passes PSNs another way: after a timeout the READ a
// response was kept for is asked for again, and its fresh responses are
// placed in order. A bit left set would, readWindow PSNs later, say that
// a response of another READ had been placed when it had not, and that
// READ would complete without its bytes.
func (r *readRecovery) forget(una wire.PSN) {
	if r == nil || r.win == nil {
		return
	}
	d := una.Diff(r.base)
	switch {
	case d <= 0:
		return
	case d >= readWindow:
		clear(r.win)
	default:
		for p := r.base; p != una; p = p.Next() {
			r.clear(p)
		}
	}
	r.base = una
}

func (r *readRecovery) cancelResend() {
	if r == nil {
		return
	}
	r.resendSet, r.resendPending, r.replayEnded = false, false, false
}

// headRead returns the oldest pending WQE and its index if it is a READ.
func (cpl *completer) headRead(qp *QP) (*sendWQE, uint32, bool) {
	e := cpl.e
	req, sq := &qp.req, qp.sq
	end := e.req.pendingEnd(qp)
	for i := req.compIdx; i != end; i++ {
		w := sq.slot(i)
		if w.state == wqeDone {
			continue
		}
		if w.state != wqePending || w.op != WRRDMARead {
			return nil, 0, false
		}
		return w, i, true
	}
	return nil, 0, false
}

// readAhead takes a READ response for a PSN past una. It returns whether
// the requester made progress (never: una does not move).
func (cpl *completer) readAhead(qp *QP, p *wire.Packet, psn wire.PSN) bool {
	e := cpl.e
	req, sq := &qp.req, qp.sq
	if qp.rd == nil {
		qp.rd = new(readRecovery) // the first response past a gap
	}
	rd := qp.rd
	// The READ it belongs to: among the pending READs from the head on,
	// with nothing but READs before it (their PSNs are contiguous and no
	// ACK has to come first).
	end := e.req.pendingEnd(qp)
	var w *sendWQE
	var idx uint32
	for i := req.compIdx; i != end; i++ {
		x := sq.slot(i)
		if x.state == wqeDone {
			continue
		}
		if x.state != wqePending || x.op != WRRDMARead || psn.Before(x.firstPSN) {
			break
		}
		if !psn.After(x.lastPSN) {
			w, idx = x, i
			break
		}
	}
	if w == nil {
		// Past a SEND, WRITE or atomic still waiting for its ACK: the
		// responder skipped something; go back.
		cpl.impliedNAK(qp)
		return false
	}
	if !rd.highValid || psn.After(rd.high) {
		rd.high, rd.highValid = psn, true
	}
	if rd.resendSet && idx == rd.resendIdx && !rd.resendPending && psn == w.lastPSN {
		// The replay's last packet (the original responses of this READ
		// all came before it, in order, and only one replay is asked for
		// at a time): if una is still missing, it was lost again.
		rd.replayEnded = true
	}
	if uint32(psn.Diff(req.una)) >= readWindow || rd.has(psn) {
		e.count(qp, RxLateResponse)
		cpl.readRecover(qp)
		return false
	}
	off, want, ok := readSlot(qp, w, p, psn)
	if !ok {
		e.count(qp, RxGhostResponse)
		return false
	}
	if want > 0 {
		if f := e.scatter(qp, qp.PD, qp.sq.sges(idx), uint64(off), p.Payload); f != atu.OK {
			// Not kept: when the packet comes again in order, the
			// in-order path fails the READ with the protection error.
			cpl.readRecover(qp)
			return false
		}
	}
	rd.set(psn, req.una)
	e.count(qp, ReadRespAhead)
	cpl.readRecover(qp)
	return false
}

// readAdvance moves una over the responses kept past it, completing the
// READs it passes. It reports whether una moved.
func (cpl *completer) readAdvance(qp *QP) bool {
	req, rd := &qp.req, qp.rd
	if rd == nil || rd.win == nil {
		return false
	}
	moved := false
	for rd.has(req.una) {
		w, idx, ok := cpl.headRead(qp)
		if !ok || req.una.Before(w.firstPSN) || req.una.After(w.lastPSN) {
			break
		}
		rd.clear(req.una)
		if req.una == w.lastPSN {
			cpl.readDone(qp, w, idx)
		}
		req.una = req.una.Next()
		moved = true
	}
	return moved
}

// readDone completes the READ at send queue index idx, the head of the
// queue, whose last response has been placed.
func (cpl *completer) readDone(qp *QP, w *sendWQE, idx uint32) {
	e := cpl.e
	e.wqeDone(qp, w, WCSuccess)
	qp.req.compIdx = idx + 1
	if rd := qp.rd; rd != nil && rd.resendSet && rd.resendIdx == idx {
		rd.cancelResend()
	}
}

// readRecover asks for the head READ again from una when the responder
// has sent all of it and una did not come: once per round (see above).
func (cpl *completer) readRecover(qp *QP) {
	e := cpl.e
	req, rd := &qp.req, qp.rd
	if req.retry || rd == nil || !rd.highValid {
		return
	}
	if !rd.high.After(req.una) {
		rd.highValid = false // nothing seen past una: no gap
		return
	}
	w, idx, ok := cpl.headRead(qp)
	if !ok || rd.high.Before(w.lastPSN) {
		return // the responder is still sending the head READ
	}
	if rd.resendSet && rd.resendIdx == idx && !rd.replayEnded {
		return // asked already; the replay is on its way
	}
	if req.retries == 0 {
		e.wqeDone(qp, w, WCRetryExcErr)
		return
	}
	req.retries--
	// Evidence of the same loss that comes before the answer to this
	// resend (an atomic's ACK or a later READ's responses past the gap:
	// an implied NAK) is stale: it must not take another retry, or one
	// lost packet costs two of retry_cnt. Progress clears it.
	req.recovering = true
	rd.resendSet, rd.resendPending, rd.replayEnded = true, true, false
	rd.resendIdx, rd.resendPSN = idx, req.una
	e.count(qp, ImpliedNAKSeqErr)
	if e.cfg.Trace != nil {
		e.tracef("qp %#x completer: READ %v..%v lost %v (seen up to %v): ask again for the rest", qp.QPN, w.firstPSN, w.lastPSN, req.una, rd.high)
	}
	e.arb.Ring(qp.index)
}

// resendRead sends the READ request readRecover asked for: the rest of
// the head READ from resendPSN, under that PSN. It returns the payload
// bytes sent (-1: nothing to send any more) and false if the WQE failed.
func (cpl *completer) resendRead(qp *QP) (int, bool) {
	e := cpl.e
	req, rd := &qp.req, qp.rd
	if rd == nil {
		return -1, true
	}
	w := qp.sq.slot(rd.resendIdx)
	if !rd.resendSet || w.state != wqePending || w.op != WRRDMARead ||
		rd.resendPSN.Before(w.firstPSN) || rd.resendPSN.After(w.lastPSN) || rd.resendPSN.Before(req.una) {
		return -1, true
	}
	// sendRequest sends the packet at (next, psn, off) and advances them:
	// point them at the resend and put them back after.
	psn, off, next := req.psn, req.off, req.next
	req.psn, req.off, req.next = rd.resendPSN, uint32(rd.resendPSN.Diff(w.firstPSN))*qp.mtu, rd.resendIdx
	e.bill.WQEFetches++
	e.bill.WQEBytes += sendWQEBytes(qp.Type, w)
	n, ok := e.req.sendRequest(qp, w, &wrInfos[w.op])
	req.psn, req.off, req.next = psn, off, next
	return n, ok
}
