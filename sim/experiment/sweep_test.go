package experiment

import (
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
	sw := Sweep{Tests: []perf.Test{perf.ReadLat}, Sizes: []int{8}, QPs: []int{4}, Pairs: []int{3}, Incast: []bool{true},
		Iters: []int{100}, Warmup: []int{10}, TxDepth: []int{2}, Footprint: []int{1 << 20}, PageSize: []int{2 << 20},
		Threads: []int{2}, CQMod: []int{1}, Inline: []int{0}, Metadata: []bool{true}, MRChurn: []sim.Time{5000},
		Seeds: []uint64{7}, Limit: sim.Second, Sets: []Set{{"link.rate_gbps", []string{"200"}}}}
	points, err := sw.Points()
	if err != nil {
		t.Fatal(err)
	}
	want := perf.Spec{Test: perf.ReadLat, Size: 8, QPs: 4, Pairs: 3, Incast: true, Iters: 100, Warmup: 10, TxDepth: 2,
		Footprint: 1 << 20, PageSize: 2 << 20, Threads: 2, CQMod: 1, Metadata: true, MRChurn: 5000, Seed: 7, Limit: sim.Second}
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
