package sched

// nilQ ends a ready list; MaxQueues keeps it out of the index space.
const nilQ = ^uint32(0)

// Deficit bounds. The ceiling is above any top-up (MaxWeight×MaxQuantum =
// 2^26) plus any carried credit; the floor bounds the overshoot a queue
// carries, so that a queue that reported an absurd byte count sits out a
// bounded number of rounds instead of overflowing.
const (
	maxDeficit = 1 << 30
	minDeficit = -MaxQuantum
)

// queue is the arbiter's state for one queue: 16 bytes. Its zero value is
// an idle queue at level 0 with weight 1, which is what a never-configured
// queue gets, so the table can grow by zeroed memory.
type queue struct {
	next, prev uint32 // ready-list links, valid while queued
	deficit    int32  // credit in the mode's unit: bytes (DWRR) or packets (WRR)
	weight1    uint16 // weight - 1
	level      uint8
	flags      flags
}

// flags is a queue's state.
type flags uint8

const (
	queued  flags = 1 << iota // on a ready list
	list1                     // the list it is on, or was taken from: lists[1] if set, else lists[0]
	serving                   // between Next and Done
	rung                      // a doorbell arrived while serving
	dropped                   // removed while serving: Done must not requeue
)

// list returns the index of the level list q is on or was taken from.
func (s *queue) list() uint8 {
	if s.flags&list1 != 0 {
		return 1
	}
	return 0
}

// weight returns the queue's weight, 1..MaxWeight.
func (s *queue) weight() int64 { return int64(s.weight1) + 1 }

// addDeficit adds d (negative to charge) to the queue's deficit, clamped to
// the deficit bounds.
func (s *queue) addDeficit(d int64) {
	s.deficit = int32(min(max(int64(s.deficit)+d, minDeficit), maxDeficit))
}

// slot returns q's state, growing the table to hold it. Growing allocates;
// Config.Queues sizes the table up front. q beyond MaxQueues is a bug in
// the engine's QPN-to-index map, so it panics.
func (a *Arbiter) slot(q uint32) *queue {
	if int(q) >= len(a.qs) {
		if q >= MaxQueues {
			panic("sched: queue index beyond MaxQueues")
		}
		a.qs = append(a.qs, make([]queue, int(q)+1-len(a.qs))...)
	}
	return &a.qs[q]
}
