package timing

import (
	"math/rand/v2"
	"testing"

	"github.com/rnic/rnic/sim"
)

func TestFIFO(t *testing.T) {
	var f FIFO
	for _, tc := range []struct{ arrival, service, start, finish sim.Time }{
		{0, 10, 0, 10},
		{5, 10, 10, 20}, // waits 5
		{30, 5, 30, 35}, // idle gap
		{30, 0, 35, 35},
	} {
		start, finish := f.Serve(tc.arrival, tc.service)
		if start != tc.start || finish != tc.finish {
			t.Fatalf("Serve(%v, %v) = %v, %v; want %v, %v", tc.arrival, tc.service, start, finish, tc.start, tc.finish)
		}
	}
	st := f.Stats()
	if st.Jobs != 4 || st.Busy != 25 || st.Wait != 10 || st.MaxWait != 5 {
		t.Fatalf("stats %+v", st)
	}
	if u := st.Utilization(50); u != 0.5 {
		t.Fatalf("utilization over 50ns = %v, want 0.5", u)
	}
	if f.Backlog(31) != 4 || f.Backlog(100) != 0 {
		t.Fatalf("backlog %v %v", f.Backlog(31), f.Backlog(100))
	}
	if f.Waits().Count() != 4 || f.Waits().Max() != 5 {
		t.Fatal("wait histogram does not match")
	}
	// An arrival before one already queued waits behind it, and is
	// counted.
	if start, _ := f.Serve(29, 1); start != 35 || f.Stats().OutOfOrder != 1 {
		t.Fatalf("out-of-order arrival started at %v (OutOfOrder %d), want 35ns, 1", start, f.Stats().OutOfOrder)
	}
}

func TestPool(t *testing.T) {
	p := NewPool(2)
	for _, tc := range []struct {
		arrival, service sim.Time
		server           int
		start, finish    sim.Time
	}{
		{0, 10, 0, 0, 10},
		{0, 10, 1, 0, 10},
		{5, 10, 0, 10, 20}, // both busy: lowest index wins the tie at 10
		{12, 1, 1, 12, 13},
	} {
		s, start, finish := p.Serve(tc.arrival, tc.service)
		if s != tc.server || start != tc.start || finish != tc.finish {
			t.Fatalf("Serve(%v, %v) = %d %v %v; want %d %v %v", tc.arrival, tc.service, s, start, finish, tc.server, tc.start, tc.finish)
		}
	}
	if st := p.Stats(); st.Jobs != 4 || st.Busy != 31 || st.Wait != 5 {
		t.Fatalf("pool stats %+v", st)
	}
	if st := p.Server(1); st.Jobs != 2 || st.Busy != 11 {
		t.Fatalf("server 1 stats %+v", st)
	}
}

func TestHistogram(t *testing.T) {
	var h Histogram
	for v := range int64(1000) {
		h.Add(v)
	}
	if h.Count() != 1000 || h.Max() != 999 || h.Mean() != 499.5 {
		t.Fatalf("count %d max %d mean %v", h.Count(), h.Max(), h.Mean())
	}
	for _, tc := range []struct {
		q      float64
		lo, hi int64 // the bound must be >= the true quantile and within 12.5%
	}{
		{0, 0, 0},
		{0.5, 500, 563},
		{0.99, 990, 1114},
		{1, 999, 999},
	} {
		if got := h.Quantile(tc.q); got < tc.lo || got > tc.hi {
			t.Errorf("Quantile(%v) = %d, want in [%d, %d]", tc.q, got, tc.lo, tc.hi)
		}
	}
	for _, sb := range []uint{3, 7} {
		for b := range (63-int(sb)+1)<<sb - 1 {
			if histBucket(histUpper(b, sb), sb) != b || histBucket(histUpper(b, sb)+1, sb) != b+1 {
				t.Fatalf("bits %d, bucket %d: upper bound %d maps to %d", sb, b, histUpper(b, sb), histBucket(histUpper(b, sb), sb))
			}
		}
	}
	// Bits 7: within 1/128.
	fine := Histogram{Bits: 7}
	for v := range int64(100000) {
		fine.Add(v)
	}
	if got := fine.Quantile(0.5); got < 50000 || got > 50000+50000/128 {
		t.Errorf("Bits 7: median bound %d, want within 1/128 above 50000", got)
	}
	fine.Reset()
	fine.Add(7)
	if fine.Count() != 1 || fine.Quantile(0.5) != 7 {
		t.Errorf("after Reset: count %d, median %d", fine.Count(), fine.Quantile(0.5))
	}
}

func TestPoolNextFree(t *testing.T) {
	p := NewPool(3)
	if _, ok := p.NextFree(0); ok {
		t.Fatalf("an idle pool has a next free time")
	}
	p.ServeOn(0, 0, 100) // free at 100
	p.ServeOn(2, 0, 40)  // free at 40
	for _, tc := range []struct {
		at   sim.Time
		want sim.Time
		ok   bool
	}{{0, 40, true}, {39, 40, true}, {40, 100, true}, {99, 100, true}, {100, 0, false}} {
		got, ok := p.NextFree(tc.at)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("NextFree(%v) = %v, %v; want %v, %v", tc.at, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPoolMatchesScan: the pool's ring gives the choice a scan of every
// server gives (the lowest-numbered server free at the arrival, else the
// one free first, the lowest-numbered on a tie), and NextFree its answer,
// over seeded random arrivals and service times with many ties: busy and
// idle pools, zero service times, arrivals out of order.
func TestPoolMatchesScan(t *testing.T) {
	scan := func(free []sim.Time, arrival sim.Time) (int, sim.Time) {
		server, start := 0, sim.Never
		for i, f := range free {
			if s := max(arrival, f); s < start {
				server, start = i, s
			}
		}
		return server, start
	}
	rng := rand.New(rand.NewPCG(28, 29))
	for _, n := range []int{1, 2, 3, 5, 16} {
		p := NewPool(n)
		free := make([]sim.Time, n)
		now := sim.Time(0)
		for step := range 20000 {
			now += sim.Time(rng.IntN(4))
			arrival := now
			if rng.IntN(10) == 0 {
				arrival -= sim.Time(rng.IntN(8)) // out of order
			}
			ws, wstart := scan(free, arrival)
			gs, gstart := p.Earliest(arrival)
			if gs != ws || gstart != wstart {
				t.Fatalf("%d servers, step %d: Earliest(%v) = %d %v, scan %d %v (free %v)", n, step, arrival, gs, gstart, ws, wstart, free)
			}
			probe := now + sim.Time(rng.IntN(6)) - 3
			wnext, wok := sim.Never, false
			for _, f := range free {
				if f > probe && f < wnext {
					wnext, wok = f, true
				}
			}
			if gnext, gok := p.NextFree(probe); gok != wok || gnext != wnext {
				t.Fatalf("%d servers, step %d: NextFree(%v) = %v %v, scan %v %v (free %v)", n, step, probe, gnext, gok, wnext, wok, free)
			}
			server := gs
			if rng.IntN(5) == 0 {
				server = rng.IntN(n) // a caller's own choice (ServeOn)
			}
			service := sim.Time(rng.IntN(12)) // 0 too: the free time may not move
			start, finish := p.ServeOn(server, arrival, service)
			if ws := max(arrival, free[server]); start != ws || finish != ws+service {
				t.Fatalf("%d servers, step %d: ServeOn(%d, %v, %v) = %v %v, want %v %v", n, step, server, arrival, service, start, finish, ws, ws+service)
			}
			free[server] = finish
		}
	}
}
