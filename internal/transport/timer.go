package transport

import "container/heap"

// Each QP has two timers: the local ACK (retransmission) timer and the RNR
// timer. A QP keeps its deadlines in its context; the engine keeps at most
// a couple of heap entries per QP and checks them lazily: an entry whose
// deadline no longer matches the QP's is stale and skipped, and an entry
// that fires early (the deadline moved later) is pushed again. Resetting a
// timer on every ACK therefore costs a store, not a heap operation.
type qpTimers struct {
	retransAt int64 // 0: off
	rnrAt     int64 // 0: off
	queuedAt  int64 // earliest heap entry for this QP; 0: none
}

type timerEntry struct {
	at int64
	qp *QP
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// nextDeadline returns the QP's earliest armed timer.
func (t *qpTimers) nextDeadline() int64 {
	switch {
	case t.retransAt == 0:
		return t.rnrAt
	case t.rnrAt == 0:
		return t.retransAt
	default:
		return min(t.retransAt, t.rnrAt)
	}
}

// schedule makes sure a heap entry exists no later than the QP's earliest
// deadline.
func (e *Engine) schedule(qp *QP) {
	d := qp.timer.nextDeadline()
	if d == 0 {
		return
	}
	if qp.timer.queuedAt != 0 && qp.timer.queuedAt <= d {
		return
	}
	qp.timer.queuedAt = d
	heap.Push(&e.timers, timerEntry{at: d, qp: qp})
}

// NextDeadline returns when Tick next has work, if ever.
func (e *Engine) NextDeadline() (int64, bool) {
	if len(e.timers) == 0 {
		return 0, false
	}
	return e.timers[0].at, true
}

// Tick fires every timer due at now.
func (e *Engine) Tick(now int64) {
	e.now = now
	for len(e.timers) > 0 && e.timers[0].at <= now {
		ent := heap.Pop(&e.timers).(timerEntry)
		qp := ent.qp
		if qp.timer.queuedAt == ent.at {
			qp.timer.queuedAt = 0
		}
		if qp.destroyed {
			continue
		}
		if at := qp.timer.rnrAt; at != 0 && at <= now {
			qp.timer.rnrAt = 0
			e.rnrTimeout(qp)
		}
		if at := qp.timer.retransAt; at != 0 && at <= now {
			qp.timer.retransAt = 0
			e.retransTimeout(qp)
		}
		e.schedule(qp)
	}
}
