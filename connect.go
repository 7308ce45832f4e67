package rnic

import (
	"fmt"
)

// Endpoint is what a peer needs to know to connect to a QP (perftest's
// and most RDMA programs' out-of-band exchange). It marshals to text
// ("gid=::ffff:10.0.0.1 qpn=0x11 psn=0x123456") and JSON
// ({"gid":"::ffff:10.0.0.1","qpn":17,"psn":1193046}); Exchange sends it
// over a net.Conn.
type Endpoint struct {
	// GID is the QP's port GID: its IP address.
	GID GID
	// QPN is the QP number (24 bits).
	QPN uint32
	// PSN is the first PSN the QP will send (24 bits): the peer's RQPSN.
	PSN PSN
}

// ConnParams are the connection attributes Connect applies. Zero fields
// take the defaults in parentheses, so the zero ConnParams connects a QP
// that grants its peer no remote rights and retries as perftest does.
// Where verbs gives 0 a meaning of its own (no retries, an infinite
// timeout), a negative value asks for it, as net.Dialer's KeepAlive does.
type ConnParams struct {
	// MTU is the path MTU (0: the port's active MTU).
	MTU MTU
	// PSN is this QP's initial send PSN (0).
	PSN PSN
	// Access are the remote rights this QP grants the peer's requests
	// (qp_access_flags): AccessRemoteWrite for WRITEs, AccessRemoteRead
	// for READs, AccessRemoteAtomic for atomics. 0 grants none, as in
	// verbs: on RC the peer's RDMA requests are refused with a NAK
	// (invalid request), its work request completes with WCRemInvReqErr
	// and its QP enters the error state; on UC, which has no NAKs, a
	// refused WRITE is dropped. SENDs need no right.
	Access Access
	// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout,
	// 1..31 (0: 14, 67 ms; negative: verbs' 0, no timeout at all).
	Timeout int
	// RetryCnt is how many times a request is retransmitted after a
	// timeout before the QP fails with WCRetryExcErr, 1..7 (0: 7;
	// negative: verbs' 0, none).
	RetryCnt int
	// RNRRetry is how many times a request is retried after an RNR NAK,
	// 1..7, 7 meaning forever (0: 7; negative: verbs' 0, none, so the
	// first RNR NAK fails the QP with WCRNRRetryExcErr).
	RNRRetry int
	// MinRNRTimer is the RNR NAK timer code this QP asks its peer to wait,
	// 1..31 (0: 12, 0.64 ms; negative: verbs' code 0, 655.36 ms).
	MinRNRTimer int
	// MaxRdAtomic is how many READs and atomics this QP may have
	// outstanding (0: the device maximum; negative: verbs' 0, none).
	MaxRdAtomic int
	// MaxDestRdAtomic is how many it accepts outstanding from the peer (0:
	// the device maximum; negative: verbs' 0, none).
	MaxDestRdAtomic int
	// QKey is a UD QP's Q_Key (0: 0x11111111, perftest's DEF_QKEY).
	QKey uint32
	// TrafficClass is the IP traffic class (DSCP<<2 | ECN) of RC and UC
	// packets (0).
	TrafficClass uint8
	// HopLimit is the IP TTL of RC and UC packets (0: 64).
	HopLimit uint8
	// SL is the service level of RC and UC packets: the NIC arbiter's
	// priority level for the QP (0).
	SL uint8
	// SGIDIndex is the source GID's index of RC and UC packets, and the
	// GID Endpoint reports (0: AddrGIDIndex, the port's address; negative:
	// index 0, the link-local GID, which Connect refuses with the reason).
	SGIDIndex int
}

// Endpoint returns this QP's side of the exchange, with the PSN it will
// start sending at if connected with p.
func (qp *QP) Endpoint(p ConnParams) Endpoint {
	g, _ := qp.pd.dev.GID(p.sgidIndex())
	return Endpoint{GID: g, QPN: qp.QPN(), PSN: p.PSN}
}

