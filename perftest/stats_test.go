package perftest

import (
	"math"
	"testing"
)

// TestComputeBW works perftest's print_report_bw through by hand: 8
// messages of 1 MiB posted 100 ns apart, one completion every 4.
func TestComputeBW(t *testing.T) {
	const size = 1 << 20
	tposted := []int64{0, 100, 200, 300, 400, 500, 600, 700}
	tcompleted := make([]int64, 8)
	tcompleted[3], tcompleted[7] = 1000, 2000
	tests := []struct {
		name   string
		noPeak bool
		gbits  bool
		peak   float64 // the best (tcompleted[j]-tposted[i])/(j-i+1) is 250 ns
		avg    float64 // 8 MiB in 2000 ns
	}{
		{"MB/s", false, false, 1e9 / 250, 8 * 1e9 / 2000},
		{"Gb/s", false, true, size * 1e9 / (250 * 125e6), 8 * size * 1e9 / (2000 * 125e6)},
		{"no peak", true, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := computeBW(size, 8, tposted, tcompleted, tt.noPeak, 4, 1, tt.gbits)
			if tt.noPeak {
				// Only tposted[0] and tcompleted[0] count: here an empty run.
				if r.BWPeak != 0 || r.BWAvg != 0 {
					t.Errorf("no-peak report %+v", r)
				}
				return
			}
			if !near(r.BWPeak, tt.peak) || !near(r.BWAvg, tt.avg) || !near(r.MsgRate, 8*1e9/(2000*1e6)) {
				t.Errorf("got %+v, want peak %v avg %v", r, tt.peak, tt.avg)
			}
			if r.Size != size || r.Iters != 8 {
				t.Errorf("size/iters %d/%d", r.Size, r.Iters)
			}
		})
	}
}

// TestComputeBWLastSignaled covers n not a multiple of the CQ moderation:
// the last message is signaled too.
func TestComputeBWLastSignaled(t *testing.T) {
	tposted := []int64{0, 10, 20, 30, 40}
	tcompleted := []int64{0, 0, 0, 400, 100} // completion of 0..3 late, of 4 early
	r := computeBW(1<<20, 5, tposted, tcompleted, false, 4, 1, false)
	// Best: i=0, j=4: (100-0)/5 = 20 ns.
	if want := 1e9 / 20.0; !near(r.BWPeak, want) {
		t.Errorf("peak %v, want %v", r.BWPeak, want)
	}
}

// TestComputeLat works print_report_lat through by hand for 8 iterations:
// 7 gaps, the 2 slowest left out.
func TestComputeLat(t *testing.T) {
	gaps := []int64{4000, 2000, 10000, 6000, 2000, 50000, 8000} // ns
	tposted := []int64{0}
	for _, g := range gaps {
		tposted = append(tposted, tposted[len(tposted)-1]+g)
	}
	// Sorted: 2000 2000 4000 6000 8000 | 10000 50000; measure = 5.
	// rtt 2: µs = ns / 2000.
	r := computeLat(64, 8, tposted, 2)
	want := LatReport{Size: 64, Iters: 8, Min: 1, Max: 5, Typical: 2, Avg: 2.2, P99: 5, P999: 5}
	// stdev: int(2.2-d) for d in 1 1 2 3 4 → 1 1 0 0 -1; squares 1 1 0 0 1 → sqrt(3/5).
	want.Stdev = math.Sqrt(3.0 / 5)
	if !latNear(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	// An even number of samples takes the mean of the middle two:
	// 7 iterations → 6 gaps → 4 measured, median of 2000 2000 4000 6000.
	r = computeLat(64, 7, tposted[:7], 1)
	if r.Typical != 3 {
		t.Errorf("median of an even count = %v, want 3", r.Typical)
	}
}

// TestComputeLatDuration checks -D's average and rate.
func TestComputeLatDuration(t *testing.T) {
	r := computeLatDuration(2, 1000, 20e6, 2) // 1000 round trips in 20 ms
	if !near(r.Avg, 10) || !near(r.TPS, 50000) || !r.Duration {
		t.Errorf("got %+v", r)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func latNear(a, b LatReport) bool {
	return a.Size == b.Size && a.Iters == b.Iters && near(a.Min, b.Min) && near(a.Max, b.Max) &&
		near(a.Typical, b.Typical) && near(a.Avg, b.Avg) && near(a.Stdev, b.Stdev) && near(a.P99, b.P99) && near(a.P999, b.P999)
}
