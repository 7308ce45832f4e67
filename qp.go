package rnic

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rnic/rnic/internal/transport"
)

// QPInitAttr creates a QP (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *SRQ
	Cap    QPCap
	// SigAll makes every send work request signaled.
	SigAll bool
}

// QPAttr are a QP's attributes (struct ibv_qp_attr); Modify reads the
// fields its mask names.
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	QKey             uint32
	RQPSN            PSN
	SQPSN            PSN
	DestQPN          uint32
	AccessFlags      Access
	Cap              QPCap
	AH               AHAttr
	PKeyIndex        uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
}

// QP is a queue pair (struct ibv_qp).
type QP struct {
	pd   *PD
	q    *transport.QP
	init QPInitAttr
	slot uint32

	mu   sync.Mutex
	dead bool
}

// CreateQP creates a queue pair in the RESET state (ibv_create_qp).
func (pd *PD) CreateQP(a QPInitAttr) (*QP, error) {
	d := pd.dev
	at := d.attr
	switch {
	case a.Type != RC && a.Type != UC && a.Type != UD:
		return nil, fmt.Errorf("rnic: CreateQP: QP type %v is not supported", a.Type)
	case a.SendCQ == nil || a.RecvCQ == nil:
		return nil, errors.New("rnic: CreateQP: SendCQ and RecvCQ are required")
	case a.SendCQ.dev != d || a.RecvCQ.dev != d || (a.SRQ != nil && a.SRQ.pd.dev != d):
		return nil, errors.New("rnic: CreateQP: CQ or SRQ of another device")
	case a.SendCQ.dead || a.RecvCQ.dead:
		return nil, errors.New("rnic: CreateQP: CQ was destroyed")
	case int(a.Cap.MaxSendWR) > at.MaxQPWR || int(a.Cap.MaxRecvWR) > at.MaxQPWR:
		return nil, fmt.Errorf("rnic: CreateQP: max_send_wr %d / max_recv_wr %d exceed max_qp_wr %d", a.Cap.MaxSendWR, a.Cap.MaxRecvWR, at.MaxQPWR)
	case int(a.Cap.MaxSendSGE) > at.MaxSGE || int(a.Cap.MaxRecvSGE) > at.MaxSGE:
		return nil, fmt.Errorf("rnic: CreateQP: max_send_sge %d / max_recv_sge %d exceed max_sge %d", a.Cap.MaxSendSGE, a.Cap.MaxRecvSGE, at.MaxSGE)
	case int(a.Cap.MaxInlineData) > at.MaxInlineData:
		return nil, fmt.Errorf("rnic: CreateQP: max_inline_data %d exceeds %d", a.Cap.MaxInlineData, at.MaxInlineData)
	}
	if err := pd.get(); err != nil {
		return nil, err
	}
	qpn, slot, ok := d.d.QPs.Alloc()
	if !ok {
		pd.put()
		return nil, fmt.Errorf("rnic: CreateQP: all %d QPs in use", at.MaxQP)
	}
	qp := &QP{pd: pd, init: a, slot: slot}
	in := &transport.QPInit{Type: a.Type, PD: pd.pdn, SendCQ: a.SendCQ.c, RecvCQ: a.RecvCQ.c, Cap: a.Cap, SigAll: a.SigAll, Opaque: qp}
	if a.SRQ != nil {
		in.SRQ = a.SRQ.s
	}
	var err error
	d.d.Engine(func(e *engine) { qp.q, err = e.CreateQP(in, qpn, slot) })
	if err != nil {
		d.d.QPs.Release(slot)
		pd.put()
		return nil, fmt.Errorf("rnic: CreateQP: %w", err)
	}
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.q.QPN }

// Type returns the QP's transport service.
func (qp *QP) Type() QPType { return qp.q.Type }

// State returns the QP's current state.
func (qp *QP) State() QPState { return qp.q.State() }

