package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPolicyCyclicScan is the cliff the policies differ on: a loop over
// one key more than the cache holds. LRU and FIFO evict exactly the key
// needed next and never hit; Random keeps most of the loop.
func TestPolicyCyclicScan(t *testing.T) {
	const entries, rounds = 64, 200
	for _, tt := range []struct {
		p        Policy
		min, max float64 // hit rate over the rounds after the first
	}{
		{LRU, 0, 0},
		{FIFO, 0, 0},
		{Random, 0.5, 1},
	} {
		t.Run(tt.p.String(), func(t *testing.T) {
			c, err := New[uint32, int](Config{Name: "qpc", CapacityBytes: entries * 256, EntryBytes: 256, Policy: tt.p}, hashIdentity)
			if err != nil {
				t.Fatal(err)
			}
			load := func(k uint32) (int, bool) { return int(k), true }
			hits := 0
			for r := range rounds {
				for k := range uint32(entries + 1) {
					v, ok, hit := c.Get(k, load)
					if !ok || v != int(k) {
						t.Fatalf("Get(%d) = %d, %v", k, v, ok)
					}
					if hit && r > 0 {
						hits++
					}
				}
			}
			rate := float64(hits) / float64((rounds-1)*(entries+1))
			t.Logf("%v: hit rate %.3f", tt.p, rate)
			if rate < tt.min || rate > tt.max {
				t.Errorf("hit rate %.3f, want %.2f..%.2f", rate, tt.min, tt.max)
			}
		})
	}
}

// TestRandomPolicy runs Random under the differential test's workload
// with what can be checked without knowing the generator: every hit and
// Peek returns the value last stored for the key, evictions come only
// from a full set and of a key of that set, the counters add up, the
// lists keep free slots last and the index matches the slots. The same
// seed replays the same evictions; another seed does not.
func TestRandomPolicy(t *testing.T) {
	for _, g := range diffGeometries {
		for _, indexed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/indexed=%v", g.name, indexed), func(t *testing.T) {
				cfg := withPolicy(g.cfg, Random)
				a := runRandom(t, cfg, indexed, 1)
				if b := runRandom(t, cfg, indexed, 1); fmt.Sprint(a) != fmt.Sprint(b) {
					t.Error("the same seed evicted differently")
				}
				cfg.Seed = 12345
				// One way leaves no choice: direct-mapped evicts the same.
				if c := runRandom(t, cfg, indexed, 1); g.cfg.Ways != 1 && len(a) > 50 && fmt.Sprint(a) == fmt.Sprint(c) {
					t.Error("another seed evicted the same keys")
				}
			})
		}
	}
}

func runRandom(t *testing.T, cfg Config, indexed bool, seed uint64) []uint32 {
	t.Helper()
	g, err := geometryOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := build[uint32, uint64](cfg, g, hashCoarse, indexed)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	keys := newKeySource(r, 3*c.Entries()+64)
	truth := map[uint32]uint64{} // what the cache holds, by key
	perSet := map[int]int{}
	var evicted []uint32
	fill := func(k uint32, v uint64) {
		_, had := truth[k]
		full := perSet[c.Set(k)] == c.Ways()
		ek, _, e := c.Fill(k, v)
		switch {
		case e && (had || !full):
			t.Fatalf("Fill(%d) evicted %d from a set with room or over itself", k, ek)
		case e && c.Set(ek) != c.Set(k):
			t.Fatalf("Fill(%d) evicted %d of set %d", k, ek, c.Set(ek))
		case e:
			if _, ok := truth[ek]; !ok {
				t.Fatalf("Fill(%d) evicted %d, which was not cached", k, ek)
			}
			delete(truth, ek)
			perSet[c.Set(ek)]--
			evicted = append(evicted, ek)
		case !had && full && c.Entries() > 0:
			t.Fatalf("Fill(%d) into a full set evicted nothing", k)
		}
		if c.Entries() > 0 {
			if !had {
				perSet[c.Set(k)]++
			}
			truth[k] = v
		}
	}
	for i := range 5000 {
		k := uint32(keys.key())
		switch op := r.IntN(10); {
		case op < 5:
			if v, ok := c.Lookup(k); ok != hasKey(truth, k) || (ok && v != truth[k]) {
				t.Fatalf("op %d: Lookup(%d) = %d,%v; holds %v", i, k, v, ok, hasKey(truth, k))
			}
		case op < 9:
			fill(k, r.Uint64()|1)
		default:
			if got := c.Invalidate(k); got != hasKey(truth, k) {
				t.Fatalf("op %d: Invalidate(%d) = %v", i, k, got)
			}
			if hasKey(truth, k) {
				delete(truth, k)
				perSet[c.Set(k)]--
			}
		}
		st := c.Stats()
		if st.Entries != len(truth) || uint64(st.Entries) != st.Fills-st.Evictions-st.Invalidations {
			t.Fatalf("op %d: Stats %+v, %d keys held", i, st, len(truth))
		}
		if i%256 == 0 {
			for s := range c.Sets() {
				setOrder(t, c, s)
			}
			checkIndex(t, c)
		}
	}
	return evicted
}

func hasKey(m map[uint32]uint64, k uint32) bool { _, ok := m[k]; return ok }
