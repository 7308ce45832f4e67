package experiment

import (
	"fmt"
	"strings"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

// DefaultProfile is the profile of a sweep that names none.
const DefaultProfile = "cx6"

// Sweep is an experiment's parameter space. Each field lists the values of
// one parameter and the experiment runs every combination of them. An
// empty list stands for one run with perf's default (0 or false), or
// DefaultProfile for Profiles.
type Sweep struct {
	// Profiles are built-in profile names or paths of TOML profiles.
	Profiles []string
	// Sets override profile parameters; a Set with several values is
	// swept like any other parameter.
	Sets []Set

	Tests     []perf.Test
	Sizes     []int
	QPs       []int
	Pairs     []int
	Incast    []bool
	Iters     []int
	Warmup    []int
	TxDepth   []int
	PostList  []int
	RxDepth   []int
	TClass    []int
	Footprint []int
	PageSize  []int
	MRPerQP   []bool
	Random    []bool
	Threads   []int
	CQMod     []int
	// Inline values are bytes; 0 sends nothing inline (perf.NoInline),
	// and an empty list takes each test's default.
	Inline   []int
	Metadata []bool
	MRChurn  []sim.Time
	// RecvEvery is send_bw's receive posting interval (0: on completion).
	RecvEvery []sim.Time
	// AtomicType and AtomicTarget are atomic_bw's operation and target
	// (perf.Spec's); an empty list takes its default.
	AtomicType   []string
	AtomicTarget []string
	Seeds        []uint64

	// Limit bounds each run's virtual time (0: perf's default).
	Limit sim.Time
	// TimelineQP and TimelinePort choose the flow whose rate and the port
	// whose queue each run's timeline follows (perf.Spec's). With a
	// scenario, TimelinePort overrides its file's and TimelineQP is a
	// tenant key (timeline_qp).
	TimelineQP   int
	TimelinePort string

	// Scenario, if set, runs the scenario file's tenants at once instead
	// of one workload: the workload lists above must be empty (the
	// tenants' parameters are in the file), Sets with keys
	// tenant.NAME.KEY override a tenant's parameter, and Seeds the
	// file's seed. Each run gives a row per tenant.
	Scenario *ScenarioDoc
}

// Set overrides one profile parameter, named by its dotted TOML key
// ("caches.qpc.entries"), with each of Values in turn (TOML values:
// 100, 2.5, true, "text", [1, 2]).
type Set struct {
	Key    string
	Values []string
}

// Point is one run of a sweep.
type Point struct {
	Index   int
	Profile string   // built-in name or file, as given
	Sets    []string // the value of each of the sweep's Sets, in order
	Spec    perf.Spec
	// Label names the run by the parameters that vary in the sweep
	// ("write_bw qps=256"); the test is always named.
	Label string
}

// dim is one parameter of a sweep: its column name, its number of values,
// how a value is put into a point and how it reads.
type dim struct {
	name   string
	n      int
	apply  func(p *Point, i int)
	format func(i int) string
}

// list makes a dim from a list of values; an empty list is the one zero
// value.
func list[T any](name string, vals []T, apply func(p *Point, v T)) dim {
	if len(vals) == 0 {
		vals = make([]T, 1)
	}
	return dim{name: name, n: len(vals),
		apply:  func(p *Point, i int) { apply(p, vals[i]) },
		format: func(i int) string { return formatValue(vals[i]) }}
}

// formatValue writes a parameter's value as its column does (virtual
// times in nanoseconds).
func formatValue(v any) string {
	if t, ok := v.(sim.Time); ok {
		return fmt.Sprint(int64(t))
	}
	return fmt.Sprint(v)
}

// dims returns the sweep's parameters, outermost first: the last one
// changes fastest from one run to the next.
func (s *Sweep) dims() []dim {
	profiles := s.Profiles
	if len(profiles) == 0 {
		profiles = []string{DefaultProfile}
	}
	ds := []dim{list("profile", profiles, func(p *Point, v string) { p.Profile = v })}
	for k, set := range s.Sets {
		ds = append(ds, list(set.Key, set.Values, func(p *Point, v string) { p.Sets[k] = v }))
	}
	if s.Scenario != nil {
		return append(ds, list("seed", s.Seeds, func(p *Point, v uint64) { p.Spec.Seed = v }))
	}
	tests := s.Tests
	if len(tests) == 0 {
		tests = []perf.Test{perf.WriteBW}
	}
	return append(ds,
		list("test", tests, func(p *Point, v perf.Test) { p.Spec.Test = v }),
		list("size", s.Sizes, func(p *Point, v int) { p.Spec.Size = v }),
		list("qps", s.QPs, func(p *Point, v int) { p.Spec.QPs = v }),
		list("pairs", s.Pairs, func(p *Point, v int) { p.Spec.Pairs = v }),
		list("incast", s.Incast, func(p *Point, v bool) { p.Spec.Incast = v }),
		list("iters", s.Iters, func(p *Point, v int) { p.Spec.Iters = v }),
		list("warmup", s.Warmup, func(p *Point, v int) { p.Spec.Warmup = v }),
		list("tx_depth", s.TxDepth, func(p *Point, v int) { p.Spec.TxDepth = v }),
		list("post_list", s.PostList, func(p *Point, v int) { p.Spec.PostList = v }),
		list("rx_depth", s.RxDepth, func(p *Point, v int) { p.Spec.RxDepth = v }),
		list("tclass", s.TClass, func(p *Point, v int) { p.Spec.TrafficClass = v }),
		list("footprint", s.Footprint, func(p *Point, v int) { p.Spec.Footprint = v }),
		list("page_size", s.PageSize, func(p *Point, v int) { p.Spec.PageSize = v }),
		list("mr_per_qp", s.MRPerQP, func(p *Point, v bool) { p.Spec.MRPerQP = v }),
		list("random", s.Random, func(p *Point, v bool) { p.Spec.Random = v }),
		list("threads", s.Threads, func(p *Point, v int) { p.Spec.Threads = v }),
		list("cq_mod", s.CQMod, func(p *Point, v int) { p.Spec.CQMod = v }),
		list("inline", s.Inline, func(p *Point, v int) {
			if v == 0 && len(s.Inline) > 0 {
				v = perf.NoInline // asked for none, not for the default
			}
			p.Spec.Inline = v
		}),
		list("metadata", s.Metadata, func(p *Point, v bool) { p.Spec.Metadata = v }),
		list("mr_churn_ns", s.MRChurn, func(p *Point, v sim.Time) { p.Spec.MRChurn = v }),
		list("recv_every_ns", s.RecvEvery, func(p *Point, v sim.Time) { p.Spec.RecvEvery = v }),
		list("atomic_type", s.AtomicType, func(p *Point, v string) { p.Spec.AtomicType = v }),
		list("atomic_target", s.AtomicTarget, func(p *Point, v string) { p.Spec.AtomicTarget = v }),
		list("seed", s.Seeds, func(p *Point, v uint64) { p.Spec.Seed = v }),
	)
}

// maxPoints bounds a sweep's size: a product of long lists is more likely
// a mistake than an experiment.
const maxPoints = 1 << 20

// Points expands the sweep into its runs: the cartesian product of the
// lists, in the order of the Sweep's fields with the last field changing
// fastest. A run whose parameters are not meaningful together (perf.Spec's
// Validate) fails the sweep before anything runs, with a *PointError
// that names the run and wraps the *perf.SpecError.
func (s *Sweep) Points() ([]Point, error) {
	ds := s.dims()
	total := 1
	for _, d := range ds {
		total *= d.n
		if total > maxPoints {
			return nil, fmt.Errorf("experiment: more than %d runs", maxPoints)
		}
	}
	for _, set := range s.Sets {
		if set.Key == "" {
			return nil, fmt.Errorf("experiment: a profile override without a key")
		}
		if _, _, ok := tenantSet(set.Key); ok {
			if s.Scenario == nil {
				return nil, fmt.Errorf("experiment: --set %s: tenant overrides need a scenario", set.Key)
			}
			if err := s.Scenario.checkSet(set.Key); err != nil {
				return nil, err
			}
		}
	}
	if s.Scenario != nil {
		if err := s.scenarioOnly(); err != nil {
			return nil, err
		}
	}
	points := make([]Point, total)
	idx := make([]int, len(ds)) // odometer, last digit fastest
	for n := range points {
		p := &points[n]
		p.Index = n
		p.Sets = make([]string, len(s.Sets))
		p.Spec.Limit, p.Spec.TimelineQP, p.Spec.TimelinePort = s.Limit, s.TimelineQP, s.TimelinePort
		var label []string
		for k, d := range ds {
			d.apply(p, idx[k])
			if d.n > 1 && d.name != "test" {
				label = append(label, d.name+"="+d.format(idx[k]))
			}
		}
		p.Label = strings.Join(append([]string{p.Spec.Test.String()}, label...), " ")
		if s.Scenario != nil {
			p.Label = strings.Join(append([]string{"scenario"}, label...), " ")
			if _, err := s.scenario(*p); err != nil {
				return nil, &PointError{Label: p.Label, Err: err}
			}
		} else if err := p.Spec.Validate(); err != nil {
			return nil, &PointError{Label: p.Label, Err: err}
		}
		for k := len(ds) - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < ds[k].n {
				break
			}
			idx[k] = 0
		}
	}
	return points, nil
}

// PointError says which run of a sweep cannot run as asked, and why.
type PointError struct {
	Label string // the run's Point.Label
	Err   error
}

func (e *PointError) Error() string { return fmt.Sprintf("experiment: run %q: %v", e.Label, e.Err) }
func (e *PointError) Unwrap() error { return e.Err }

// varying returns the names of the parameters with more than one value.
func (s *Sweep) varying() map[string]bool {
	out := map[string]bool{}
	for _, d := range s.dims() {
		if d.n > 1 {
			out[d.name] = true
		}
	}
	return out
}
