package sched

import "testing"

// limiter is a test Gate: it refuses queues marked blocked and caps every
// grant at cap bytes.
type limiter struct {
	blocked map[uint32]bool
	cap     int
}

func (l *limiter) Admit(q uint32, g Grant) (Grant, bool) {
	g.Bytes = min(g.Bytes, l.cap)
	return Grant{Packets: g.Packets + 100, Bytes: g.Bytes}, !l.blocked[q] // tries to enlarge Packets
}

func TestGate(t *testing.T) {
	a := mustNew(t, Config{Levels: 2, Mode: DWRR, Quantum: 4096, BurstLimit: 8})
	l := &limiter{blocked: map[uint32]bool{2: true}, cap: 1000}
	a.SetGate(l)
	a.Ring(1)
	a.Ring(2)
	a.Ring(3)
	for _, want := range []uint32{1, 3} {
		q, g, ok := a.Next()
		if !ok || q != want || g != (Grant{Packets: 8, Bytes: 1000}) {
			t.Fatalf("Next() = %d, %+v, %v; want %d with {8 1000} (shrunk bytes, packets not enlarged)", q, g, ok, want)
		}
		a.Done(q, 1, 1000, false)
	}
	if _, _, ok := a.Next(); ok || a.Ready() != 0 {
		t.Fatalf("refused queue 2 still ready (Ready %d)", a.Ready())
	}
	if st := a.Stats(); st.Refused != 1 || st.Grants != 2 {
		t.Fatalf("Refused = %d, Grants = %d; want 1, 2", st.Refused, st.Grants)
	}
	// The limiter releases queue 2: the engine rings it.
	l.blocked[2] = false
	a.Ring(2)
	if q, _, ok := a.Next(); !ok || q != 2 {
		t.Fatalf("Next() = %d, %v after release; want 2", q, ok)
	}
	// An empty grant from the gate counts as a refusal.
	a.Done(2, 1, 1, true)
	l.cap = 0
	if q, _, ok := a.Next(); ok {
		t.Fatalf("Next() = %d with a zero-byte gate; want nothing", q)
	}
	a.SetGate(nil)
	a.Ring(2)
	if _, g, ok := a.Next(); !ok || g.Bytes != 4096 {
		t.Fatalf("without a gate: grant %+v, %v; want the full deficit", g, ok)
	}
}

// parker is a test Parker: it refuses the queues marked blocked and
// reports them parked once it has refused them, until unpark.
type parker struct {
	blocked, parked map[uint32]bool
}

func (p *parker) Admit(q uint32, g Grant) (Grant, bool) {
	if p.blocked[q] {
		p.parked[q] = true
		return Grant{}, false
	}
	return g, true
}

func (p *parker) Parked(q uint32) bool { return p.parked[q] }

// TestParkerDoorbell: the doorbell of a queue the gate parked leaves it
// idle (coalesced), and the ring that unparks it makes it ready.
func TestParkerDoorbell(t *testing.T) {
	a := mustNew(t, Config{Levels: 1, Mode: DWRR, Quantum: 4096, BurstLimit: 8})
	p := &parker{blocked: map[uint32]bool{1: true}, parked: map[uint32]bool{}}
	a.SetGate(p)
	a.Ring(1)
	if _, _, ok := a.Next(); ok || !p.parked[1] {
		t.Fatalf("blocked queue 1 was granted (parked %v)", p.parked[1])
	}
	a.Ring(1) // a doorbell while parked
	if a.Ready() != 0 {
		t.Fatalf("a parked queue's doorbell made it ready (Ready %d)", a.Ready())
	}
	if st := a.Stats(); st.Refused != 1 || st.Coalesced != 1 || st.Doorbells != 2 {
		t.Fatalf("Refused %d, Coalesced %d, Doorbells %d; want 1, 1, 2", st.Refused, st.Coalesced, st.Doorbells)
	}
	p.blocked[1], p.parked[1] = false, false
	a.Ring(1) // the gate gives it back
	if q, _, ok := a.Next(); !ok || q != 1 {
		t.Fatalf("Next() = %d, %v after unparking; want 1", q, ok)
	}
}
