package experiment

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

func labels(points []Point) []string {
	out := make([]string, len(points))
	for i, p := range points {
		out[i] = p.Label
	}
	return out
}

func TestPointsOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		sw   Sweep
		want []string
	}{
		{"empty is one default run", Sweep{}, []string{"write_bw"}},
		{"last list fastest", Sweep{Tests: []perf.Test{perf.WriteBW, perf.ReadBW}, Sizes: []int{64}, QPs: []int{1, 16}},
			[]string{"write_bw qps=1", "write_bw qps=16", "read_bw qps=1", "read_bw qps=16"}},
		{"profile and overrides outermost", Sweep{Profiles: []string{"cx6", "hangu"}, Sets: []Set{{"caches.qpc.entries", []string{"8", "16"}}}, Seeds: []uint64{1, 2}},
			[]string{
				"write_bw profile=cx6 caches.qpc.entries=8 seed=1", "write_bw profile=cx6 caches.qpc.entries=8 seed=2",
				"write_bw profile=cx6 caches.qpc.entries=16 seed=1", "write_bw profile=cx6 caches.qpc.entries=16 seed=2",
				"write_bw profile=hangu caches.qpc.entries=8 seed=1", "write_bw profile=hangu caches.qpc.entries=8 seed=2",
				"write_bw profile=hangu caches.qpc.entries=16 seed=1", "write_bw profile=hangu caches.qpc.entries=16 seed=2",
			}},
		{"booleans and times", Sweep{Metadata: []bool{false, true}, MRChurn: []sim.Time{0, 10 * sim.Microsecond}},
			[]string{"write_bw metadata=false mr_churn_ns=0", "write_bw metadata=false mr_churn_ns=10000",
				"write_bw metadata=true mr_churn_ns=0", "write_bw metadata=true mr_churn_ns=10000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			points, err := tc.sw.Points()
			if err != nil {
				t.Fatal(err)
			}
			if got := labels(points); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("labels\n got %q\nwant %q", got, tc.want)
			}
			for i, p := range points {
				if p.Index != i {
					t.Errorf("point %d has index %d", i, p.Index)
				}
			}
		})
	}
}

func TestPointsFillSpec(t *testing.T) {
	sw := Sweep{Tests: []perf.Test{perf.ReadBW}, Sizes: []int{8}, QPs: []int{4}, Pairs: []int{3}, Incast: []bool{true},
		Iters: []int{100}, Warmup: []int{10}, TxDepth: []int{2}, Footprint: []int{1 << 20}, PageSize: []int{2 << 20},
		Threads: []int{2}, CQMod: []int{1}, Inline: []int{0}, Metadata: []bool{true}, MRChurn: []sim.Time{5000},
		Seeds: []uint64{7}, Limit: sim.Second, Sets: []Set{{"link.rate_gbps", []string{"200"}}}}
	points, err := sw.Points()
	if err != nil {
		t.Fatal(err)
	}
	want := perf.Spec{Test: perf.ReadBW, Size: 8, QPs: 4, Pairs: 3, Incast: true, Iters: 100, Warmup: 10, TxDepth: 2,
		Footprint: 1 << 20, PageSize: 2 << 20, Threads: 2, CQMod: 1, Inline: perf.NoInline, Metadata: true, MRChurn: 5000,
		Seed: 7, Limit: sim.Second}
	if len(points) != 1 || points[0].Spec != want || points[0].Profile != DefaultProfile ||
		!reflect.DeepEqual(points[0].Sets, []string{"200"}) {
		t.Errorf("got %+v\nwant spec %+v", points, want)
	}
}

func TestPointsLimits(t *testing.T) {
	big := make([]int, 1<<11)
	if _, err := (&Sweep{Sizes: big, QPs: big}).Points(); err == nil {
		t.Error("a sweep of 4M runs was accepted")
	}
	if _, err := (&Sweep{Sets: []Set{{Values: []string{"1"}}}}).Points(); err == nil {
		t.Error("an override without a key was accepted")
	}
}

// TestPointsRefuse: a sweep with a run that cannot run as asked fails as
// a whole, before anything runs, naming the run and the parameter.
func TestPointsRefuse(t *testing.T) {
	sw := Sweep{Tests: []perf.Test{perf.WriteBW, perf.WriteLat}, Random: []bool{false, true}}
	_, err := sw.Points()
	var pe *PointError
	var se *perf.SpecError
	if !errors.As(err, &pe) || !errors.As(err, &se) || pe.Label != "write_lat random=true" || se.Param != "random" {
		t.Errorf("error %v, want a PointError for write_lat random=true about random", err)
	}
}

// TestInlineSweep: an inline value of 0 sends nothing inline
// (perf.NoInline); no value at all takes the test's default.
func TestInlineSweep(t *testing.T) {
	for _, tc := range []struct {
		inline []int
		want   []int
	}{
		{nil, []int{0}},
		{[]int{0, 64}, []int{perf.NoInline, 64}},
	} {
		points, err := (&Sweep{Tests: []perf.Test{perf.WriteLat}, Inline: tc.inline}).Points()
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, p := range points {
			got = append(got, p.Spec.Inline)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Inline %v: specs have %v, want %v", tc.inline, got, tc.want)
		}
	}
}
