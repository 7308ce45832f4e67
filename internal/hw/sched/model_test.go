package sched

import (
	"math/rand/v2"
	"testing"
)

// modelQueue is the reference model's view of one queue.
type modelQueue struct {
	ready, serving, rung, dropped bool
	level                         int
}

// TestAgainstModel drives random Ring, Next, Done, Remove and SetQueue calls
// (several queues in service at once, as a pipelined engine would have) and
// checks every answer against a plain model of readiness and strict
// priority, and the ready lists' integrity after every call.
func TestAgainstModel(t *testing.T) {
	const n, levels = 24, 3
	for _, mode := range []Mode{WRR, DWRR} {
		for seed := range uint64(20) {
			a := mustNew(t, Config{Levels: levels, Mode: mode, Quantum: 1500, BurstLimit: 3})
			rng := rand.New(rand.NewPCG(seed, 99))
			m := make([]modelQueue, n)
			for step := range 3000 {
				q := uint32(rng.IntN(n))
				mq := &m[q]
				switch op := rng.IntN(10); {
				case op < 3:
					a.Ring(q)
					if mq.serving {
						mq.rung = true
					} else {
						mq.ready = true
					}
				case op < 6:
					got, _, ok := a.Next()
					top, found := levels, false
					for i := range m {
						if m[i].ready {
							top, found = min(top, m[i].level), true
						}
					}
					if ok != found || ok && (!m[got].ready || m[got].level != top) {
						t.Fatalf("%v seed %d step %d: Next() = %d, %v; model ready at level %d: %v", mode, seed, step, got, ok, top, found)
					}
					if ok {
						m[got] = modelQueue{serving: true, level: m[got].level}
					}
				case op < 8:
					if !mq.serving {
						continue
					}
					more := rng.IntN(2) == 0
					a.Done(q, rng.IntN(4), rng.IntN(5000), more)
					mq.ready = mq.rung || more && !mq.dropped
					mq.serving, mq.rung, mq.dropped = false, false, false
				case op < 9:
					a.Remove(q)
					mq.ready, mq.rung, mq.dropped = false, false, mq.serving
				default:
					l := rng.IntN(levels)
					if err := a.SetQueue(q, l, 1+rng.IntN(5)); err != nil {
						t.Fatal(err)
					}
					mq.level = l
				}
				checkInvariants(t, a)
				want := 0
				for i := range m {
					if m[i].ready {
						want++
					}
				}
				if a.Ready() != want {
					t.Fatalf("%v seed %d step %d: Ready() = %d, model %d", mode, seed, step, a.Ready(), want)
				}
			}
		}
	}
}
