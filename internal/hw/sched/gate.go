package sched

// Gate is the hook for a per-queue rate limiter, such as the per-QP rate of
// congestion control (DCQCN): a token bucket, or an "eligible at time T"
// calendar that the engine advances with its own clock. Without a gate
// every ready queue is eligible.
type Gate interface {
	// Admit is called by Next with the queue it is about to serve and the
	// grant it would get. It returns the grant to use, which may be
	// smaller (the bytes left in a token bucket) but never larger, and
	// false to refuse the turn. A refused queue is parked: it leaves the
	// ready lists as if it had gone idle, and the engine rings it again
	// when the limiter says it is eligible.
	Admit(q uint32, g Grant) (Grant, bool)
}

// Parker is a Gate that also knows which queues it has parked and not
// yet rung again. The arbiter asks it at a doorbell: a parked queue's
// doorbell leaves it idle, counted as coalesced, since the gate would
// refuse its turn and the engine rings it when the gate gives it back.
// (A timing model's gate parks a QP for the time its step is in a
// processing unit, and every doorbell of a busy QP was a turn taken off
// the list only to be refused.)
type Parker interface {
	Gate
	// Parked reports whether q is parked by the gate.
	Parked(q uint32) bool
}

// SetGate installs g (nil removes it). The gate is called from Next, and
// a Parker's Parked from Ring.
func (a *Arbiter) SetGate(g Gate) {
	a.gate = g
	a.parker, _ = g.(Parker)
}

// admit asks the gate about q, which Next has just taken off its list.
func (a *Arbiter) admit(q uint32, g Grant) (Grant, bool) {
	h, ok := a.gate.Admit(q, g)
	h.Packets = min(h.Packets, g.Packets)
	h.Bytes = min(h.Bytes, g.Bytes)
	if !ok || h.Packets < 1 || h.Bytes < 1 {
		a.stats.Refused++
		return Grant{}, false
	}
	return h, true
}
