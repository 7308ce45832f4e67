package cache

import "math/bits"

// slotTag is what a slot stores of its key's mixed hash h: h with the low
// bit set, so that it is never 0, the mark of a free slot, and a scan needs
// no separate valid bit.
func slotTag(h uint64) uint64 { return h | 1 }

// used reports whether slot s holds an entry.
func (c *Cache[K, V]) used(s int32) bool { return c.tags[s] != 0 }

// find returns the slot holding k, whose mixed hash is h, or -1.
func (c *Cache[K, V]) find(k K, h uint64, set int) int32 {
	if c.indexed {
		t := tagOf(h)
		for i := t & c.idx.mask; ; i = (i + 1) & c.idx.mask {
			b := c.idx.buckets[i]
			if b.ref == 0 {
				return -1
			}
			if b.tag == t && c.keys[b.ref-1] == k {
				return int32(b.ref - 1)
			}
		}
	}
	return c.scan(k, slotTag(h), set)
}

// scan compares every tag of the set at once, as a hardware comparator per
// way does: arithmetic without branches builds a bitmask of the ways whose
// tag matches, so the search has no branch to mispredict, and only those
// ways' keys are compared. More than one way matches only when the caller's
// hash collides.
func (c *Cache[K, V]) scan(k K, t uint64, set int) int32 {
	base := set * c.ways
	tags := c.tags[base : base+c.ways]
	keys := c.keys[base : base+len(tags)]
	if len(tags) > 64 {
		return scanWide(k, t, tags, keys, base)
	}
	var match uint64 // bit w is set iff way w's tag matches
	for i := len(tags) - 1; i >= 0; i-- {
		d := tags[i] ^ t                    // 0 iff the tag matches
		match = match<<1 | ((d|-d)>>63 ^ 1) // d|-d has its top bit set iff d != 0
	}
	for ; match != 0; match &= match - 1 {
		if w := bits.TrailingZeros64(match); keys[w] == k {
			return int32(base + w)
		}
	}
	return -1
}

// scanWide searches a set too wide for one bitmask. New indexes such sets;
// tests that force a scan on them come here.
func scanWide[K comparable](k K, t uint64, tags []uint64, keys []K, base int) int32 {
	for i, x := range tags {
		if x == t && keys[i] == k {
			return int32(base + i)
		}
	}
	return -1
}
