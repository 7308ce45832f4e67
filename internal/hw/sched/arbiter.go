package sched

import (
	"fmt"
	"math/bits"
)

// Arbiter is the doorbell and arbiter of one NIC engine. It is not safe for
// concurrent use: the engine that owns it makes every call.
type Arbiter struct {
	cfg      Config
	unit     int64 // credit per round per unit of weight: Quantum (DWRR) or BurstLimit (WRR)
	qs       []queue
	levels   [MaxLevels]level
	nonEmpty uint32 // bit l set while level l has a queued queue
	ready    int
	gate     Gate
	parker   Parker // gate, when it is one
	stats    Stats
}

// Grant is what a queue may send in one turn.
type Grant struct {
	// Packets is the most packets the queue may send: 1..BurstLimit.
	Packets int
	// Bytes is the queue's byte credit: the engine starts a packet only
	// while it has sent fewer than Bytes bytes this turn, so the last one
	// may overshoot. In DWRR it is the queue's deficit; in WRR, where only
	// packets count, it is NoByteLimit.
	Bytes int
}

// New returns an arbiter with no ready queue, or an error naming the bad
// Config field.
func New(cfg Config) (*Arbiter, error) {
	cfg, err := cfg.check()
	if err != nil {
		return nil, err
	}
	a := &Arbiter{cfg: cfg, qs: make([]queue, cfg.Queues)}
	a.unit = int64(cfg.BurstLimit)
	if cfg.Mode == DWRR {
		a.unit = int64(cfg.Quantum)
	}
	return a, nil
}

// SetQueue sets q's level (0..Levels-1) and weight (1..MaxWeight); a queue
// never configured has level 0 and weight 1. A ready queue that changes
// level joins the next round of its new level, a queue in service moves
// when its turn ends, and a new weight takes effect at the queue's next
// round. Remove keeps both, so a QP that goes through the error state and
// back keeps its service level.
func (a *Arbiter) SetQueue(q uint32, level, weight int) error {
	switch {
	case q >= MaxQueues:
		return fmt.Errorf("%w: queue %d, want < %d", ErrInvalid, q, MaxQueues)
	case level < 0 || level >= a.cfg.Levels:
		return fmt.Errorf("%w: queue %d level = %d, want 0..%d", ErrInvalid, q, level, a.cfg.Levels-1)
	case weight < 1 || weight > MaxWeight:
		return fmt.Errorf("%w: queue %d weight = %d, want 1..%d", ErrInvalid, q, weight, MaxWeight)
	}
	s := a.slot(q)
	s.weight1 = uint16(weight - 1)
	if int(s.level) == level {
		return nil
	}
	if s.flags&queued == 0 {
		s.level = uint8(level)
		return nil
	}
	a.unlink(q)
	s.level = uint8(level)
	a.activate(q)
	return nil
}

// Ring is the doorbell: q has work. Ringing a queue that is already ready
// or in service changes nothing but the counters (a ring during service
// keeps the queue ready after its Done). A queue index never seen before
// grows the queue table; an index of MaxQueues or more panics.
func (a *Arbiter) Ring(q uint32) {
	a.stats.Doorbells++
	s := a.slot(q)
	switch {
	case s.flags&queued != 0:
		a.stats.Coalesced++
	case s.flags&serving != 0:
		if s.flags&rung != 0 {
			a.stats.Coalesced++
		}
		s.flags |= rung
	case a.parker != nil && a.parker.Parked(q):
		a.stats.Coalesced++
	default:
		a.activate(q)
	}
}

// activate makes an idle q ready at the tail of the next round, as a newly
// active flow joins the tail of a DRR list. This is where the deficit of a
// queue that went idle (or was removed, or parked by the gate) is reset: it
// starts from zero plus one round's credit.
func (a *Arbiter) activate(q uint32) {
	s := &a.qs[q]
	s.deficit = 0
	s.addDeficit(a.topUp(s))
	a.pushNext(q)
}

// topUp is the credit q gains per round.
func (a *Arbiter) topUp(s *queue) int64 { return a.unit * s.weight() }

