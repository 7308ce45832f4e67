package sim

import (
	"strconv"
	"testing"
)

// pingpong keeps a fixed number of events in flight; each event schedules
// its successor at a pseudo-random delay, as a NIC model's components do.
type pingpong struct{ x uint64 }

func (p *pingpong) Handle(s *Sim, ev Event) {
	p.x = p.x*6364136223846793005 + 1442695040888963407
	s.After(Time(1+p.x>>54), p, ev.Kind, ev.Arg)
}

// BenchmarkEngine measures the bare engine: one schedule and one delivery
// per iteration, with 1024 events pending (the heap depth of a few hundred
// QPs' worth of NIC pipelines and in-flight packets).
func BenchmarkEngine(b *testing.B) {
	for _, pending := range []int{16, 1024, 65536} {
		b.Run(strconv.Itoa(pending), func(b *testing.B) {
			s := New(1)
			p := &pingpong{}
			for i := range pending {
				s.At(Time(i), p, 0, uint64(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			s.RunFor(uint64(b.N))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTimerMove measures moving a retransmission deadline later, the
// protocol engine's most frequent timer operation.
func BenchmarkTimerMove(b *testing.B) {
	s := New(1)
	tm := s.NewTimer(HandlerFunc(func(*Sim, Event) {}), 0, 0)
	b.ReportAllocs()
	for i := range b.N {
		tm.Reset(Time(1000 + i))
	}
}
