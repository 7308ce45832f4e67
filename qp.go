package rnic

import (
	"errors"
	"fmt"
	"github.com/rnic/rnic/internal/device"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/wire"
)

// QPInitAttr creates a QP (struct ibv_qp_init_attr).
type QPInitAttr struct {
	// Type is the transport service: RC, UC or UD (qp_type), or GSI for
	// QP1.
	Type QPType
	// SendCQ and RecvCQ receive the send and receive completions; they may
	// be the same CQ (send_cq, recv_cq).
	SendCQ *CQ
	RecvCQ *CQ
	// SRQ, if set, supplies the QP's receive WQEs (srq); then
	// Cap.MaxRecvWR is ignored and QP.PostRecv is refused.
	SRQ *SRQ
	// Cap are the queue sizes (cap).
	Cap QPCap
	// SigAll makes every send work request signaled (sq_sig_all).
	SigAll bool
}

// QPAttr are a QP's attributes (struct ibv_qp_attr); Modify reads the
// fields its mask names, Query fills them all.
type QPAttr struct {
	State    QPState // qp_state: the state to move to
	CurState QPState // cur_qp_state: the state the caller believes the QP is in
	PathMTU  MTU     // path_mtu (RC, UC)
	// QKey is a UD QP's Q_Key (qkey): datagrams must carry it.
	QKey  uint32
	RQPSN PSN // rq_psn: the first PSN expected from the peer
	SQPSN PSN // sq_psn: the first PSN to send
	// DestQPN is the peer's QP number (dest_qp_num; RC, UC).
	DestQPN uint32
	// AccessFlags are the remote rights granted to the peer's requests
	// (qp_access_flags): AccessRemoteWrite, AccessRemoteRead,
	// AccessRemoteAtomic. 0 grants none.
	AccessFlags Access
	Cap         QPCap  // cap (Query only: resizing is not supported)
	AH          AHAttr // ah_attr: the primary path (RC, UC)
	PKeyIndex   uint16 // pkey_index (0: the default P_Key)
	// EnSQDAsyncNotify asks for EventSQDrained when the QP reaches SQD
	// (en_sqd_async_notify).
	EnSQDAsyncNotify bool
	// SQDraining is true in SQD while work requests are still in flight
	// (sq_draining; Query only).
	SQDraining bool
	// MaxRdAtomic is how many READs and atomics this QP may have
	// outstanding as requester (max_rd_atomic).
	MaxRdAtomic uint8
	// MaxDestRdAtomic is how many it accepts outstanding as responder
	// (max_dest_rd_atomic).
	MaxDestRdAtomic uint8
	// MinRNRTimer is the RNR NAK timer code the responder asks the peer
	// to wait (min_rnr_timer: 12 is 0.64 ms, 0 is 655.36 ms).
	MinRNRTimer uint8
	Port        uint8 // port_num: 1
	// Timeout is the local ACK timeout, 4.096 µs × 2^Timeout (timeout;
	// 0 is infinite).
	Timeout uint8
	// RetryCnt is how many times a request is retransmitted after a
	// timeout before the QP fails with WCRetryExcErr (retry_cnt, 0..7).
	RetryCnt uint8
	// RNRRetry is how many times a request is retried after an RNR NAK
	// (rnr_retry, 0..7; 7 is infinite).
	RNRRetry uint8
}

// QP is a queue pair (struct ibv_qp).
type QP struct {
	pd   *PD
	q    *transport.QP
	init QPInitAttr
	slot uint32

	mu   sync.Mutex // serializes Destroy
	dead atomic.Bool

	// waitFn is VirtualClock.WaitWrite's view of this QP alone, made at
	// the first wait: one made per wait would be an allocation per
	// round trip of a virtual write_lat.
	waitFn func(int) (uint32, error)
}

// CreateQP creates a queue pair in the RESET state (ibv_create_qp).
func (pd *PD) CreateQP(a QPInitAttr) (*QP, error) { return pd.createQP(a, nil, nil) }

