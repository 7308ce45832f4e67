package transport

// Each QP has two timers: the local ACK (retransmission) timer and the RNR
// timer. A QP keeps its deadlines in its context and has at most one entry
// in the engine's heap, checked lazily: an entry that fires early (the
// deadline moved later) is pushed again, so resetting a timer on every ACK
// costs a store, not a heap operation. Only an earlier deadline moves the
// entry up (timerHeap.fix). A QP that is destroyed or reset leaves the heap at
// once (its entry would otherwise keep it, and its rings, alive until a
// deadline that may be hours away).
type qpTimers struct {
	retransAt int64 // 0: off
	rnrAt     int64 // 0: off
	queuedAt  int64 // the QP's heap entry's deadline; 0: none
	heapPos   int   // its index in the heap, while queuedAt != 0
}

type timerEntry struct {
	at int64
	qp *QP
}

// timerHeap is a min-heap of deadlines; each entry's QP knows its index.
// It is typed rather than a container/heap.Interface, whose Push and Pop
// pass entries as interface values: an allocation per timer armed, which
// DCQCN's pacing does for every wait.
type timerHeap []timerEntry

func (h timerHeap) less(i, j int) bool { return h[i].at < h[j].at }

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].qp.timer.heapPos = i
	h[j].qp.timer.heapPos = j
}

func (h timerHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

// down sifts entry i down; it reports whether the entry moved.
func (h timerHeap) down(i int) bool {
	start, n := i, len(h)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > start
}

func (h *timerHeap) push(ent timerEntry) {
	ent.qp.timer.heapPos = len(*h)
	*h = append(*h, ent)
	h.up(len(*h) - 1)
}

// remove takes out entry i and returns it.
func (h *timerHeap) remove(i int) timerEntry {
	old := *h
	n := len(old) - 1
	if i != n {
		old.swap(i, n)
		if !old[:n].down(i) {
			old[:n].up(i)
		}
	}
	ent := old[n]
	old[n] = timerEntry{}
	*h = old[:n]
	return ent
}

// fix restores the order after entry i's deadline changed.
func (h timerHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
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

// nextDeadline returns the QP's earliest timer: its protocol timers' and
// its congestion control's pacing wake-up.
func (qp *QP) nextDeadline() int64 {
	d := qp.timer.nextDeadline()
	if s := qp.cc; s != nil && s.wakeAt != 0 && (d == 0 || s.wakeAt < d) {
		d = s.wakeAt
	}
	return d
}

// schedule makes sure the QP's heap entry is due no later than its
// earliest deadline.
func (e *Engine) schedule(qp *QP) {
	d := qp.nextDeadline()
	if d == 0 {
		return
	}
	t := &qp.timer
	switch {
	case t.queuedAt == 0:
		t.queuedAt = d
		e.timers.push(timerEntry{at: d, qp: qp})
	case d < t.queuedAt:
		t.queuedAt = d
		e.timers[t.heapPos].at = d
		e.timers.fix(t.heapPos)
	}
}

// unschedule takes the QP's entry out of the heap and disarms its timers.
func (e *Engine) unschedule(qp *QP) {
	if qp.timer.queuedAt != 0 {
		e.timers.remove(qp.timer.heapPos)
	}
	qp.timer = qpTimers{}
	if qp.cc != nil {
		qp.cc.wakeAt = 0
	}
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
		qp := e.timers.remove(0).qp
		qp.timer.queuedAt = 0
		if at := qp.timer.rnrAt; at != 0 && at <= now {
			qp.timer.rnrAt = 0
			e.comp.rnrTimeout(qp)
		}
		if at := qp.timer.retransAt; at != 0 && at <= now {
			qp.timer.retransAt = 0
			e.comp.retransTimeout(qp)
		}
		if s := qp.cc; s != nil && s.wakeAt != 0 && s.wakeAt <= now {
			s.wakeAt = 0 // its rate lets it send again
			if !qp.destroyed {
				e.arb.Ring(qp.index)
			}
		}
		e.schedule(qp)
	}
}
