package cache

// Stats is a snapshot of a cache's counters and occupancy. The simulator
// turns Misses into PCIe reads of EntryBytes, so the counts are exact.
type Stats struct {
	Hits          uint64 // lookups answered from the cache
	Misses        uint64 // lookups that went to the host table
	Fills         uint64 // entries written into a free or evicted slot
	Updates       uint64 // Fills of a key already cached, replaced in place
	Evictions     uint64 // entries pushed out by a Fill into a full set
	Invalidations uint64 // entries dropped by Invalidate, InvalidateFunc or Flush
	Entries       int    // entries cached now
	Capacity      int    // entries the cache can hold
}

// HitRate returns Hits/(Hits+Misses), or 0 before any lookup, the figure
// SRAM sizing studies plot.
func (s Stats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// Stats returns the counters since New or the last ResetStats, with the
// current occupancy.
func (c *Cache[K, V]) Stats() Stats {
	s := c.st
	s.Entries, s.Capacity = c.count, c.entries
	return s
}

// ResetStats zeroes the counters, for example after a warm-up phase; the
// cached entries stay.
func (c *Cache[K, V]) ResetStats() { c.st = Stats{} }

const numCounters = 6

// counterNames names the counters "<Name>_cache_<counter>", in the order
// Counters visits them.
func counterNames(name string) [numCounters]string {
	var n [numCounters]string
	for i, s := range [numCounters]string{"hits", "misses", "fills", "updates", "evictions", "invalidations"} {
		n[i] = name + "_cache_" + s
	}
	return n
}

// Counters calls fn with each counter's name ("qpc_cache_hits",
// "qpc_cache_misses", …) and value, so the NIC can export them with its
// other counters without knowing the Stats fields.
func (c *Cache[K, V]) Counters(fn func(name string, value uint64)) {
	for i, v := range [numCounters]uint64{c.st.Hits, c.st.Misses, c.st.Fills, c.st.Updates, c.st.Evictions, c.st.Invalidations} {
		fn(c.names[i], v)
	}
}
