package sched

import (
	"fmt"
	"testing"
)

// TestSteadyStateAllocs: once the queue table holds every index used,
// Ring, Next, Done and Remove allocate nothing.
func TestSteadyStateAllocs(t *testing.T) {
	for _, cfg := range []Config{
		{Levels: 8, Mode: DWRR, Quantum: 4096, BurstLimit: 16, Queues: 1024},
		{Levels: 8, Mode: WRR, BurstLimit: 16, Queues: 1024},
	} {
		t.Run(cfg.Mode.String(), func(t *testing.T) {
			a := mustNew(t, cfg)
			for q := range uint32(1024) {
				if err := a.SetQueue(q, int(q%8), 1+int(q%4)); err != nil {
					t.Fatal(err)
				}
			}
			i := uint32(0)
			allocs := testing.AllocsPerRun(1000, func() {
				i++
				a.Ring(i % 1024)
				a.Ring((i * 7) % 1024)
				q, _, ok := a.Next()
				if !ok {
					panic("nothing ready")
				}
				a.Ring(q) // ring during service
				a.Done(q, 3, 3000, i%3 != 0)
				if i%5 == 0 {
					a.Remove((i * 13) % 1024)
				}
			})
			if allocs != 0 {
				t.Fatalf("%.1f allocations per Ring/Next/Done, want 0", allocs)
			}
		})
	}
}

// BenchmarkNextDone measures one turn (Next then Done with more work) with
// n always-backlogged queues of mixed weights at one level of eight.
func BenchmarkNextDone(b *testing.B) {
	for _, mode := range []Mode{WRR, DWRR} {
		for _, n := range []int{1, 64, 16384} {
			b.Run(fmt.Sprintf("%v/ready=%d", mode, n), func(b *testing.B) {
				a := mustNew(b, Config{Levels: 8, Mode: mode, Quantum: 4096, BurstLimit: 16, Queues: n})
				for q := range uint32(n) {
					if err := a.SetQueue(q, 3, 1+int(q%4)); err != nil {
						b.Fatal(err)
					}
					a.Ring(q)
				}
				b.ReportAllocs()
				for b.Loop() {
					q, g, _ := a.Next()
					a.Done(q, min(g.Packets, 4), 4*1024, true)
				}
			})
		}
	}
}

// BenchmarkRing measures a doorbell to an idle queue plus the turn that
// serves it, the path of a latency-bound QP.
func BenchmarkRing(b *testing.B) {
	a := mustNew(b, Config{Levels: 8, Mode: DWRR, Quantum: 4096, Queues: 1})
	b.ReportAllocs()
	for b.Loop() {
		a.Ring(0)
		q, _, _ := a.Next()
		a.Done(q, 1, 64, false)
	}
}