// createQP creates a queue pair whose send and receive queues are sendMem
// and recvMem if not nil: a host interface's rings, which the engine reads
// (a.Cap.MaxSendWR and MaxRecvWR are their slot counts).
func (pd *PD) createQP(a QPInitAttr, sendMem, recvMem *transport.RingMem) (*QP, error) {
	d := pd.dev
	at := d.attr
	if err := pd.usable(); err != nil {
		return nil, fmt.Errorf("rnic: CreateQP: %w", err)
	}
	switch {
	case a.Type != RC && a.Type != UC && a.Type != UD && a.Type != GSI:
		return nil, fmt.Errorf("rnic: CreateQP: QP type %v is not supported", a.Type)
	case a.Type == GSI && !d.d.Features().GSI:
		return nil, errors.New("rnic: CreateQP: QP1 (GSI) is not modelled in virtual time")
	case a.Type == GSI && a.SRQ != nil:
		return nil, errors.New("rnic: CreateQP: QP1 (GSI) takes no SRQ")
	case a.SendCQ == nil || a.RecvCQ == nil:
		return nil, errors.New("rnic: CreateQP: SendCQ and RecvCQ are required")
	case a.SendCQ.dev != d || a.RecvCQ.dev != d || (a.SRQ != nil && a.SRQ.pd.dev != d):
		return nil, errors.New("rnic: CreateQP: CQ or SRQ of another device")
	case int(a.Cap.MaxSendWR) > at.MaxQPWR || int(a.Cap.MaxRecvWR) > at.MaxQPWR:
		return nil, fmt.Errorf("rnic: CreateQP: max_send_wr %d / max_recv_wr %d exceed max_qp_wr %d", a.Cap.MaxSendWR, a.Cap.MaxRecvWR, at.MaxQPWR)
	case int(a.Cap.MaxSendSGE) > at.MaxSGE || int(a.Cap.MaxRecvSGE) > at.MaxSGE:
		return nil, fmt.Errorf("rnic: CreateQP: max_send_sge %d / max_recv_sge %d exceed max_sge %d", a.Cap.MaxSendSGE, a.Cap.MaxRecvSGE, at.MaxSGE)
	case int(a.Cap.MaxInlineData) > at.MaxInlineData:
		return nil, fmt.Errorf("rnic: CreateQP: max_inline_data %d exceeds %d", a.Cap.MaxInlineData, at.MaxInlineData)
	}
	for _, cq := range []*CQ{a.SendCQ, a.RecvCQ} {
		if err := cq.usable(); err != nil {
			return nil, fmt.Errorf("rnic: CreateQP: %w", err)
		}
	}
	if a.SRQ != nil {
		if err := a.SRQ.usable(); err != nil {
			return nil, fmt.Errorf("rnic: CreateQP: %w", err)
		}
	}
	if err := pd.get(); err != nil {
		return nil, fmt.Errorf("rnic: CreateQP: %w", err)
	}
	var (
		qpn, slot uint32
		ok        = true
	)
	if a.Type != GSI {
		qpn, slot, ok = d.qpt.Alloc()
	}
	if !ok {
		pd.put()
		return nil, fmt.Errorf("rnic: CreateQP: all %d QPs in use", at.MaxQP)
	}
	qp := &QP{pd: pd, init: a, slot: slot}
	in := &transport.QPInit{Type: transport.QPType(a.Type), PD: pd.pdn, SendCQ: a.SendCQ.c, RecvCQ: a.RecvCQ.c,
		Cap: transport.QPCap(a.Cap), SigAll: a.SigAll, Opaque: qp, SendMem: sendMem, RecvMem: recvMem}
	if a.Type == GSI {
		in.Type, in.GSI = transport.UD, true
	}
	if a.SRQ != nil {
		in.SRQ = a.SRQ.s
	}
	var err error
	d.d.Engine(func(e *engine) {
		// Checked again under the engine lock, which Destroy of a CQ or
		// an SRQ takes too: one destroyed since the check above must not
		// gain a QP (its number would go to the next CQ, and with it this
		// QP's completions).
		for _, cq := range []*CQ{a.SendCQ, a.RecvCQ} {
			if err = cq.usable(); err != nil {
				return
			}
		}
		if a.SRQ != nil {
			if err = a.SRQ.usable(); err != nil {
				return
			}
		}
		qp.q, err = e.CreateQP(in, qpn, slot)
	})
	if err != nil {
		if a.Type != GSI {
			d.qpt.Release(slot)
		}
		pd.put()
		return nil, fmt.Errorf("rnic: CreateQP: %w", err)
	}
	return qp, nil
}

