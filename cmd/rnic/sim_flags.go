package main

import (
	"fmt"
	"strconv"

	"github.com/rnic/rnic/sim/experiment"
)

// sweep turns the flags into a sweep; errors name the flag.
func (f *simFlags) sweep() (*experiment.Sweep, error) {
	sw := &experiment.Sweep{Profiles: f.profiles}
	for _, s := range f.sets {
		set, err := experiment.ParseSet(s)
		if err != nil {
			return nil, fmt.Errorf("--set %w", err)
		}
		sw.Sets = append(sw.Sets, set)
	}
	for _, s := range f.tests {
		t, err := experiment.ParseTest(s)
		if err != nil {
			return nil, fmt.Errorf("--test: %w", err)
		}
		sw.Tests = append(sw.Tests, t)
	}
	for _, l := range []struct {
		flag string
		in   []string
		out  *[]int
	}{
		{"size", f.sizes, &sw.Sizes}, {"qps", f.qps, &sw.QPs}, {"pairs", f.pairs, &sw.Pairs},
		{"iters", f.iters, &sw.Iters}, {"warmup", f.warmup, &sw.Warmup}, {"tx-depth", f.txDepth, &sw.TxDepth},
		{"footprint", f.footprint, &sw.Footprint}, {"page-size", f.page, &sw.PageSize},
		{"threads", f.threads, &sw.Threads}, {"cq-mod", f.cqMod, &sw.CQMod}, {"inline", f.inline, &sw.Inline},
	} {
		for _, s := range l.in {
			v, err := experiment.ParseSizes(s)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", l.flag, err)
			}
			*l.out = append(*l.out, v...)
		}
	}
	for _, l := range []struct {
		flag string
		in   []string
		out  *[]bool
	}{{"incast", f.incast, &sw.Incast}, {"metadata", f.metadata, &sw.Metadata}, {"mr-per-qp", f.mrPerQP, &sw.MRPerQP}, {"random", f.random, &sw.Random}} {
		for _, s := range l.in {
			v, err := strconv.ParseBool(s)
			if err != nil {
				return nil, fmt.Errorf("--%s: %q is not true or false", l.flag, s)
			}
			*l.out = append(*l.out, v)
		}
	}
	for _, s := range f.mrChurn {
		d, err := experiment.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("--mr-churn: %w", err)
		}
		sw.MRChurn = append(sw.MRChurn, d)
	}
	for _, s := range f.seeds {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seed: %q is not a seed (a non-negative integer)", s)
		}
		sw.Seeds = append(sw.Seeds, v)
	}
	if f.limit != "" {
		d, err := experiment.ParseDuration(f.limit)
		if err != nil || d == 0 {
			return nil, fmt.Errorf("--limit: %q is not a positive duration", f.limit)
		}
		sw.Limit = d
	}
	if f.jobs < 1 {
		return nil, fmt.Errorf("-j %d: want at least 1", f.jobs)
	}
	if _, err := sw.Points(); err != nil {
		return nil, err
	}
	return sw, nil
}

// plotSpec checks the plot flags before anything runs; X defaults to the
// first swept numeric parameter.
func (f *simFlags) plotSpec(sw *experiment.Sweep, cols []experiment.Column) (experiment.PlotSpec, error) {
	ps := experiment.PlotSpec{X: f.x, Y: f.y, Series: f.series, LogX: f.logx, LogY: f.logy, Title: f.title}
	if f.plot == "" {
		if f.x != "" || f.series != "" || f.logx || f.logy || f.title != "" {
			return ps, fmt.Errorf("--x, --series, --logx, --logy and --title need --plot FILE")
		}
		return ps, nil
	}
	if ps.X == "" {
		ps.X = sw.FirstSwept(cols)
		if ps.X == "" {
			return ps, fmt.Errorf("--plot: no numeric parameter is swept; name the X axis with --x")
		}
	}
	if err := ps.Check(cols, f.plot); err != nil {
		return ps, fmt.Errorf("--%w", err)
	}
	return ps, nil
}
