package experiment

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rnic/rnic/sim/perf"
	"github.com/rnic/rnic/sim/profile"
)

// Options control how a sweep runs.
type Options struct {
	// Jobs is the number of runs at once (default 1). Runs are
	// independent and deterministic, so rows do not depend on it.
	Jobs int
	// Progress, if set, gets one line per finished run.
	Progress io.Writer
}

// Run runs every point of the sweep and returns their rows in the sweep's
// order. A run that fails has its error in its row; Run itself fails only
// if the sweep is invalid (a profile does not load) or ctx ends, and then
// returns the rows finished so far, still in order.
func Run(ctx context.Context, sw *Sweep, opt Options) ([]Row, error) {
	points, err := sw.Points()
	if err != nil {
		return nil, err
	}
	profs, err := sw.LoadProfiles(points)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, len(points))
	done := make([]bool, len(points))
	var mu sync.Mutex // guards done, finished and Progress
	finished := 0
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(opt.Jobs, 1), len(points)) {
		wg.Go(func() {
			for i := range work {
				row := runOne(points[i], profs[i])
				mu.Lock()
				rows[i], done[i] = row, true
				finished++
				if opt.Progress != nil {
					fmt.Fprintf(opt.Progress, "[%d/%d] %s\n", finished, len(points), row.summary())
				}
				mu.Unlock()
			}
		})
	}
	err = feed(ctx, work, len(points))
	wg.Wait()
	if err != nil {
		out := rows[:0]
		for i := range rows {
			if done[i] {
				out = append(out, rows[i])
			}
		}
		return out, err
	}
	return rows, nil
}

// feed sends the indices 0..n-1 to work until ctx ends, and closes it.
func feed(ctx context.Context, work chan<- int, n int) error {
	defer close(work)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case work <- i:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func runOne(p Point, prof *profile.HardwareProfile) Row {
	start := time.Now()
	res, err := perf.Run(prof, p.Spec)
	return Row{Point: p, Result: res, Err: err, Wall: time.Since(start)}
}

// LoadProfiles returns the profile of every point. Each distinct profile
// and overrides is loaded once, before anything runs, so that a bad
// profile or override fails the sweep at once.
func (s *Sweep) LoadProfiles(points []Point) ([]*profile.HardwareProfile, error) {
	loaded := map[string]*profile.HardwareProfile{}
	out := make([]*profile.HardwareProfile, len(points))
	for i, p := range points {
		key := p.Profile + "\x00" + strings.Join(p.Sets, "\x00")
		if loaded[key] == nil {
			prof, err := LoadProfile(p.Profile, s.overrides(p)...)
			if err != nil {
				return nil, err
			}
			loaded[key] = prof
		}
		out[i] = loaded[key]
	}
	return out, nil
}

// overrides returns a point's profile overrides.
func (s *Sweep) overrides(p Point) []Override {
	out := make([]Override, len(s.Sets))
	for k, set := range s.Sets {
		out[k] = Override{Key: set.Key, Value: p.Sets[k]}
	}
	return out
}

// summary is a row's progress line: its label, what it measured and how
// long it took ("write_bw qps=256: 12.3 Mops 6.29 Gb/s (1.2 s)").
func (r *Row) summary() string {
	var what string
	switch res := r.Result; {
	case r.Err != nil:
		what = "error: " + r.Err.Error()
	case res.Lat != nil && res.Lat.Count() > 0:
		what = fmt.Sprintf("latency avg %.0f ns p50 %d ns p99 %d ns", res.LatAvg, res.Lat.Quantile(0.5), res.Lat.Quantile(0.99))
	default:
		what = fmt.Sprintf("%.3g Mops %.3g Gb/s", res.Mops, res.Gbps)
	}
	return fmt.Sprintf("%s: %s (%.1f s)", r.Label, what, r.Wall.Seconds())
}
