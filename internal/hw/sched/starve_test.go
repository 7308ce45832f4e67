package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestEveryQueueServedEachRound: 4096 always-backlogged queues of equal
// weight, whose round credit fits one turn; every window of 4096 grants
// (one round) must serve every queue exactly once.
func TestEveryQueueServedEachRound(t *testing.T) {
	const n = 4096
	for _, cfg := range []Config{
		{Levels: 1, Mode: DWRR, Quantum: 4096, BurstLimit: 16, Queues: n},
		{Levels: 1, Mode: WRR, BurstLimit: 16, Queues: n},
	} {
		t.Run(cfg.Mode.String(), func(t *testing.T) {
			a := mustNew(t, cfg)
			e := newEngine(a, n, 4096)
			for q := range uint32(n) {
				a.Ring(q)
			}
			for round := range 3 {
				seen := make([]bool, n)
				for range n {
					q, _, _, ok := e.turn(t)
					if !ok || seen[q] {
						t.Fatalf("round %d: queue %d served twice (ok %v) before every queue was served once", round, q, ok)
					}
					seen[q] = true
				}
			}
			if st := a.Stats(); st.Rounds != 3 || st.Grants != 3*n || st.Doorbells != n {
				t.Fatalf("Rounds, Grants, Doorbells = %d, %d, %d; want 3, %d, %d", st.Rounds, st.Grants, st.Doorbells, 3*n, n)
			}
		})
	}
}

// TestNewcomerWaitsAtMostOneRound: a queue rung while others are backlogged
// is served before any of them gets two more turns, whatever the weights,
// burst limit and packet sizes (the DRR latency bound).
func TestNewcomerWaitsAtMostOneRound(t *testing.T) {
	const n = 64
	a := mustNew(t, Config{Levels: 1, Mode: DWRR, Quantum: 4096, BurstLimit: 16})
	e := newEngine(a, n+1, 1024)
	for q := range uint32(n) {
		e.lo[q], e.hi[q] = 64, 4096
		a.Ring(q)
	}
	for i := range 1000 {
		e.turn(t)
		if i%97 != 0 {
			continue
		}
		a.Ring(n) // the newcomer, endless backlog of 1024 B packets
		turns := make([]int, n)
		for {
			q, _, _, _ := e.turn(t)
			if q == n {
				break
			}
			if turns[q]++; turns[q] > 1 {
				t.Fatalf("queue %d served twice after the newcomer's doorbell", q)
			}
		}
		a.Remove(n)
	}
}

// TestStrictPriority: queues at four levels with finite backlogs and
// random new work rung during the run. Every grant must go to the highest
// level that has work: never a lower level while a higher one has work,
// and a lower level as soon as the higher ones drain.
func TestStrictPriority(t *testing.T) {
	const levels, perLevel = 4, 8
	for _, cfg := range []Config{
		{Levels: levels, Mode: DWRR, Quantum: 2048, BurstLimit: 4},
		{Levels: levels, Mode: WRR, BurstLimit: 4},
	} {
		t.Run(cfg.Mode.String(), func(t *testing.T) {
			a := mustNew(t, cfg)
			e := newEngine(a, levels*perLevel, 1024)
			rng := rand.New(rand.NewPCG(3, 4))
			levelOf := func(q uint32) int { return int(q) / perLevel }
			for q := range uint32(levels * perLevel) {
				if err := a.SetQueue(q, levelOf(q), 1+int(q)%3); err != nil {
					t.Fatal(err)
				}
				e.lo[q], e.hi[q], e.backlog[q] = 64, 4096, 1+rng.IntN(40)
				a.Ring(q)
			}
			served := make([]int, levels)
			for i := 0; ; i++ {
				if i%5 == 0 && i < 2000 { // new work, often for a higher level
					q := uint32(rng.IntN(levels * perLevel))
					e.backlog[q] += 1 + rng.IntN(10)
					a.Ring(q)
				}
				top := levels // highest level with work
				for q := range uint32(levels * perLevel) {
					if e.backlog[q] != 0 {
						top = min(top, levelOf(q))
					}
				}
				q, _, _, ok := e.turn(t)
				if !ok {
					if top != levels {
						t.Fatalf("grant %d: nothing granted, but level %d has work", i, top)
					}
					break
				}
				if levelOf(q) != top {
					t.Fatalf("grant %d: served level %d (queue %d) while level %d has work", i, levelOf(q), q, top)
				}
				served[levelOf(q)]++
			}
			for l, n := range served {
				if n == 0 {
					t.Fatalf("level %d never served", l)
				}
				if got := a.Stats().LevelGrants[l]; got != uint64(n) {
					t.Fatalf("LevelGrants[%d] = %d, want %d", l, got, n)
				}
			}
		})
	}
}

// TestBurstLimit: two queues with huge backlogs and a round credit of many
// bursts each. No grant exceeds BurstLimit packets, and the bursts
// interleave: neither queue holds the engine for two turns in a row.
func TestBurstLimit(t *testing.T) {
	tests := []struct {
		cfg    Config
		weight int
	}{
		{Config{Levels: 1, Mode: DWRR, Quantum: MaxQuantum, BurstLimit: 16}, 4}, // 4096 packets a round
		{Config{Levels: 1, Mode: WRR, BurstLimit: 16}, MaxWeight},
		{Config{Levels: 1, Mode: WRR, BurstLimit: 1}, MaxWeight},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/burst=%d", tt.cfg.Mode, tt.cfg.BurstLimit), func(t *testing.T) {
			a := mustNew(t, tt.cfg)
			e := newEngine(a, 2, 64)
			for q := range uint32(2) {
				if err := a.SetQueue(q, 0, tt.weight); err != nil {
					t.Fatal(err)
				}
				a.Ring(q)
			}
			last := uint32(2)
			for i := range 5000 {
				q, g, sent, _ := e.turn(t)
				if g.Packets > tt.cfg.BurstLimit || sent > tt.cfg.BurstLimit {
					t.Fatalf("grant %d: %+v, sent %d; burst limit %d", i, g, sent, tt.cfg.BurstLimit)
				}
				if q == last {
					t.Fatalf("grant %d: queue %d got two turns in a row", i, q)
				}
				last = q
			}
		})
	}
}
