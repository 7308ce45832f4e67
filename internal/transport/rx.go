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
	for _, b := range bufs {
		e.receiveOne(b)
		b.Release()
	}
	e.flushAcks()
}

func (e *Engine) receiveOne(b *link.Buf) {
	f := b.Bytes()
	p := &e.pkt
	if err := p.Parse(f); err != nil {
		e.c[RxMalformed]++
		return
	}
	if b.Flags&link.FlagIPRebuilt != 0 {
		e.c[RxICRCUnverified]++
	} else if wire.CheckICRC(f) != nil {
		e.c[RxICRCErrors]++
		return
	}
	if p.Op == wire.OpCNP {
		return // congestion control is not modelled yet: counted as received only
	}
	qp := e.lookupQP(p.BTH.DestQP())
	if qp == nil {
		e.c[RxUnknownQP]++
		return
	}
	e.count(qp, RxPackets)
	e.countN(qp, RxBytes, uint64(len(f)))
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
	if isReq {
		e.responderRecv(qp, p)
	} else {
		e.completerRecv(qp, p)
	}
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