// sgidIndex resolves SGIDIndex (0: the address GID; negative: 0).
func (p *ConnParams) sgidIndex() int {
	switch {
	case p.SGIDIndex == 0:
		return AddrGIDIndex
	case p.SGIDIndex < 0:
		return 0
	}
	return p.SGIDIndex
}

// param resolves a ConnParams field: 0 takes def, a negative value
// verbs' 0, and a positive one itself if it is at most max.
func param(name string, v, def, max int) (uint8, error) {
	switch {
	case v == 0:
		return uint8(def), nil
	case v < 0:
		return 0, nil
	case v > max:
		return 0, fmt.Errorf("ConnParams.%s %d exceeds %d", name, v, max)
	}
	return uint8(v), nil
}

// Connect moves a QP from RESET through INIT and RTR to RTS, connected to
// peer (RC, UC) or ready to send to any address handle (UD; peer is
// ignored). It is the usual ibv_modify_qp sequence with sensible
// defaults; Modify remains available for full control.
func (qp *QP) Connect(peer Endpoint, p ConnParams) error {
	if err := qp.usable(); err != nil {
		return fmt.Errorf("rnic: Connect: %w", err)
	}
	d := qp.pd.dev
	if p.MTU == 0 {
		p.MTU = d.attr.ActiveMTU
	}
	switch {
	case p.QKey == 0 && qp.Type() == GSI:
		p.QKey = gsiQKey
	case p.QKey == 0:
		p.QKey = 0x11111111
	}
	var (
		v   [6]uint8
		err error
	)
	for i, f := range []struct {
		name          string
		v, def, limit int
	}{
		{"Timeout", p.Timeout, 14, 31},
		{"RetryCnt", p.RetryCnt, 7, 7},
		{"RNRRetry", p.RNRRetry, 7, 7},
		{"MinRNRTimer", p.MinRNRTimer, 12, 31},
		{"MaxRdAtomic", p.MaxRdAtomic, d.attr.MaxQPInitRdAtom, d.attr.MaxQPInitRdAtom},
		{"MaxDestRdAtomic", p.MaxDestRdAtomic, d.attr.MaxQPRdAtom, d.attr.MaxQPRdAtom},
	} {
		if v[i], err = param(f.name, f.v, f.def, f.limit); err != nil {
			return fmt.Errorf("rnic: Connect QP %#x: %w", qp.QPN(), err)
		}
	}
	timeout, retry, rnrRetry, minRNR, maxRd, maxDestRd := v[0], v[1], v[2], v[3], v[4], v[5]
	var steps []modifyStep
	switch qp.Type() {
	case UD, GSI:
		steps = append(steps,
			modifyStep{QPAttr{State: QPSInit, Port: 1, QKey: p.QKey}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
			modifyStep{QPAttr{State: QPSRTR}, QPAttrState},
			modifyStep{QPAttr{State: QPSRTS, SQPSN: p.PSN}, QPAttrState | QPAttrSQPSN})
	default:
		if p.sgidIndex() > 255 {
			return fmt.Errorf("rnic: Connect QP %#x: ConnParams.SGIDIndex %d out of range", qp.QPN(), p.SGIDIndex)
		}
		ah := AHAttr{DGID: peer.GID, SGIDIndex: uint8(p.sgidIndex()), TrafficClass: p.TrafficClass, HopLimit: p.HopLimit, SL: p.SL}
		rtr := QPAttr{State: QPSRTR, AH: ah, PathMTU: p.MTU, DestQPN: peer.QPN, RQPSN: peer.PSN}
		rtrMask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		rts := QPAttr{State: QPSRTS, SQPSN: p.PSN}
		rtsMask := QPAttrState | QPAttrSQPSN
		if qp.Type() == RC {
			rtr.MaxDestRdAtomic, rtr.MinRNRTimer = maxDestRd, minRNR
			rtrMask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
			rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = timeout, retry, rnrRetry, maxRd
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
