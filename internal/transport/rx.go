package transport

import (
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Receive processes a batch of inbound frames and releases them. ACKs the
// batch calls for are coalesced: at most one per QP, sent at the end.
//
// Ingress order per frame: parse (every header and length checked), ICRC,
// QPC lookup through the cache, P_Key, QP state and address, then the
// responder (requests) or the completer (responses).
func (e *Engine) Receive(now int64, bufs []*link.Buf) {
	e.now = now
	if e.place.max > 0 {
		e.receivePlacing(bufs)
		return
	}
	for _, b := range bufs {
		e.receiveFrame(b)
		b.Release()
	}
	e.resp.flushAcks()
}

// receiveFrame is receiveOne, with the payload of a frame sent by
// reference borrowed from its sender for the time it takes: one whose
// sender took the memory back (deregistered the region, destroyed the
// QP) is dropped, as lost on the way, and RC sends it again or fails the
// work request.
func (e *Engine) receiveFrame(b *link.Buf) {
	if ref, _ := b.Ref(); ref == nil {
		e.receiveOne(b)
		return
	}
	if !b.Borrow() {
		e.c[RxRefRevoked]++
		return
	}
	e.receiveOne(b)
	b.Return()
}

// receivePlacing is Receive with placement bursts on (SetPlaceBurst): a
// frame whose WRITE payload waits is kept until it is placed, at the
// latest here, before the ACKs are sent.
func (e *Engine) receivePlacing(bufs []*link.Buf) {
	pb := &e.place
	for _, b := range bufs {
		pb.cur = b
		e.receiveFrame(b)
		if pb.held {
			pb.held = false // the burst releases it once placed
		} else {
			b.Release()
		}
	}
	pb.cur = nil
	e.placeWrites(nil)
	e.resp.flushAcks()
}

func (e *Engine) receiveOne(b *link.Buf) {
	f := b.Bytes()
	e.bill.RxPackets++
	e.bill.RxBytes += len(f)
	p := &e.pkt
	if err := p.Parse(f); err != nil {
		e.c[RxMalformed]++
		return
	}
	if ref, at := b.Ref(); ref != nil {
		// The payload is in the sender's memory (receiveFrame borrowed
		// it); it must be exactly where the headers say the frame's is.
		if len(ref) != len(p.Payload) || at != len(f)-wire.ICRCSize-p.Pad-len(p.Payload) {
			e.c[RxMalformed]++
			return
		}
		p.Payload = ref
	}
	checkICRC := func() bool {
		if e.cfg.Metadata {
			return true
		}
		if b.Flags&link.FlagNoICRC != 0 {
			e.c[RxICRCOffloaded]++
			return true
		}
		if b.Flags&link.FlagIPRebuilt != 0 {
			e.c[RxICRCUnverified]++
			return true
		}
		if e.icrcRx.Check(f) != nil { // the engine owns a frame it receives
			e.c[RxICRCErrors]++
			return false
		}
		return true
	}
	if p.Op == wire.OpCNP {
		if !checkICRC() {
			return
		}
		// The reaction point: the CNP names the QP whose packets were
		// marked (its destination QP is ours).
		if e.cfg.DCQCN != nil {
			if qp := e.lookupQP(p.BTH.DestQP()); qp != nil && qp.congestionControlled() {
				e.ccCNP(qp)
				e.count(qp, RPCNPHandled)
				return
			}
		}
		e.c[RxCNPIgnored]++
		return
	}
	qp := e.lookupQP(p.BTH.DestQP())
	if qp == nil {
		if checkICRC() {
			e.c[RxUnknownQP]++
		}
		return
	}
	e.count(qp, RxPackets)
	e.countN(qp, RxBytes, uint64(len(f)))
	e.bill.QP = qp.QPN
	if p.Info.Transport != transportOf(qp.Type) {
		e.c[RxWrongTransport]++
		return
	}
	if pk := p.BTH.PKey(); pk&0x7FFF != wire.DefaultPKey&0x7FFF {
		e.c[RxBadPKey]++
		return
	}
	st := qp.attr.State
	isReq := p.Info.Flags.Has(wire.FlagRequest)
	switch {
	case isReq && (st == QPSRTR || st == QPSRTS || st == QPSSQD || st == QPSSQE):
	case !isReq && qp.Type == RC && (st == QPSRTS || st == QPSSQD):
	default:
		e.c[RxBadState]++
		return
	}
	if qp.Type != UD && p.Src != qp.attr.AV.Dst {
		// A connected QP takes packets only from its peer.
		e.c[RxBadAddress]++
		return
	}
	// Frames the engine would drop anyway are dropped before the ICRC is
	// computed: after a loss the receive queue fills with frames that the
	// go-back-N recovery has made useless, and draining them must be
	// cheaper than the retransmission timeout.
	if e.useless(qp, p, isReq) {
		return
	}
	if !checkICRC() {
		return
	}
	if e.cfg.DCQCN != nil && p.TrafficClass&wire.ECNMask == wire.ECNCE {
		e.congestionExperienced(qp)
	}
	if isReq {
		e.resp.responderRecv(qp, p)
	} else {
		e.comp.completerRecv(qp, p)
	}
}

// useless reports (and counts) a frame that carries no news: a request
// ahead of the expected PSN after the responder has already NAKed the gap,
// or a response for a PSN already acknowledged. A READ response past a gap
// the requester is recovering from shows the responder alive (the timer
// restarts) and goes on to the completer, which keeps it.
func (e *Engine) useless(qp *QP, p *wire.Packet, isReq bool) bool {
	if qp.Type != RC {
		return false
	}
	psn := p.BTH.PSN()
	if isReq {
		if qp.resp.nakSent && psn.After(qp.resp.epsn) {
			e.count(qp, OutOfSequence)
			return true
		}
		return false
	}
	req := &qp.req
	if psn.Before(req.una) {
		e.c[RxLateResponse]++
		return true
	}
	if p.Info.Flags.Has(wire.FlagReadResp) && psn != req.una {
		// Past a gap: the responder is still sending what it had queued
		// before any request to resend (up to max_dest_rd_atomic whole
		// READs). It is alive and will get to the resend; a timeout now
		// would only queue yet another copy and use up retry_cnt while
		// the backlog drains, so the timer restarts instead. The
		// completer keeps the response (readAhead).
		if qp.timer.retransAt != 0 {
			qp.timer.retransAt = e.now + ackTimeout(qp.attr.Timeout)
		}
	}
	return false
}

func transportOf(t QPType) wire.Transport {
	switch t {
	case RC:
		return wire.TransportRC
	case UC:
		return wire.TransportUC
	}
	return wire.TransportUD
}