// Next picks the queue to serve: the head of the current round of the
// highest non-empty level. It returns ok=false when no queue is ready. The
// queue is in service until Done; it is not counted by Ready and Next does
// not return it again before its Done.
func (a *Arbiter) Next() (q uint32, g Grant, ok bool) {
	for a.nonEmpty != 0 {
		l := uint8(bits.TrailingZeros32(a.nonEmpty))
		q = a.pop(l)
		s := &a.qs[q]
		if s.deficit <= 0 {
			// The overshoot it carries exceeds a round's credit
			// (Quantum below the packet size): it sits this round out.
			s.addDeficit(a.topUp(s))
			a.pushNext(q)
			continue
		}
		g = a.grant(s)
		if a.gate != nil {
			if g, ok = a.admit(q, g); !ok {
				continue
			}
		}
		s.flags |= serving
		a.stats.Grants++
		a.stats.LevelGrants[l]++
		return q, g, true
	}
	return 0, Grant{}, false
}

// grant is the turn a queue with positive deficit may take.
func (a *Arbiter) grant(s *queue) Grant {
	if a.cfg.Mode == WRR {
		return Grant{Packets: min(a.cfg.BurstLimit, int(s.deficit)), Bytes: NoByteLimit}
	}
	return Grant{Packets: a.cfg.BurstLimit, Bytes: int(s.deficit)}
}

// Done ends q's turn: the engine sent packets packets of bytes bytes in
// all (count wire bytes, or at least payload bytes; every packet is charged
// at least one byte) and more tells whether q still has work. With more, q
// stays ready: at the tail of the current round if it has credit left (the
// turn hit the burst limit), else topped up at the tail of the next round.
// A turn that sent nothing ends q's round, so a blocked queue cannot hold a
// round open. Without more, q goes idle and its deficit resets, unless it
// was rung during the turn. Done for a queue not in service panics: it is a
// bug in the engine.
func (a *Arbiter) Done(q uint32, packets, bytes int, more bool) {
	if int(q) >= len(a.qs) || a.qs[q].flags&serving == 0 {
		panic("sched: Done for a queue not in service")
	}
	if packets < 0 || bytes < 0 {
		panic("sched: Done with a negative count")
	}
	a.stats.Packets += uint64(packets)
	a.stats.Bytes += uint64(bytes)
	s := &a.qs[q]
	f := s.flags
	s.flags &^= serving | rung | dropped
	switch {
	case f&dropped != 0:
		if f&rung != 0 {
			a.activate(q)
		}
	case more:
		a.requeue(q, packets, bytes)
	case f&rung != 0:
		a.activate(q)
	}
}

// requeue charges a turn to a queue that has more work and puts it back.
func (a *Arbiter) requeue(q uint32, packets, bytes int) {
	s := &a.qs[q]
	cost := int64(packets)
	if a.cfg.Mode == DWRR {
		cost = max(int64(bytes), cost)
	}
	s.addDeficit(-cost)
	served := s.list() // the round's list it was taken from
	if s.deficit > 0 && packets > 0 && served == a.levels[s.level].cur {
		a.push(s.level, served, q) // credit left in a round still running
		return
	}
	// Its round is over: credit used up, a turn that sent nothing, or
	// (with several queues in service) the round ended during the turn.
	// Positive credit is not carried over, as DRR forgets the deficit of
	// a queue that goes idle. (Two rounds ending during one turn look
	// like none; the queue then finishes its credit in the current round,
	// which costs fairness one turn, never liveness.)
	s.deficit = min(s.deficit, 0)
	s.addDeficit(a.topUp(s))
	a.push(s.level, served^1, q)
}

// Remove drops q from the ready lists and forgets its deficit, for a QP
// destroyed or moved to the error state. A queue in service finishes its
// turn with Done, which then does not requeue it; a Ring after Remove makes
// it ready again. Removing an idle or unknown queue does nothing.
func (a *Arbiter) Remove(q uint32) {
	if int(q) >= len(a.qs) {
		return
	}
	s := &a.qs[q]
	switch {
	case s.flags&queued != 0:
		a.unlink(q)
		a.stats.Removed++
	case s.flags&serving != 0:
		s.flags |= dropped
		a.stats.Removed++
	}
	s.flags &^= rung
}

// Ready returns the number of queues waiting to be picked by Next (queues
// in service are not counted).
func (a *Arbiter) Ready() int { return a.ready }

// Stats returns the arbiter's counters.
func (a *Arbiter) Stats() Stats { return a.stats }
