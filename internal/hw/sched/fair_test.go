package sched

import (
	"math"
	"testing"
)

// TestFairness runs always-backlogged queues for many turns and checks that
// each queue's share (of bytes in DWRR, of packets in WRR) is within 5 % of
// its weight's share.
func TestFairness(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		weights []int
		sizes   [][2]int // packet sizes per queue: uniform in [lo, hi]
	}{
		{"DWRR weights 1-4, varied sizes", Config{Mode: DWRR, Quantum: 4096, BurstLimit: 4},
			[]int{1, 2, 3, 4}, [][2]int{{64, 4096}, {1024, 4096}, {64, 512}, {256, 2048}}},
		{"DWRR weights 1-4, burst 16", Config{Mode: DWRR, Quantum: 4096, BurstLimit: 16},
			[]int{1, 2, 3, 4}, [][2]int{{4096, 4096}, {64, 64}, {1500, 1500}, {64, 4096}}},
		{"DWRR weights 1-4, quantum below packet size", Config{Mode: DWRR, Quantum: 512, BurstLimit: 8},
			[]int{1, 2, 3, 4}, [][2]int{{1024, 4096}, {2048, 4096}, {64, 4096}, {4096, 4096}}},
		{"DWRR equal weights, very different sizes", Config{Mode: DWRR, Quantum: 4096, BurstLimit: 16},
			[]int{1, 1, 1, 1}, [][2]int{{64, 64}, {4096, 4096}, {256, 300}, {1500, 1500}}},
		{"DWRR equal weights, tiny burst", Config{Mode: DWRR, Quantum: 8192, BurstLimit: 1},
			[]int{1, 1, 1}, [][2]int{{64, 64}, {4096, 4096}, {64, 4096}}},
		{"WRR weights 1-4, varied sizes", Config{Mode: WRR, BurstLimit: 4},
			[]int{1, 2, 3, 4}, [][2]int{{64, 4096}, {1024, 4096}, {64, 512}, {256, 2048}}},
		{"WRR weights 1-4, burst 1", Config{Mode: WRR, BurstLimit: 1},
			[]int{1, 2, 3, 4}, [][2]int{{64, 64}, {64, 64}, {64, 64}, {64, 64}}},
		{"WRR weights 8 and 1", Config{Mode: WRR, BurstLimit: 16},
			[]int{8, 1}, [][2]int{{64, 4096}, {64, 4096}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := runShares(t, tt.cfg, tt.weights, tt.sizes, 20000)
			for q := range got {
				if math.Abs(got[q]-want[q]) > 0.05*want[q] {
					t.Errorf("queue %d (weight %d): share %.4f, want %.4f ± 5%%", q, tt.weights[q], got[q], want[q])
				}
			}
		})
	}
}

// TestFairnessCheckDetectsWRRBytes shows the fairness check has teeth: WRR
// counts packets, so equal weights with unequal packet sizes must give
// unequal byte shares, which DWRR corrects.
func TestFairnessCheckDetectsWRRBytes(t *testing.T) {
	sizes := [][2]int{{64, 64}, {4096, 4096}}
	a := mustNew(t, Config{Levels: 1, Mode: WRR, BurstLimit: 16})
	e := newEngine(a, len(sizes), 64)
	for q, s := range sizes {
		e.lo[q], e.hi[q] = s[0], s[1]
		a.Ring(uint32(q))
	}
	for range 1000 {
		e.turn(t)
	}
	if b := shares(e.bytes); b[0] > 0.05 {
		t.Fatalf("WRR byte share of the 64 B queue = %.4f; want far below fair (0.5)", b[0])
	}
	if p := shares(e.pkts); math.Abs(p[0]-0.5) > 0.025 {
		t.Fatalf("WRR packet share = %.4f, want 0.5", p[0])
	}
}

// runShares serves always-backlogged queues for turns turns and returns the
// measured shares (bytes in DWRR, packets in WRR) and the weight shares.
func runShares(t *testing.T, cfg Config, weights []int, sizes [][2]int, turns int) (got, want []float64) {
	t.Helper()
	cfg.Levels = 1
	a := mustNew(t, cfg)
	e := newEngine(a, len(weights), 64)
	sum := 0
	for _, w := range weights {
		sum += w
	}
	for q, w := range weights {
		if err := a.SetQueue(uint32(q), 0, w); err != nil {
			t.Fatal(err)
		}
		e.lo[q], e.hi[q] = sizes[q][0], sizes[q][1]
		a.Ring(uint32(q))
		want = append(want, float64(w)/float64(sum))
	}
	for range turns {
		if _, g, _, ok := e.turn(t); !ok || g.Packets > a.cfg.BurstLimit {
			t.Fatalf("turn: grant %+v, ok %v; want a grant within the burst limit", g, ok)
		}
	}
	if cfg.Mode == DWRR {
		return shares(e.bytes), want
	}
	return shares(e.pkts), want
}

// TestFlappingQueueKeepsItsShare: a queue that empties every turn and is
// rung again at once must not gain service by rejoining: against a
// backlogged queue of weight 4, a weight-1 queue gets a fifth of the bytes.
func TestFlappingQueueKeepsItsShare(t *testing.T) {
	a := mustNew(t, Config{Levels: 1, Mode: DWRR, Quantum: 4096, BurstLimit: 4})
	e := newEngine(a, 2, 1024)
	if err := a.SetQueue(0, 0, 4); err != nil {
		t.Fatal(err)
	}
	a.Ring(0)
	a.Ring(1)
	e.backlog[1] = 4 // one 4 KiB message
	for range 10000 {
		if q, _, _, _ := e.turn(t); q == 1 {
			e.backlog[1] = 4 // the host posts the next message right away
			a.Ring(1)
		}
	}
	if got := shares(e.bytes)[1]; math.Abs(got-0.2) > 0.05*0.2 {
		t.Fatalf("flapping queue's byte share = %.4f, want 0.2 ± 5%%", got)
	}
}
