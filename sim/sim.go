package sim

import (
	"fmt"
	"math/rand/v2"
)

// Sim is a discrete-event simulator: a virtual clock, the events scheduled
// for the future, and one random number generator. It is not safe for
// concurrent use; a simulation is single-threaded by design, which is what
// makes it reproducible.
type Sim struct {
	now     Time
	seq     uint64 // sequence number of the next scheduled entry
	heap    eventHeap
	slots   []slot   // payloads, indexed by entry.slot
	free    []uint32 // unused slot indices
	stale   int      // heap entries of timers that have been moved since
	handled uint64   // events delivered to handlers
	stopped bool

	seed  uint64
	rng   *rand.Rand
	trace TraceFunc
}

// slot is the payload of a heap entry. A timer entry has timer set; its
// event is built from the timer when it fires, and gen tells whether the
// entry is still the timer's current one.
type slot struct {
	ev    Event
	timer *Timer
	gen   uint32
}

// TraceFunc receives every event just before its handler runs (n is the
// 1-based event number). It exists to debug a failing seed: trace a run,
// diff it against a good one.
type TraceFunc func(n uint64, ev Event)

// pcgStream is the PCG increment (stream selector) paired with the seed.
// It is fixed so that a run is named by its seed alone.
const pcgStream = 0x9E3779B97F4A7C15

// New returns a simulator at time 0 whose random numbers come from one PCG
// stream seeded by seed.
func New(seed uint64) *Sim {
	return &Sim{
		seed: seed,
		rng:  rand.New(rand.NewPCG(seed, pcgStream)),
	}
}

// Now returns the current virtual time: the time of the event being
// handled, or where RunUntil left the clock.
func (s *Sim) Now() Time { return s.now }

// Seed returns the seed the simulator was created with.
func (s *Sim) Seed() uint64 { return s.seed }

// Rand returns the simulation's random number generator. Every random
// decision of every component (loss, jitter, ECN marking, workload
// arrivals) must be drawn from it, in event order, or runs stop being
// reproducible: no math/rand globals, no private generators seeded from
// the clock.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Events returns the number of events delivered to handlers so far
// (timer entries that were cancelled or moved are not counted).
func (s *Sim) Events() uint64 { return s.handled }

// Pending returns the number of entries in the event queue, including
// entries of timers that have been moved or stopped and not yet skipped.
func (s *Sim) Pending() int { return len(s.heap) }

// SetTrace sets the function that sees each event before its handler
// (nil turns tracing off, the default). WriterTrace formats one line per
// event.
func (s *Sim) SetTrace(fn TraceFunc) { s.trace = fn }

// Schedule arranges for ev.H.Handle to be called at ev.At. Scheduling in
// the past is a bug in the caller (the event would run at a time that has
// already been observed) and panics, as does a nil handler.
func (s *Sim) Schedule(ev Event) {
	if ev.At < s.now {
		panic(fmt.Sprintf("sim: event scheduled at %v, before now (%v)", ev.At, s.now))
	}
	if ev.H == nil {
		panic("sim: event has no handler")
	}
	s.push(ev.At, slot{ev: ev})
}

// At schedules an event of kind with arg for h at absolute time at.
func (s *Sim) At(at Time, h Handler, kind int32, arg uint64) {
	s.Schedule(Event{At: at, Kind: kind, Arg: arg, H: h})
}

// After schedules an event of kind with arg for h, d after now.
func (s *Sim) After(d Time, h Handler, kind int32, arg uint64) {
	if d < 0 {
		panic(fmt.Sprintf("sim: negative delay %v", d))
	}
	s.Schedule(Event{At: s.now + d, Kind: kind, Arg: arg, H: h})
}

func (s *Sim) push(at Time, sl slot) {
	var i uint32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
		s.slots[i] = sl
	} else {
		i = uint32(len(s.slots))
		s.slots = append(s.slots, sl)
	}
	s.heap.push(entry{at: at, seq: s.seq, slot: i})
	s.seq++
}

// release frees a slot, dropping its references so the garbage collector
// can reclaim what the event pointed to.
func (s *Sim) release(i uint32) {
	s.slots[i] = slot{}
	s.free = append(s.free, i)
}

// Stop makes the running Run, RunUntil or RunFor return after the current
// event. The next call to one of them clears it.
func (s *Sim) Stop() { s.stopped = true }

// Step delivers the next event, if any, and reports whether it did.
func (s *Sim) Step() bool {
	return s.deliverNext(Never)
}

// Run delivers events until none is left or Stop is called, and returns
// how many it delivered. A handler that always schedules another event
// keeps it running: bound such simulations with RunUntil or RunFor.
func (s *Sim) Run() uint64 {
	s.stopped = false
	start := s.handled
	for !s.stopped && s.deliverNext(Never) {
	}
	return s.handled - start
}

// RunUntil delivers every event due at or before t, then advances the
// clock to t (unless Stop was called first, which leaves the clock at the
// last event). It returns how many events it delivered.
func (s *Sim) RunUntil(t Time) uint64 {
	if t < s.now {
		panic(fmt.Sprintf("sim: RunUntil(%v) before now (%v)", t, s.now))
	}
	s.stopped = false
	start := s.handled
	for !s.stopped && s.deliverNext(t) {
	}
	if !s.stopped {
		s.now = t
	}
	return s.handled - start
}

// RunFor delivers at most n events (fewer if the queue empties or Stop is
// called) and returns how many it delivered.
func (s *Sim) RunFor(n uint64) uint64 {
	s.stopped = false
	start := s.handled
	for s.handled-start < n && !s.stopped && s.deliverNext(Never) {
	}
	return s.handled - start
}

// deliverNext pops entries due at or before limit until one is delivered
// to its handler, skipping stale timer entries, and reports whether one
// was.
func (s *Sim) deliverNext(limit Time) bool {
	for len(s.heap) > 0 && s.heap[0].at <= limit {
		e := s.heap.pop()
		sl := s.slots[e.slot]
		if sl.timer != nil {
			ev, ok := s.fire(e, sl)
			if !ok {
				continue
			}
			s.deliver(ev)
			return true
		}
		s.release(e.slot)
		s.deliver(sl.ev)
		return true
	}
	return false
}

func (s *Sim) deliver(ev Event) {
	s.now = ev.At
	s.handled++
	if s.trace != nil {
		s.trace(s.handled, ev)
	}
	ev.H.Handle(s, ev)
}

// StepUntil delivers the next event if it is due at or before t, and
// reports whether it did.
func (s *Sim) StepUntil(t Time) bool {
	return s.deliverNext(t)
}

// Advance moves the clock to t, without an event, if no event is due
// before or at t, and reports whether it did: a caller that would
// otherwise schedule an event at t only to be woken by it (a host
// thread's CPU time) skips the heap when nothing else would happen
// meanwhile.
func (s *Sim) Advance(t Time) bool {
	if t < s.now || len(s.heap) > 0 && s.heap[0].at <= t {
		return false
	}
	s.now = t
	return true
}
