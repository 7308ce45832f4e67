package cache

import "testing"

// TestZeroAllocs checks that the data-path operations allocate nothing once
// the cache is built, for both the scanned and the indexed layout.
func TestZeroAllocs(t *testing.T) {
	const runs = 1000
	tests := []struct {
		name    string
		cfg     Config
		indexed bool
	}{
		{"qpc 4-way scanned", Config{Name: "qpc", CapacityBytes: 256 * 256, EntryBytes: 256, Ways: 4}, false},
		{"mtt fully associative indexed", Config{Name: "mtt", CapacityBytes: 4096 * 8, EntryBytes: 8}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New[uint32, uint64](tt.cfg, hashIdentity)
			if err != nil {
				t.Fatal(err)
			}
			if c.indexed != tt.indexed {
				t.Fatalf("indexed = %v, want %v", c.indexed, tt.indexed)
			}
			var next uint32 // keys from next up were never filled
			for ; c.Stats().Entries < c.Entries(); next++ {
				if next > 100*uint32(c.Entries()) {
					t.Fatalf("sets still not full after %d fills", next)
				}
				c.Fill(next, uint64(next)) // until every set is full
			}
			var resident []uint32 // looked up in turn, so hits reorder the LRU lists
			for k := range next {
				if _, ok := c.Peek(k); ok {
					resident = append(resident, k)
				}
			}
			load := func(k uint32) (uint64, bool) { return uint64(k), true }
			last := next - 1 // the key filled last, the MRU of its set
			var hits, misses, evictions, dropped int
			ops := []struct {
				name string
				f    func()
			}{
				{"Lookup hit", func() {
					if _, ok := c.Lookup(resident[hits%len(resident)]); !ok {
						misses++
					}
					hits++
				}},
				{"Fill with eviction", func() {
					if _, _, ev := c.Fill(next, 0); ev {
						evictions++
					}
					last, next = next, next+1
				}},
				{"Get miss", func() { c.Get(next, load); last, next = next, next+1 }},
				{"Invalidate", func() {
					if c.Invalidate(last) {
						dropped++
					}
					c.Fill(last, 0)
				}},
				{"InvalidateFunc", func() { c.InvalidateFunc(func(k uint32, _ uint64) bool { return k == last }); c.Fill(last, 0) }},
				{"Flush", func() { c.Flush(); c.Fill(last, 0) }},
			}
			for _, op := range ops {
				if a := testing.AllocsPerRun(runs, op.f); a != 0 {
					t.Errorf("%s: %v allocations per run, want 0", op.name, a)
				}
			}
			// AllocsPerRun calls each function runs+1 times.
			if misses != 0 || evictions != runs+1 || dropped != runs+1 {
				t.Errorf("misses %d evictions %d invalidations %d: the operations did not do what was measured", misses, evictions, dropped)
			}
		})
	}
}
