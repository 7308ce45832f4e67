package sim

import (
	"bytes"
	"fmt"
	"testing"
)

// recorder logs every event it handles as "time:kind:arg".
type recorder struct{ log []string }

func (r *recorder) Handle(s *Sim, ev Event) {
	r.log = append(r.log, fmt.Sprintf("%d:%d:%d", s.Now(), ev.Kind, ev.Arg))
}

func TestOrderByTimeThenFIFO(t *testing.T) {
	s := New(1)
	r := &recorder{}
	s.At(20, r, 1, 0)
	s.At(10, r, 2, 0)
	for i := range 5 { // same instant: scheduling order must survive the heap
		s.At(15, r, 3, uint64(i))
	}
	s.At(10, r, 4, 0)
	if n := s.Run(); n != 8 {
		t.Fatalf("Run delivered %d events, want 8", n)
	}
	want := []string{"10:2:0", "10:4:0", "15:3:0", "15:3:1", "15:3:2", "15:3:3", "15:3:4", "20:1:0"}
	if fmt.Sprint(r.log) != fmt.Sprint(want) {
		t.Fatalf("order = %v, want %v", r.log, want)
	}
}

func TestFIFOAtScaleMatchesSort(t *testing.T) {
	// Many events over few distinct times: delivery must be by (time,
	// scheduling order), checked against the order we scheduled them in.
	s := New(7)
	type key struct {
		at  Time
		seq int
	}
	var got []key
	h := HandlerFunc(func(s *Sim, ev Event) { got = append(got, key{ev.At, int(ev.Arg)}) })
	const n = 5000
	for i := range n {
		s.At(Time(s.Rand().IntN(17)), h, 0, uint64(i))
	}
	s.Run()
	if len(got) != n {
		t.Fatalf("delivered %d, want %d", len(got), n)
	}
	for i := 1; i < n; i++ {
		a, b := got[i-1], got[i]
		if a.at > b.at || (a.at == b.at && a.seq > b.seq) {
			t.Fatalf("event %d (%v) delivered before %d (%v)", a.seq, a.at, b.seq, b.at)
		}
	}
}

func TestRunUntilAdvancesClock(t *testing.T) {
	s := New(1)
	r := &recorder{}
	s.At(5, r, 0, 0)
	s.At(10, r, 0, 0)
	s.At(11, r, 0, 0)
	if n := s.RunUntil(10); n != 2 {
		t.Fatalf("RunUntil(10) delivered %d, want 2", n)
	}
	if s.Now() != 10 {
		t.Fatalf("Now = %v, want 10ns", s.Now())
	}
	if n := s.RunUntil(100); n != 1 || s.Now() != 100 {
		t.Fatalf("RunUntil(100) delivered %d, Now %v; want 1, 100ns", n, s.Now())
	}
	if s.Step() {
		t.Fatal("Step on an empty queue delivered an event")
	}
}

func TestRunForAndStop(t *testing.T) {
	s := New(1)
	var count int
	var self Handler
	self = HandlerFunc(func(s *Sim, ev Event) {
		count++
		if count == 7 {
			s.Stop()
		}
		s.After(3, self, 0, 0)
	})
	s.After(0, self, 0, 0)
	if n := s.RunFor(5); n != 5 || count != 5 {
		t.Fatalf("RunFor(5) delivered %d (count %d), want 5", n, count)
	}
	if n := s.Run(); n != 2 || count != 7 {
		t.Fatalf("Run after Stop at 7 delivered %d (count %d), want 2", n, count)
	}
	if s.Now() != 18 {
		t.Fatalf("Now = %v, want 18ns (7th event)", s.Now())
	}
	if s.Events() != 7 {
		t.Fatalf("Events = %d, want 7", s.Events())
	}
}

func TestSchedulePanics(t *testing.T) {
	for name, f := range map[string]func(s *Sim){
		"past":        func(s *Sim) { s.At(1, &recorder{}, 0, 0) },
		"nil handler": func(s *Sim) { s.Schedule(Event{At: 20}) },
		"negative":    func(s *Sim) { s.After(-1, &recorder{}, 0, 0) },
		"until past":  func(s *Sim) { s.RunUntil(5) },
		"timer past":  func(s *Sim) { s.NewTimer(&recorder{}, 0, 0).Reset(3) },
	} {
		t.Run(name, func(t *testing.T) {
			s := New(1)
			s.RunUntil(10)
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(s)
		})
	}
}

// chatter is a deterministic workload: each event reschedules itself after
// a random delay and sometimes spawns another, all drawn from Sim.Rand.
type chatter struct{ spawned int }

func (c *chatter) Handle(s *Sim, ev Event) {
	r := s.Rand()
	s.After(Time(r.IntN(100)), c, ev.Kind, ev.Arg+1)
	if c.spawned < 200 && r.IntN(4) == 0 {
		c.spawned++
		s.After(Time(r.IntN(50)), c, ev.Kind+1, 0)
	}
}

func (c *chatter) KindName(k int32) string { return fmt.Sprintf("flow%d", k) }

func traceRun(seed uint64) []byte {
	var buf bytes.Buffer
	s := New(seed)
	s.SetTrace(WriterTrace(&buf))
	s.At(0, &chatter{}, 0, 0)
	s.RunUntil(2 * Microsecond)
	return buf.Bytes()
}

func TestDeterministicTrace(t *testing.T) {
	a, b := traceRun(42), traceRun(42)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed produced different traces")
	}
	if bytes.Equal(a, traceRun(43)) {
		t.Fatal("different seeds produced identical traces")
	}
	if !bytes.HasPrefix(a, []byte("#1 0ns *sim.chatter kind=flow0 arg=0\n")) {
		t.Fatalf("unexpected first trace line: %q", a[:min(len(a), 60)])
	}
}

func TestScheduleDoesNotAllocate(t *testing.T) {
	s := New(1)
	noop := HandlerFunc(func(*Sim, Event) {})
	// Grow the slices to their peak first.
	for i := range 1024 {
		s.At(Time(i), noop, 0, 0)
	}
	s.Run()
	allocs := testing.AllocsPerRun(100, func() {
		for i := range 1024 {
			s.After(Time(i%37), noop, 1, uint64(i))
		}
		s.Run()
	})
	if allocs != 0 {
		t.Fatalf("schedule+run allocated %.1f times per 1024 events, want 0", allocs)
	}
}
