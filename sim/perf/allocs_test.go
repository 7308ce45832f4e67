package perf

import (
	"runtime"
	"testing"
)

// TestSteadyAllocs: once a run is set up, its steady path allocates
// nothing. Twice the operations cost the same allocations, within a
// little slack for the runtime's own, for each kind of test, in metadata
// mode and with real bytes.
func TestSteadyAllocs(t *testing.T) {
	p := mustProfile(t, "cx6")
	allocs := func(spec Spec) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := Run(p, spec); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	for _, spec := range []Spec{
		{Test: WriteBW, Size: 64, Metadata: true},
		{Test: WriteBW, Size: 4096},
		{Test: ReadBW, Size: 64, QPs: 4, Metadata: true},
		{Test: SendBW, Size: 64, Metadata: true},
		{Test: AtomicBW, Metadata: true},
		{Test: WriteLat, Size: 8, Metadata: true},
		{Test: SendLat, Size: 8},
	} {
		small, large := spec, spec
		small.Iters, large.Iters = 2000, 4000
		a, b := allocs(small), allocs(large)
		// 2000 more operations: an allocation for each would be 2000.
		if b > a+100 {
			t.Errorf("%v %d B (metadata %v): %d allocations for 2000 operations, %d for 4000", spec.Test, spec.Size, spec.Metadata, a, b)
		}
	}
}