// gsiQKey is the only Q_Key of QP1 (IBTA §13.5.1).
const gsiQKey = transport.GSIQKey

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.q.QPN }

// Type returns the QP's transport service.
func (qp *QP) Type() QPType { return qp.init.Type }

// State returns the QP's current state; QPSErr once the QP was destroyed
// or its device closed, since it then accepts no work.
func (qp *QP) State() QPState {
	if qp.usable() != nil {
		return QPSErr
	}
	return QPState(qp.q.State())
}

// PD returns the QP's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// usable returns nil while the QP and its device live.
func (qp *QP) usable() error {
	if err := qp.pd.dev.usable(); err != nil {
		return err
	}
	if qp.dead.Load() {
		return fmt.Errorf("%w: QP %#x was destroyed", ErrClosed, qp.QPN())
	}
	return nil
}

// Modify changes the QP's state and attributes (ibv_modify_qp). The
// transition must be legal, with every attribute it requires and none it
// does not take (IBTA 11.2.4.2).
func (qp *QP) Modify(a *QPAttr, mask QPAttrMask) error {
	if err := qp.usable(); err != nil {
		return fmt.Errorf("rnic: Modify QP %#x: %w", qp.QPN(), err)
	}
	ta := transport.QPAttr{
		State: transport.QPState(a.State), CurState: transport.QPState(a.CurState), PathMTU: wire.MTU(a.PathMTU),
		QKey: a.QKey, RQPSN: wire.PSN(a.RQPSN), SQPSN: wire.PSN(a.SQPSN),
		DestQPN: a.DestQPN, AccessFlags: atuAccess(a.AccessFlags), Cap: transport.QPCap(a.Cap), SL: a.AH.SL, PKeyIndex: a.PKeyIndex,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify, MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic,
		MinRNRTimer: a.MinRNRTimer, Port: a.Port, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
	}
	if mask&QPAttrAV != 0 {
		r, err := qp.pd.dev.route(&a.AH)
		if err != nil {
			return fmt.Errorf("rnic: Modify QP %#x: %w", qp.QPN(), err)
		}
		ta.AV = r
	}
	var err error
	qp.pd.dev.d.Engine(func(e *engine) { err = e.Modify(qp.q, &ta, transport.AttrMask(mask)) })
	if err != nil {
		return fmt.Errorf("rnic: Modify QP %#x: %w", qp.QPN(), err)
	}
	return nil
}

