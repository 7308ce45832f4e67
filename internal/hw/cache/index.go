package cache

// index maps keys to slots for sets too wide to scan (more than scanWays
// ways, e.g. a fully associative MTT cache of 50,000 entries). It is an open
// addressing table with linear probing, a power of two at least twice the
// entries so it is never more than half full, and backward-shift deletion so
// no tombstones build up under churn. It is sized once at New and never
// allocates; unlike a Go map it reuses the hash the cache already computed.
type index struct {
	buckets []bucket
	mask    uint32
}

// bucket is one index entry.
type bucket struct {
	tag uint32 // tagOf the key's mixed hash; its low bits pick the home bucket
	ref uint32 // slot+1; 0 marks an empty bucket
}

func newIndex(entries int) index {
	n := 2
	for n < 2*entries {
		n <<= 1
	}
	return index{buckets: make([]bucket, n), mask: uint32(n - 1)}
}

// tagOf takes the high half of a mixed hash, independent of the low bits
// that pick the set.
func tagOf(h uint64) uint32 { return uint32(h >> 32) }

// insert records that slot holds a key whose tagOf is tag. The key must not
// be present.
func (x *index) insert(tag uint32, slot int32) {
	i := tag & x.mask
	for x.buckets[i].ref != 0 {
		i = (i + 1) & x.mask
	}
	x.buckets[i] = bucket{tag: tag, ref: uint32(slot) + 1}
}

// remove deletes slot, whose key has tagOf tag, and shifts the rest of the
// probe run back so that every lookup still ends at the first empty bucket.
func (x *index) remove(tag uint32, slot int32) {
	ref := uint32(slot) + 1
	i := tag & x.mask
	for x.buckets[i].ref != ref {
		i = (i + 1) & x.mask
	}
	for j := i; ; {
		j = (j + 1) & x.mask
		b := x.buckets[j]
		if b.ref == 0 {
			x.buckets[i] = bucket{}
			return
		}
		// b may fill the hole at i unless its home lies cyclically in (i, j].
		if home := b.tag & x.mask; (j-home)&x.mask >= (j-i)&x.mask {
			x.buckets[i] = b
			i = j
		}
	}
}

// reset empties the index.
func (x *index) reset() { clear(x.buckets) }
