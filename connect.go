package rnic

import "fmt"

// Endpoint is what a peer needs to know to connect to a QP: the
// out-of-band exchange of perftest and of most RDMA programs.
type Endpoint struct {
	GID GID
	QPN uint32
	PSN PSN // the first PSN the QP will send
}

// ConnParams are the connection attributes Connect applies; zero fields
// take the defaults in parentheses.
type ConnParams struct {
	MTU             MTU    // path MTU (the port's active MTU)
	PSN             PSN    // this QP's initial send PSN (0)
	Access          Access // remote rights granted to the peer (write, read, atomic)
	Timeout         uint8  // local ACK timeout exponent (14: 67 ms)
	RetryCnt        uint8  // (7)
	RNRRetry        uint8  // (7: infinite)
	MinRNRTimer     uint8  // (12: 0.64 ms)
	MaxRdAtomic     uint8  // (the device maximum)
	MaxDestRdAtomic uint8  // (the device maximum)
	QKey            uint32 // UD (0x11111111, perftest's)
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // service level: the arbiter's priority level (0)
}

// Endpoint returns this QP's side of the exchange, with the PSN it will
// start sending at if connected with p.
func (qp *QP) Endpoint(p ConnParams) Endpoint {
	g, _ := qp.pd.dev.GID(0)
	return Endpoint{GID: g, QPN: qp.QPN(), PSN: p.PSN}
}

// Connect moves a QP from RESET through INIT and RTR to RTS, connected to
// peer (RC, UC) or ready to send to any address handle (UD; peer is
// ignored). It is the usual ibv_modify_qp sequence with sensible
// defaults; Modify remains available for full control.
func (qp *QP) Connect(peer Endpoint, p ConnParams) error {
	d := qp.pd.dev
	if p.MTU == 0 {
		p.MTU = d.attr.ActiveMTU
	}
	if p.Access == 0 {
		p.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	}
	if p.Timeout == 0 {
		p.Timeout = 14
	}
	if p.RetryCnt == 0 {
		p.RetryCnt = 7
	}
	if p.RNRRetry == 0 {
		p.RNRRetry = 7
	}
	if p.MinRNRTimer == 0 {
		p.MinRNRTimer = 12
	}
	if p.MaxRdAtomic == 0 {
		p.MaxRdAtomic = uint8(d.attr.MaxQPInitRdAtom)
	}
	if p.MaxDestRdAtomic == 0 {
		p.MaxDestRdAtomic = uint8(d.attr.MaxQPRdAtom)
	}
	if p.QKey == 0 {
		p.QKey = 0x11111111
	}
	var steps []modifyStep
	switch qp.Type() {
	case UD:
		steps = append(steps,
			modifyStep{QPAttr{State: QPSInit, Port: 1, QKey: p.QKey}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
			modifyStep{QPAttr{State: QPSRTR}, QPAttrState},
			modifyStep{QPAttr{State: QPSRTS, SQPSN: p.PSN}, QPAttrState | QPAttrSQPSN})
	default:
		ah := AHAttr{DGID: peer.GID, TrafficClass: p.TrafficClass, HopLimit: p.HopLimit, SL: p.SL}
		rtr := QPAttr{State: QPSRTR, AH: ah, PathMTU: p.MTU, DestQPN: peer.QPN, RQPSN: peer.PSN}
		rtrMask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		rts := QPAttr{State: QPSRTS, SQPSN: p.PSN}
		rtsMask := QPAttrState | QPAttrSQPSN
		if qp.Type() == RC {
			rtr.MaxDestRdAtomic, rtr.MinRNRTimer = p.MaxDestRdAtomic, p.MinRNRTimer
			rtrMask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
			rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = p.Timeout, p.RetryCnt, p.RNRRetry, p.MaxRdAtomic
			rtsMask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
		}
		steps = append(steps,
			modifyStep{QPAttr{State: QPSInit, Port: 1, AccessFlags: p.Access}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
			modifyStep{rtr, rtrMask},
			modifyStep{rts, rtsMask})
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			return fmt.Errorf("rnic: Connect: %w", err)
		}
	}
	return nil
}

type modifyStep struct {
	a    QPAttr
	mask QPAttrMask
}