// Query returns the QP's attributes and creation attributes (ibv_query_qp).
func (qp *QP) Query() (QPAttr, QPInitAttr, error) {
	if err := qp.usable(); err != nil {
		return QPAttr{}, QPInitAttr{}, fmt.Errorf("rnic: Query QP %#x: %w", qp.QPN(), err)
	}
	var ta transport.QPAttr
	qp.pd.dev.d.Engine(func(e *engine) { ta = e.Query(qp.q) })
	a := QPAttr{
		State: QPState(ta.State), CurState: QPState(ta.CurState), PathMTU: MTU(ta.PathMTU), QKey: ta.QKey,
		RQPSN: PSN(ta.RQPSN), SQPSN: PSN(ta.SQPSN),
		DestQPN: ta.DestQPN, AccessFlags: Access(ta.AccessFlags), Cap: QPCap(ta.Cap), PKeyIndex: ta.PKeyIndex,
		EnSQDAsyncNotify: ta.EnSQDAsyncNotify, SQDraining: ta.SQDraining, MaxRdAtomic: ta.MaxRdAtomic,
		MaxDestRdAtomic: ta.MaxDestRdAtomic, MinRNRTimer: ta.MinRNRTimer, Port: ta.Port, Timeout: ta.Timeout,
		RetryCnt: ta.RetryCnt, RNRRetry: ta.RNRRetry,
		AH: AHAttr{DGID: GID(ta.AV.Dst), SGIDIndex: AddrGIDIndex, FlowLabel: ta.AV.FlowLabel, HopLimit: ta.AV.HopLimit, TrafficClass: ta.AV.TrafficClass, SL: ta.SL, PortNum: 1},
	}
	return a, qp.init, nil
}

// WRError says which work request of a post was refused (bad_wr); the
// ones before it were posted.
type WRError struct {
	Index int   // the refused work request's index in the list
	Err   error // why
}

func (e *WRError) Error() string { return fmt.Sprintf("rnic: work request %d: %v", e.Index, e.Err) }
func (e *WRError) Unwrap() error { return e.Err }

// PostSend posts send work requests and rings the doorbell once
// (ibv_post_send). On error the returned *WRError names the refused work
// request (bad_wr); the ones before it were posted. The work requests and
// their SGLs may be reused as soon as PostSend returns. It does not
// allocate.
func (qp *QP) PostSend(wrs ...SendWR) error {
	if err := qp.usable(); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	// The host builds the WQEs first: their time passes before the
	// doorbell (a virtual clock's: the clock goes on meanwhile, and the
	// QP may be destroyed).
	if err := qp.pd.dev.d.HostTime(device.PostSend, len(wrs)); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	if err := qp.usable(); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	if err := qp.q.BeginPostSend(); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	n := 0
	var err error
	for i := range wrs {
		var t transport.SendWR
		if err = qp.sendWR(&wrs[i], &t); err == nil {
			err = qp.q.PostSendWQE(&t)
		}
		if err != nil {
			break
		}
		n++
	}
	qp.q.EndPostSend(n)
	if err != nil {
		return &WRError{Index: n, Err: err}
	}
	return nil
}

// PostRecv posts receive work requests (ibv_post_recv); errors as
// PostSend. It does not allocate.
func (qp *QP) PostRecv(wrs ...RecvWR) error {
	if err := qp.usable(); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	if err := qp.q.BeginPostRecv(); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	n := 0
	var err error
	for i := range wrs {
		var t transport.RecvWR
		recvWR(&wrs[i], &t)
		if err = qp.q.PostRecvWQE(&t); err != nil {
			break
		}
		n++
	}
	qp.q.EndPostRecv(n)
	if err != nil {
		return &WRError{Index: n, Err: err}
	}
	return nil
}

// Destroy frees the QP (ibv_destroy_qp); its outstanding work requests
// are dropped without completions. Every later call on it, a second
// Destroy included, returns an error wrapping ErrClosed.
func (qp *QP) Destroy() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if err := qp.usable(); err != nil {
		return fmt.Errorf("rnic: Destroy QP %#x: %w", qp.QPN(), err)
	}
	qp.dead.Store(true)
	qp.pd.dev.d.Engine(func(e *engine) { e.DestroyQP(qp.q) })
	qp.pd.put()
	return nil
}

// Counters returns the QP's counters by name (rdma statistic show
// link ... qp); after Destroy or Close, their final values.
func (qp *QP) Counters() []Counter {
	var c transport.QPCounters
	qp.pd.dev.d.Engine(func(e *engine) { c = e.QPCounters(qp.q) })
	out := make([]Counter, len(c))
	for i, v := range c {
		out[i] = Counter{Name: transport.Counter(i).String(), Value: v}
	}
	return out
}
