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
	if c.fps != nil {
		return c.scanFP(k, slotTag(h), set)
	}
	return c.scan(k, slotTag(h), set)
}

// fpWays is the widest set whose ways' fingerprints share one word.
const fpWays = 8

// fingerprint is the byte of a slot tag t that fps keeps: never 0 (a free
// way's byte).
func fingerprint(t uint64) uint64 { return t>>56 | 1 }

// setFP records in fps that slot s (way w of set) holds tag t, or is free
// (t 0).
func (c *Cache[K, V]) setFP(s int32, t uint64) {
	if c.fps == nil {
		return
	}
	set, w := int(s)/c.ways, uint(int(s)%c.ways)*8
	fp := uint64(0)
	if t != 0 {
		fp = fingerprint(t)
	}
	c.fps[set] = c.fps[set]&^(0xFF<<w) | fp<<w
}

// Bytes of a word, for the fingerprint compare.
const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// scanFP finds k (slot tag t) in a set of at most 8 ways by its word of
// fingerprints: the bytes equal to t's fingerprint are the ways to
// compare, found without a branch per way. (x-lowBits)&^x&highBits marks
// every zero byte of x; a byte above a zero byte may be marked too, which
// costs only a compare.
func (c *Cache[K, V]) scanFP(k K, t uint64, set int) int32 {
	x := c.fps[set] ^ fingerprint(t)*lowBits
	base := set * c.ways
	for m := (x - lowBits) &^ x & highBits; m != 0; m &= m - 1 {
		s := base + bits.TrailingZeros64(m)/8
		if s < base+c.ways && c.tags[s] == t && c.keys[s] == k {
			return int32(s)
		}
	}
	return -1
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
