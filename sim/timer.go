package sim

import "fmt"

// Timer is a deadline that can be armed, moved and cancelled cheaply, for
// the protocol engine's retransmission and RNR timers, which move on
// nearly every packet.
//
// Cancellation is lazy. The timer keeps at most one current entry in the
// event queue, tagged with its generation; an entry whose generation no
// longer matches is stale and skipped when it surfaces. Moving a deadline
// later costs nothing: the current entry stays, fires early, sees the
// later deadline and re-queues itself. Moving it earlier queues a new
// entry and leaves the old one stale. When stale entries outnumber live
// ones the queue is compacted, so their number stays bounded.
//
// A Timer is bound to one Sim and one handler; create it with NewTimer, or
// embed it in a larger struct and call Init (which must then not move).
type Timer struct {
	s    *Sim
	h    Handler
	kind int32
	arg  uint64
	ptr  any

	at     Time   // deadline, when armed
	armed  bool   // the handler will be called at at
	queued bool   // an entry of generation gen is in the queue
	qAt    Time   // time of that entry
	gen    uint32 // generation of the current entry
}

// NewTimer returns a stopped timer that delivers Event{Kind: kind, Arg:
// arg} to h when it fires.
func (s *Sim) NewTimer(h Handler, kind int32, arg uint64) *Timer {
	t := &Timer{}
	t.Init(s, h, kind, arg, nil)
	return t
}

// Init prepares a timer embedded in a larger struct; ptr becomes the fired
// event's Ptr. The timer must not be copied or moved afterwards, since the
// event queue refers to it.
func (t *Timer) Init(s *Sim, h Handler, kind int32, arg uint64, ptr any) {
	if h == nil {
		panic("sim: timer has no handler")
	}
	*t = Timer{s: s, h: h, kind: kind, arg: arg, ptr: ptr}
}

// Reset arms the timer for absolute time at, replacing any earlier
// deadline. at must not be in the past.
func (t *Timer) Reset(at Time) {
	s := t.s
	if at < s.now {
		panic(fmt.Sprintf("sim: timer reset to %v, before now (%v)", at, s.now))
	}
	t.at, t.armed = at, true
	if t.queued && t.qAt <= at {
		return // the current entry fires first and re-queues itself
	}
	if t.queued {
		s.stale++
	}
	t.gen++
	t.queued, t.qAt = true, at
	s.push(at, slot{timer: t, gen: t.gen})
	s.maybeCompact()
}

// ResetAfter arms the timer d after now.
func (t *Timer) ResetAfter(d Time) { t.Reset(t.s.now + d) }

// Stop disarms the timer and reports whether it was armed. Its queue entry,
// if any, stays and is skipped when it surfaces (or reused by a later
// Reset).
func (t *Timer) Stop() bool {
	was := t.armed
	t.armed = false
	return was
}

// Deadline returns when the timer fires, if it is armed.
func (t *Timer) Deadline() (Time, bool) { return t.at, t.armed }

// fire handles a timer's queue entry e (payload sl) that has surfaced. It
// returns the event to deliver, or false if the entry was stale, the timer
// was stopped, or its deadline moved later (the entry is then re-queued).
func (s *Sim) fire(e entry, sl slot) (Event, bool) {
	t := sl.timer
	s.release(e.slot)
	if sl.gen != t.gen {
		s.stale--
		return Event{}, false
	}
	t.queued = false
	if !t.armed {
		return Event{}, false
	}
	if t.at > e.at {
		t.queued, t.qAt = true, t.at
		s.push(t.at, slot{timer: t, gen: t.gen})
		return Event{}, false
	}
	t.armed = false
	return Event{At: e.at, Kind: t.kind, Arg: t.arg, Ptr: t.ptr, H: t.h}, true
}

// compactMin is the fewest stale entries worth a compaction pass.
const compactMin = 256

// maybeCompact drops stale timer entries once they are the majority of the
// queue, keeping memory and heap depth proportional to live events.
func (s *Sim) maybeCompact() {
	if s.stale < compactMin || s.stale*2 < len(s.heap) {
		return
	}
	kept := s.heap[:0]
	for _, e := range s.heap {
		sl := &s.slots[e.slot]
		if sl.timer != nil && sl.gen != sl.timer.gen {
			s.release(e.slot)
			continue
		}
		kept = append(kept, e)
	}
	s.heap = kept
	s.heap.init()
	s.stale = 0
}
