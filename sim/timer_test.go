package sim

import (
	"fmt"
	"testing"
)

func TestTimerMoves(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(s *Sim, tm *Timer)
		want []string // "time:arg" of fired events
	}{
		{"fires once", func(s *Sim, tm *Timer) { tm.Reset(10) }, []string{"10:7"}},
		{"moved later", func(s *Sim, tm *Timer) { tm.Reset(10); tm.Reset(25) }, []string{"25:7"}},
		{"moved earlier", func(s *Sim, tm *Timer) { tm.Reset(25); tm.Reset(10) }, []string{"10:7"}},
		{"stopped", func(s *Sim, tm *Timer) { tm.Reset(10); tm.Stop() }, nil},
		{"stopped and rearmed", func(s *Sim, tm *Timer) { tm.Reset(10); tm.Stop(); tm.Reset(30) }, []string{"30:7"}},
		{"rearmed earlier after stop", func(s *Sim, tm *Timer) { tm.Reset(30); tm.Stop(); tm.Reset(5) }, []string{"5:7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(1)
			var got []string
			tm := s.NewTimer(HandlerFunc(func(s *Sim, ev Event) {
				got = append(got, fmt.Sprintf("%d:%d", ev.At, ev.Arg))
			}), 0, 7)
			tc.ops(s, tm)
			s.Run()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("fired %v, want %v", got, tc.want)
			}
			if _, armed := tm.Deadline(); armed {
				t.Fatal("timer still armed after the run")
			}
			if s.Pending() != 0 {
				t.Fatalf("%d entries left in the queue", s.Pending())
			}
		})
	}
}

// timerModel checks timers against a naive model: each timer has a
// deadline or none; it must fire exactly at its deadline, and never when
// stopped or moved. A driver event at every tick makes random moves.
type timerModel struct {
	t        *testing.T
	timers   []*Timer
	deadline []Time // 0: disarmed (the test never arms at 0)
	fired    int
}

const (
	kindDrive int32 = iota
	kindFire
)

func (m *timerModel) Handle(s *Sim, ev Event) {
	switch ev.Kind {
	case kindFire:
		i := ev.Arg
		if m.deadline[i] != s.Now() {
			m.t.Fatalf("timer %d fired at %v, model deadline %v", i, s.Now(), m.deadline[i])
		}
		m.deadline[i] = 0
		m.fired++
	case kindDrive:
		for i, d := range m.deadline {
			if d != 0 && d < s.Now() {
				m.t.Fatalf("timer %d missed its deadline %v (now %v)", i, d, s.Now())
			}
		}
		r := s.Rand()
		for range 8 {
			i := r.IntN(len(m.timers))
			switch r.IntN(10) {
			case 0:
				m.timers[i].Stop()
				m.deadline[i] = 0
			default: // moves dominate, as with retransmission timers
				at := s.Now() + 1 + Time(r.IntN(200))
				m.timers[i].Reset(at)
				m.deadline[i] = at
			}
		}
		if s.Now() < 20000 {
			s.After(1+Time(r.IntN(3)), m, kindDrive, 0)
		}
	}
}

func TestTimerDifferential(t *testing.T) {
	s := New(99)
	m := &timerModel{t: t}
	for i := range 64 {
		m.timers = append(m.timers, s.NewTimer(m, kindFire, uint64(i)))
		m.deadline = append(m.deadline, 0)
	}
	s.At(1, m, kindDrive, 0)
	s.Run()
	for i, d := range m.deadline {
		if d != 0 {
			t.Fatalf("timer %d never fired (deadline %v)", i, d)
		}
	}
	if m.fired == 0 {
		t.Fatal("no timer fired")
	}
	// 64 timers: the queue holds at most one live entry each, plus stale
	// entries below the compaction bound.
	if s.Pending() != 0 {
		t.Fatalf("%d entries left after the run", s.Pending())
	}
}

func TestTimerStaleEntriesBounded(t *testing.T) {
	s := New(1)
	tm := s.NewTimer(HandlerFunc(func(*Sim, Event) {}), 0, 0)
	// Moving a deadline earlier every time leaves a stale entry each time;
	// compaction must keep the queue small.
	for i := range 100000 {
		tm.Reset(Time(1_000_000 - i))
	}
	if s.Pending() > 2*compactMin+1 {
		t.Fatalf("queue holds %d entries for one timer", s.Pending())
	}
	s.Run()
	if s.Events() != 1 {
		t.Fatalf("timer fired %d times, want 1", s.Events())
	}
}

func TestTimerResetDoesNotAllocate(t *testing.T) {
	s := New(1)
	tm := s.NewTimer(HandlerFunc(func(*Sim, Event) {}), 0, 0)
	tm.Reset(10)
	s.Run()
	allocs := testing.AllocsPerRun(100, func() {
		for i := range 100 {
			tm.ResetAfter(Time(100 + i)) // later: free
		}
		tm.ResetAfter(1) // earlier: one push
		s.Run()
	})
	if allocs != 0 {
		t.Fatalf("timer moves allocated %.1f times, want 0", allocs)
	}
}
