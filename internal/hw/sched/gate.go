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

// SetGate installs g (nil removes it). The gate is called from Next only.
func (a *Arbiter) SetGate(g Gate) { a.gate = g }

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