// PD returns the QP's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// Modify changes the QP's state and attributes (ibv_modify_qp). The
// transition must be legal, with every attribute it requires and none it
// does not take (IBTA 11.2.4.2).
func (qp *QP) Modify(a *QPAttr, mask QPAttrMask) error {
	if err := qp.alive(); err != nil {
		return err
	}
	ta := transport.QPAttr{
		State: a.State, CurState: a.CurState, PathMTU: a.PathMTU, QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN,
		DestQPN: a.DestQPN, AccessFlags: a.AccessFlags, Cap: a.Cap, SL: a.AH.SL, PKeyIndex: a.PKeyIndex,
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
	qp.pd.dev.d.Engine(func(e *engine) { err = e.Modify(qp.q, &ta, mask) })
	if err != nil {
		return fmt.Errorf("rnic: Modify QP %#x: %w", qp.QPN(), err)
	}
	return nil
}

// Query returns the QP's attributes and creation attributes (ibv_query_qp).
func (qp *QP) Query() (QPAttr, QPInitAttr) {
	var ta transport.QPAttr
	qp.pd.dev.d.Engine(func(e *engine) { ta = e.Query(qp.q) })
	a := QPAttr{
		State: ta.State, CurState: ta.CurState, PathMTU: ta.PathMTU, QKey: ta.QKey, RQPSN: ta.RQPSN, SQPSN: ta.SQPSN,
		DestQPN: ta.DestQPN, AccessFlags: ta.AccessFlags, Cap: ta.Cap, PKeyIndex: ta.PKeyIndex,
		EnSQDAsyncNotify: ta.EnSQDAsyncNotify, SQDraining: ta.SQDraining, MaxRdAtomic: ta.MaxRdAtomic,
		MaxDestRdAtomic: ta.MaxDestRdAtomic, MinRNRTimer: ta.MinRNRTimer, Port: ta.Port, Timeout: ta.Timeout,
		RetryCnt: ta.RetryCnt, RNRRetry: ta.RNRRetry,
		AH: AHAttr{DGID: ta.AV.Dst, FlowLabel: ta.AV.FlowLabel, HopLimit: ta.AV.HopLimit, TrafficClass: ta.AV.TrafficClass, SL: ta.SL, PortNum: 1},
	}
	return a, qp.init
}

// WRError says which work request of a post was refused; the ones before
// it were posted.
type WRError struct {
	Index int
	Err   error
}

func (e *WRError) Error() string { return fmt.Sprintf("rnic: work request %d: %v", e.Index, e.Err) }
func (e *WRError) Unwrap() error { return e.Err }

// PostSend posts send work requests and rings the doorbell once
// (ibv_post_send). On error the returned *WRError names the refused work
// request (bad_wr); the ones before it were posted. The work requests and
// their SGLs may be reused as soon as PostSend returns.
func (qp *QP) PostSend(wrs ...SendWR) error {
	n, err := qp.q.PostSend(wrs)
	if err != nil {
		return &WRError{Index: n, Err: err}
	}
	return nil
}

// PostRecv posts receive work requests (ibv_post_recv).
func (qp *QP) PostRecv(wrs ...RecvWR) error {
	n, err := qp.q.PostRecv(wrs)
	if err != nil {
		return &WRError{Index: n, Err: err}
	}
	return nil
}

// Destroy frees the QP (ibv_destroy_qp); its outstanding work requests
// are dropped without completions.
func (qp *QP) Destroy() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead {
		return errors.New("rnic: QP already destroyed")
	}
	qp.dead = true
	qp.pd.dev.d.Engine(func(e *engine) { e.DestroyQP(qp.q) })
	qp.pd.put()
	return nil
}

func (qp *QP) alive() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead {
		return errors.New("rnic: QP was destroyed")
	}
	return qp.pd.dev.checkOpen()
}

// Counters returns the QP's counters by name (rdma statistic show
// link ... qp).
func (qp *QP) Counters() []Counter {
	var c transport.QPCounters
	qp.pd.dev.d.Engine(func(e *engine) { c = e.QPCounters(qp.q) })
	out := make([]Counter, len(c))
	for i, v := range c {
		out[i] = Counter{Name: transport.Counter(i).String(), Value: v}
	}
	return out
}
