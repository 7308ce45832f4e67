package experiment

import (
	"context"
	"fmt"
	"io"
	"slices"
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
	// Shard, if set, runs only that share of the sweep's points.
	Shard Shard
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
	if opt.Shard.N > 0 {
		points = slices.DeleteFunc(points, func(p Point) bool { return !opt.Shard.has(p.Index) })
	}
	profs, err := sw.LoadProfiles(points)
	if err != nil {
		return nil, err
	}
	rows := make([][]Row, len(points))
	done := make([]bool, len(points))
	var mu sync.Mutex // guards done, finished and Progress
	finished := 0
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(opt.Jobs, 1), len(points)) {
		wg.Go(func() {
			for i := range work {
				rs := sw.runOne(points[i], profs[i])
				mu.Lock()
				rows[i], done[i] = rs, true
				finished++
				if opt.Progress != nil {
					for _, row := range rs {
						fmt.Fprintf(opt.Progress, "[%d/%d] %s\n", finished, len(points), row.summary())
					}
				}
				mu.Unlock()
			}
		})
	}
	err = feed(ctx, work, len(points))
	wg.Wait()
	var out []Row
	for i := range rows {
		if done[i] {
			out = append(out, rows[i]...)
		}
	}
	return out, err
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

// runOne runs a point: its row, or with a scenario a row per tenant.
func (s *Sweep) runOne(p Point, prof *profile.HardwareProfile) []Row {
	start := time.Now()
	if s.Scenario == nil {
		res, err := perf.Run(prof, p.Spec)
		return []Row{{Point: p, Result: res, Err: err, Wall: time.Since(start)}}
	}
	sc, err := s.scenario(p) // checked by Points
	if err != nil {
		return []Row{{Point: p, Err: err, Wall: time.Since(start)}}
	}
	res, err := perf.RunScenario(prof, sc)
	wall := time.Since(start)
	rows := make([]Row, len(sc.Tenants))
	for i := range sc.Tenants {
		t := sc.Tenants[i]
		q := p
		q.Spec = t.Spec
		q.Label = p.Label + " tenant=" + t.Name
		rows[i] = Row{Point: q, Tenant: &t, Wall: wall}
		if res != nil && res[i] != nil {
			rows[i].Result = res[i]
		} else if err != nil {
			rows[i].Err = err
		} else {
			rows[i].Err = fmt.Errorf("tenant %q did not finish", t.Name)
		}
	}
	return rows
}

// scenario builds a point's scenario: the file's, with the point's
// tenant overrides and seed.
func (s *Sweep) scenario(p Point) (perf.Scenario, error) {
	var ovs []Override
	for _, o := range s.overridesAll(p) {
		if _, _, ok := tenantSet(o.Key); ok {
			ovs = append(ovs, o)
		}
	}
	seed := int64(-1)
	if len(s.Seeds) > 0 {
		seed = int64(p.Spec.Seed)
	}
	sc, err := s.Scenario.Scenario(ovs, seed)
	if s.TimelinePort != "" {
		sc.TimelinePort = s.TimelinePort
	}
	if err == nil {
		err = sc.Validate()
	}
	return sc, err
}

// scenarioOnly refuses the workload lists a scenario's sweep does not
// use: the tenants' parameters are in its file.
func (s *Sweep) scenarioOnly() error {
	var given []string
	for _, l := range []struct {
		name string
		n    int
	}{
		{"test", len(s.Tests)}, {"size", len(s.Sizes)}, {"qps", len(s.QPs)}, {"pairs", len(s.Pairs)},
		{"incast", len(s.Incast)}, {"iters", len(s.Iters)}, {"warmup", len(s.Warmup)}, {"tx_depth", len(s.TxDepth)},
		{"post_list", len(s.PostList)}, {"rx_depth", len(s.RxDepth)}, {"tclass", len(s.TClass)}, {"footprint", len(s.Footprint)},
		{"page_size", len(s.PageSize)}, {"mr_per_qp", len(s.MRPerQP)}, {"random", len(s.Random)},
		{"threads", len(s.Threads)}, {"cq_mod", len(s.CQMod)}, {"inline", len(s.Inline)}, {"metadata", len(s.Metadata)},
		{"mr_churn_ns", len(s.MRChurn)}, {"recv_every_ns", len(s.RecvEvery)}, {"atomic_type", len(s.AtomicType)},
		{"atomic_target", len(s.AtomicTarget)},
	} {
		if l.n > 0 {
			given = append(given, l.name)
		}
	}
	if len(given) > 0 {
		return fmt.Errorf("experiment: with a scenario the tenants' parameters are in its file or --set tenant.NAME.KEY=...; %s given", strings.Join(given, ", "))
	}
	if s.Limit > 0 {
		return fmt.Errorf("experiment: with a scenario its limit is in its file")
	}
	if s.TimelineQP != 0 {
		return fmt.Errorf("experiment: with a scenario the timeline's QP is a tenant's: timeline_qp in its file or --set tenant.NAME.timeline_qp=N")
	}
	return nil
}

// LoadProfiles returns the profile of every point. Each distinct profile
// and overrides is loaded once, before anything runs, so that a bad
// profile or override fails the sweep at once.
func (s *Sweep) LoadProfiles(points []Point) ([]*profile.HardwareProfile, error) {
	loaded := map[string]*profile.HardwareProfile{}
	out := make([]*profile.HardwareProfile, len(points))
	for i, p := range points {
		ovs := s.overrides(p)
		key := p.Profile
		for _, o := range ovs {
			key += "\x00" + o.Value
		}
		if loaded[key] == nil {
			prof, err := LoadProfile(p.Profile, ovs...)
			if err != nil {
				return nil, err
			}
			loaded[key] = prof
		}
		out[i] = loaded[key]
	}
	return out, nil
}

// overrides returns a point's profile overrides (not its tenants').
func (s *Sweep) overrides(p Point) []Override {
	var out []Override
	for _, o := range s.overridesAll(p) {
		if _, _, ok := tenantSet(o.Key); !ok {
			out = append(out, o)
		}
	}
	return out
}

// overridesAll returns every --set of a point, the profile's and the
// tenants'.
func (s *Sweep) overridesAll(p Point) []Override {
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
