package transport

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// QPCap are a QP's queue sizes (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPInit creates a QP (struct ibv_qp_init_attr).
type QPInit struct {
	Type   QPType
	PD     uint32
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *SRQ
	Cap    QPCap
	SigAll bool
	Opaque any // the public API's handle, returned in async events
	// GSI makes the QP QP1, the general services interface (a UD QP;
	// see CreateQP).
	GSI bool
	// SendMem and RecvMem, if set, are the send and receive queues'
	// memory, the application's (a host interface's rings):
	// Cap.MaxSendWR and Cap.MaxRecvWR must be their slot counts.
	SendMem, RecvMem *RingMem
}

// QPAttr are a QP's attributes (struct ibv_qp_attr).
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          wire.MTU
	QKey             uint32
	RQPSN            wire.PSN
	SQPSN            wire.PSN
	DestQPN          uint32
	AccessFlags      atu.Access // remote rights granted to the peer (and LocalWrite)
	Cap              QPCap
	AV               wire.Route // the primary path
	SL               uint8
	PKeyIndex        uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8 // READ/atomics this QP may have outstanding as requester
	MaxDestRdAtomic  uint8 // READ/atomics it accepts outstanding as responder
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8 // local ACK timeout: 4.096 µs × 2^Timeout (0: infinite)
	RetryCnt         uint8
	RNRRetry         uint8 // 7: infinite
}

// QP is a queue pair: the QP context (QPC) the protocol engine works on,
// plus its work queues, which the application fills.
//
// Fields below "engine-owned" are touched only by the engine that owns the
// QP (or by the control path under that engine's lock).
type QP struct {
	QPN       uint32
	PD        uint32
	Type      QPType
	sigAll    bool
	gsi       bool // QP1
	destroyed bool // engine-owned

	// state mirrors the QPC state for the posting path, which must not
	// take the engine lock.
	state    atomic.Uint32
	dbQueued atomic.Bool // a doorbell for this QP is in the engine's queue

	// Engine-owned (with destroyed above). The fields are ordered so that
	// the context has no padding (64 K QPs hold 64 K of it), and what an
	// idle QP does not need (counters, READ recovery) is allocated when
	// first used.
	mtu    uint32 // path MTU in bytes
	index  uint32 // the arbiter's queue index
	req    reqState
	Opaque any

	scq      *CQ
	rcq      *CQ
	srq      *SRQ
	sq       *sendRing
	rq       *recvRing
	engine   *Engine
	counters *QPCounters   // nil until the first counted event
	cc       *ccState      // congestion control (Config.DCQCN); nil until needed
	rd       *readRecovery // the requester's READ responses past a gap; nil until the first
	// lent is what the QP lends to frames sent by reference
	// (Config.PayloadRefs), made at the first: its send buffers' loan,
	// which reset and DestroyQP take back, and the UC and UD work
	// requests that complete once those frames are consumed (byref.go).
	lent *lending

	attr  QPAttr
	resp  respState
	timer qpTimers
}

func (qp *QP) sendCQN() uint32 { return qp.scq.CQN }
func (qp *QP) recvCQN() uint32 { return qp.rcq.CQN }

// State returns the QP's state as the posting path sees it.
func (qp *QP) State() QPState { return QPState(qp.state.Load()) }

// TrafficClass returns the IP traffic class of the QP's path (its
// ModifyQP address vector; the ECN bits as asked, not as DCQCN sets
// them): the fabric's priority is its top three bits. Call it from the
// engine's goroutine, as the arbiter's gate does.
func (qp *QP) TrafficClass() uint8 { return qp.attr.AV.TrafficClass }

// SendOutstanding returns the send WQEs posted and not yet retired: at
// most this many completions are still to come from the send queue.
func (qp *QP) SendOutstanding() int { return int(qp.sq.pi.Load() - qp.sq.ci.Load()) }

// Errors returned by posting. They wrap into messages naming the problem.
var (
	ErrQPState   = errors.New("QP state does not accept this work request")
	ErrQueueFull = errors.New("work queue full")
	ErrInvalidWR = errors.New("invalid work request")
)

// PostSend writes work requests into the send queue and rings the doorbell
// once. It returns how many were posted; on error, wrs[n] is the bad one
// (ibv_post_send's bad_wr).
func (qp *QP) PostSend(wrs []SendWR) (int, error) {
	if err := qp.BeginPostSend(); err != nil {
		return 0, err
	}
	n := 0
	var err error
	for i := range wrs {
		if err = qp.PostSendWQE(&wrs[i]); err != nil {
			break
		}
		n++
	}
	qp.EndPostSend(n)
	return n, err
}

// BeginPostSend starts a post of one or more work requests: it checks the
// QP's state and takes the send queue's posting lock. PostSendWQE writes
// each work request, EndPostSend rings the doorbell once for all of them
// and releases the lock. PostSend is the three in one; the public API uses
// them to convert its own work requests one at a time into a stack value,
// so that posting a list copies nothing twice and allocates nothing.
func (qp *QP) BeginPostSend() error {
	st := qp.State()
	if st == QPSReset || st == QPSInit || st == QPSRTR {
		return fmt.Errorf("%w: post send on a QP in %v", ErrQPState, st)
	}
	qp.sq.post.Lock()
	return nil
}

