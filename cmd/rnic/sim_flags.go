package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/experiment"
	"github.com/rnic/rnic/sim/perf"
)

// sweep turns the flags into a sweep; errors name the flag.
func (f *simFlags) sweep() (*experiment.Sweep, error) {
	sw := &experiment.Sweep{Profiles: f.profiles}
	if f.scenario != "" {
		doc, err := experiment.LoadScenario(f.scenario)
		if err != nil {
			return nil, fmt.Errorf("--scenario: %w", err)
		}
		sw.Scenario = doc
	}
	if f.timeline != "" {
		if err := experiment.CheckTimeline(f.timeline); err != nil {
			return nil, fmt.Errorf("--%w", err)
		}
	}
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
	// Zero means "the default" to perf.Spec, so a 0 given on the command
	// line would silently run as something else (--qps 0 ran 1 QP): it is
	// refused, except where 0 means what it says (no warmup, no inline).
	for _, l := range []struct {
		flag string
		in   []string
		out  *[]int
		zero string // why 0 is refused ("": 0 is meaningful)
	}{
		{"size", f.sizes, &sw.Sizes, "want at least 1 byte"}, {"qps", f.qps, &sw.QPs, "want at least 1"},
		{"pairs", f.pairs, &sw.Pairs, "want at least 1"}, {"iters", f.iters, &sw.Iters, "want at least 1"},
		{"warmup", f.warmup, &sw.Warmup, ""}, {"tx-depth", f.txDepth, &sw.TxDepth, "want at least 1"},
		{"post-list", f.postList, &sw.PostList, "want at least 1"},
		{"rx-depth", f.rxDepth, &sw.RxDepth, "want at least 1"},
		{"tclass", f.tclass, &sw.TClass, ""},
		{"footprint", f.footprint, &sw.Footprint, "want at least one message"},
		{"page-size", f.page, &sw.PageSize, "want a power of two from 4K to 1G"},
		{"threads", f.threads, &sw.Threads, "want at least 1"}, {"cq-mod", f.cqMod, &sw.CQMod, "want at least 1"},
		{"inline", f.inline, &sw.Inline, ""},
	} {
		for _, s := range l.in {
			v, err := experiment.ParseSizes(s)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", l.flag, err)
			}
			if l.zero != "" && slices.Contains(v, 0) {
				return nil, fmt.Errorf("--%s %s: %s", l.flag, s, l.zero)
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
	sw.AtomicType, sw.AtomicTarget = f.atomicType, f.atomicTarget
	for _, l := range []struct {
		flag string
		in   []string
		out  *[]sim.Time
	}{{"mr-churn", f.mrChurn, &sw.MRChurn}, {"recv-every", f.recvEvery, &sw.RecvEvery}} {
		for _, s := range l.in {
			d, err := experiment.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", l.flag, err)
			}
			*l.out = append(*l.out, d)
		}
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
	if f.timelineQP < 0 {
		return nil, fmt.Errorf("--timeline-qp %d: want a client QP's number, 0-based", f.timelineQP)
	}
	sw.TimelineQP, sw.TimelinePort = f.timelineQP, f.timelinePort
	if f.csv == "-" && f.json == "-" {
		return nil, fmt.Errorf("--csv - and --json -: only one of them can go to standard output")
	}
	if f.jobs < 1 {
		return nil, fmt.Errorf("-j %d: want at least 1", f.jobs)
	}
	if _, err := sw.Points(); err != nil {
		var pe *experiment.PointError
		var se *perf.SpecError
		if errors.As(err, &pe) && errors.As(err, &se) {
			// Name the flag, and the run of the sweep that has the value.
			return nil, fmt.Errorf("--%s %v: %s (in run %q)", specFlag(se.Param), se.Value, se.Msg, pe.Label)
		}
		return nil, err
	}
	return sw, nil
}

// specFlag is the flag of a perf.Spec parameter, named as its column.
func specFlag(param string) string {
	switch param {
	case "mr_churn_ns":
		return "mr-churn"
	case "recv_every_ns":
		return "recv-every"
	}
	return strings.ReplaceAll(param, "_", "-")
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
