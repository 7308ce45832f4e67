package transport

import (
	"slices"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/bus"
)

// Send completions of UC and UD frames sent by reference.
//
// RC may lend a request's payload to its frames (Config.PayloadRefs)
// because its work request completes only once the responder's ACK says
// the bytes are placed. UC and UD complete a work request once its frames
// are sent, and the program may then write its buffer again: a frame
// still on its way that refers to the buffer would carry what the
// program wrote after. So a UC or UD work request with frames sent by
// reference completes once those frames are consumed (link.Consumer:
// their receiver copied, dropped or lost them), not when they were sent;
// the buffer is the program's again exactly at its completion, as
// libibverbs says. Completions stay in posting order: one that waits
// holds the later ones behind it, as an unacknowledged RC request does.
//
// The receiver tells the frame's slot of lending (refSlot.Consumed), on
// its own goroutine and without the sending engine's lock: the slot
// counts down, and the last frame of a work request marks the engine's
// refsReady and kicks it. The engine's next turn (Run) retires what was
// consumed (completeRefs).
//
// A QP flushed (ERR, SQE) while such work is in flight does not give the
// buffers back early: its flush completes everything else, in order,
// once each waiting work request's frames are consumed (flushSQ,
// retireConsumed). Reset and destroy take the memory back instead
// (bus.Loan.TakeBack: later frames are dropped on arrival), as they
// discard the work without completions.

// lending is what a QP lends to its frames sent by reference: its send
// buffers (loan, a line of its own, which the receiving NICs write), and
// on a UC or UD QP a slot per send queue slot that follows the work
// request's frames.
type lending struct {
	loan  bus.Loan
	e     *Engine
	slots []refSlot // UC, UD
	// listed: the QP is in the engine's refQPs.
	listed bool
}

// refSlot counts the frames of one work request sent by reference and
// not yet consumed. Receivers on other cores write it.
type refSlot struct {
	l   *lending
	out atomic.Int32
}

// Consumed is link.Consumer: one of the slot's frames is done with.
func (s *refSlot) Consumed() {
	// One kick until the engine looks (completeRefs clears the mark).
	if s.out.Add(-1) == 0 && !s.l.e.refsReady.Swap(true) {
		s.l.e.cfg.Kick()
	}
}

// lending returns what qp lends, made at its first frame sent by
// reference.
func (e *Engine) lending(qp *QP) *lending {
	if qp.lent == nil {
		l := &lending{e: e}
		if qp.Type != RC {
			l.slots = make([]refSlot, qp.sq.depth)
			for j := range l.slots {
				l.slots[j].l = l
			}
		}
		qp.lent = l
	}
	return qp.lent
}

// refsOut reports whether send queue index i of a UC or UD QP has frames
// sent by reference not yet consumed.
func (qp *QP) refsOut(i uint32) bool {
	return qp.lent != nil && qp.lent.slots != nil && qp.lent.slots[i%qp.sq.depth].out.Load() != 0
}

// sentByRef ends the sending of UC or UD work request w at index i: it
// completes now unless frames it sent by reference are still on their
// way, in which case it waits for them (completeRefs).
func (e *Engine) sentByRef(qp *QP, w *sendWQE, i uint32) {
	if !qp.refsOut(i) {
		e.wqeDone(qp, w, WCSuccess)
		return
	}
	if !qp.lent.listed {
		qp.lent.listed = true
		e.refQPs = append(e.refQPs, qp)
	}
}

// completeRefs retires the work requests whose frames sent by reference
// were all consumed since refsReady was set; a turn of the engine (Run)
// starts with it when it is.
func (e *Engine) completeRefs() {
	// Cleared before the look: a frame consumed during it marks it again.
	e.refsReady.Store(false)
	keep := e.refQPs[:0]
	for _, qp := range e.refQPs {
		if e.retireConsumed(qp) {
			keep = append(keep, qp)
		} else {
			qp.lent.listed = false
		}
	}
	clear(e.refQPs[len(keep):])
	e.refQPs = keep
}

// retireConsumed completes qp's sent work requests whose frames were all
// consumed, in order, and reports whether one still waits. A QP flushed
// meanwhile completes them with WR_FLUSH_ERR and goes on flushing.
func (e *Engine) retireConsumed(qp *QP) bool {
	req, sq := &qp.req, qp.sq
	waiting := false
	st := QPState(qp.state.Load())
	flushing := st == QPSErr || st == QPSSQE
	for i := req.compIdx; i != req.next; i++ {
		w := sq.slot(i)
		if w.state != wqePending {
			continue
		}
		if qp.refsOut(i) {
			waiting = true
			break
		}
		status := WCSuccess
		if flushing {
			status = WCWRFlushErr
			e.count(qp, ReqCQEFlushError)
		}
		e.wqeDone(qp, w, status)
	}
	e.retire(qp)
	if st := QPState(qp.state.Load()); st == QPSErr || st == QPSSQE {
		e.flushSQ(qp)
	}
	return waiting
}

// dropRefs forgets qp's waiting work requests and takes back the memory
// its frames still in flight refer to (reset, destroy: the work is
// discarded without completions, and the buffers are the program's).
func (e *Engine) dropRefs(qp *QP) {
	l := qp.lent
	if l == nil {
		return
	}
	l.loan.TakeBack() // frames still in flight no longer read its buffers
	if l.listed {
		e.refQPs = slices.DeleteFunc(e.refQPs, func(q *QP) bool { return q == qp })
	}
	qp.lent = nil // frames revoked above may still count down the old slots
}
