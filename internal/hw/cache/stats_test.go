package cache

import (
	"slices"
	"testing"
)

func TestHitRate(t *testing.T) {
	tests := []struct {
		name string
		s    Stats
		want float64
	}{
		{"no lookups", Stats{}, 0},
		{"all hits", Stats{Hits: 5}, 1},
		{"all misses", Stats{Misses: 5}, 0},
		{"three quarters", Stats{Hits: 3, Misses: 1, Fills: 9}, 0.75},
	}
	for _, tt := range tests {
		if got := tt.s.HitRate(); got != tt.want {
			t.Errorf("%s: HitRate() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestCounters checks the exported counter names and that each carries its
// own Stats field, after a sequence that makes every counter distinct.
func TestCounters(t *testing.T) {
	c, err := New[uint32, int](Config{Name: "qpc", CapacityBytes: 2 * 256, EntryBytes: 256, Ways: 1}, func(uint32) uint64 { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	c.Lookup(1) // miss
	c.Fill(1, 1)
	c.Fill(2, 2) // evicts 1: the constant hash puts every key in one 1-way set
	for range 3 {
		c.Lookup(2) // hits
	}
	for range 4 {
		c.Fill(2, 3) // updates
	}
	for range 5 {
		c.Lookup(9) // misses
	}
	c.Invalidate(2)

	type counter struct {
		name  string
		value uint64
	}
	var got []counter
	c.Counters(func(name string, value uint64) { got = append(got, counter{name, value}) })
	want := []counter{
		{"qpc_cache_hits", 3},
		{"qpc_cache_misses", 6},
		{"qpc_cache_fills", 2},
		{"qpc_cache_updates", 4},
		{"qpc_cache_evictions", 1},
		{"qpc_cache_invalidations", 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Counters visited %v, want %v", got, want)
	}

	c.ResetStats()
	if st := c.Stats(); st != (Stats{Capacity: 2}) {
		t.Errorf("after ResetStats: %+v", st)
	}
}

// TestDisabled checks the cache-less NIC: every lookup misses and goes to
// the host table, and nothing is stored or evicted.
func TestDisabled(t *testing.T) {
	c, err := New[uint32, int](Config{Name: "qpc", EntryBytes: 256}, hashIdentity)
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	load := func(k uint32) (int, bool) { loads++; return int(k), true }
	for range 2 {
		if v, ok, hit := c.Get(7, load); v != 7 || !ok || hit {
			t.Errorf("Get = %d,%v,%v, want 7,true,false", v, ok, hit)
		}
	}
	if _, _, ev := c.Fill(7, 7); ev {
		t.Error("Fill evicted from a disabled cache")
	}
	if _, ok := c.Lookup(7); ok {
		t.Error("Lookup hit in a disabled cache")
	}
	if _, ok := c.Peek(7); ok || c.Invalidate(7) || c.Set(7) != -1 {
		t.Error("disabled cache holds key 7")
	}
	if want := (Stats{Misses: 3}); c.Stats() != want || loads != 2 {
		t.Errorf("Stats %+v loads %d, want %+v loads 2", c.Stats(), loads, want)
	}
}