// PostSendWQE validates one work request and writes it at the producer
// index (between BeginPostSend and EndPostSend). wr is not retained.
func (qp *QP) PostSendWQE(wr *SendWR) error { return qp.writeSendWQE(wr) }

// Doorbell rings the send queue's doorbell for n WQEs the application
// wrote into the ring memory it shares with the NIC (QPInit.SendMem) and
// published with its producer index.
func (qp *QP) Doorbell(n int) { qp.engine.ring(qp, n) }

// RecvDoorbell tells the engine that the application posted to a receive
// ring it shares with the NIC (QPInit.RecvMem): the responder takes WQEs
// from it when messages need them, so there is nothing to do but on a QP
// in the error state, whose receives are flushed at once.
func (qp *QP) RecvDoorbell() {
	if qp.State() == QPSErr {
		qp.engine.ring(qp, 0)
	}
}

// EndPostSend rings the doorbell for the n work requests written since
// BeginPostSend (none if n is 0) and releases the posting lock.
func (qp *QP) EndPostSend(n int) {
	if n > 0 {
		qp.engine.ring(qp, n)
	}
	qp.sq.post.Unlock()
}

// writeSendWQE writes one work request into the slot at the producer
// index and publishes it, if the engine would take it: the poster checks
// the slot it wrote as the engine does when it fetches one, so that
// ibv_post_send refuses a bad work request at once. The check decodes the
// slot into the engine's copy of it (the slot is free: below the depth
// past the consumer index, the engine is done with its last WQE), which
// the engine then takes as fetched (sendRing.own): the store of the
// producer index publishes both. The caller holds sq.post.
func (qp *QP) writeSendWQE(wr *SendWR) error {
	sq := qp.sq
	pi := sq.pi.Load()
	if pi-sq.ci.Load() >= sq.depth {
		return fmt.Errorf("%w: %d send WRs outstanding (max_send_wr %d)", ErrQueueFull, sq.depth, sq.depth)
	}
	slot := sq.slotMem(pi)
	if err := qp.encodeSend(slot, wr); err != nil {
		return err
	}
	if err := qp.decodeSend(slot, sq.slot(pi), sq.slotSGE(pi)); err != nil {
		return err
	}
	sq.pi.Store(pi + 1)
	return nil
}

// PostRecv writes receive work requests into the QP's receive queue.
func (qp *QP) PostRecv(wrs []RecvWR) (int, error) {
	if err := qp.BeginPostRecv(); err != nil {
		return 0, err
	}
	n := 0
	var err error
	for i := range wrs {
		if err = qp.PostRecvWQE(&wrs[i]); err != nil {
			break
		}
		n++
	}
	qp.EndPostRecv(n)
	return n, err
}

// BeginPostRecv starts a post of receive work requests (see
// BeginPostSend): it checks the QP and takes the receive queue's posting
// lock. PostRecvWQE writes each one; EndPostRecv releases the lock.
func (qp *QP) BeginPostRecv() error {
	if qp.srq != nil {
		return fmt.Errorf("%w: QP %#x uses a shared receive queue; post to the SRQ", ErrInvalidWR, qp.QPN)
	}
	if qp.State() == QPSReset {
		return fmt.Errorf("%w: post receive on a QP in RESET", ErrQPState)
	}
	qp.rq.post.Lock()
	return nil
}

// PostRecvWQE writes one receive work request (between BeginPostRecv and
// EndPostRecv). wr is not retained.
func (qp *QP) PostRecvWQE(wr *RecvWR) error { return postRecvWQE(qp.rq, wr) }

// EndPostRecv releases the posting lock; receives posted to a QP in the
// error state are flushed at once.
func (qp *QP) EndPostRecv(n int) {
	qp.rq.post.Unlock()
	if n > 0 && qp.State() == QPSErr {
		qp.engine.ring(qp, 0) // flush them
	}
}

// postRecvWQE writes one receive WQE. The caller holds rq.post.
func postRecvWQE(rq *recvRing, wr *RecvWR) error {
	if uint32(len(wr.SGL)) > rq.maxSGE {
		return fmt.Errorf("%w: %d SGEs exceed max_recv_sge %d", ErrInvalidWR, len(wr.SGL), rq.maxSGE)
	}
	if !rq.postRecv(wr) {
		return fmt.Errorf("%w: %d receive WRs outstanding", ErrQueueFull, rq.depth)
	}
	return nil
}

func postRecvs(rq *recvRing, wrs []RecvWR) (int, error) {
	rq.post.Lock()
	defer rq.post.Unlock()
	for i := range wrs {
		if err := postRecvWQE(rq, &wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// MaxMsgSize is the largest message (2 GiB, IBTA's 2^31).
const MaxMsgSize = 1 << 31
