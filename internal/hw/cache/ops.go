package cache

// Lookup is the NIC asking the SRAM for k. On a hit it returns the entry,
// makes it the most recently used of its set (LRU) and counts a hit; on a miss it
// counts a miss and the caller reads the host table and calls Fill.
func (c *Cache[K, V]) Lookup(k K) (V, bool) {
	if c.entries == 0 {
		c.st.Misses++
		var zero V
		return zero, false
	}
	h := mix(c.hash(k))
	return c.lookup(k, h, c.setOf(h))
}

func (c *Cache[K, V]) lookup(k K, h uint64, set int) (V, bool) {
	s := c.find(k, h, set)
	if s < 0 {
		c.st.Misses++
		var zero V
		return zero, false
	}
	c.st.Hits++
	if c.cfg.Policy == LRU {
		c.lru.touch(set, s)
	}
	return c.vals[s], true
}

// Fill stores the entry read from the host table after a miss and makes it
// the most recently used (and filled) of its set. If the set is full, the
// policy's victim (LRU: the least recently used entry) is evicted and
// returned, so a caller modelling write-back can
// write it to the host. If k is already cached its value is replaced in
// place (an update, nothing evicted). A disabled cache stores nothing.
func (c *Cache[K, V]) Fill(k K, v V) (evictedKey K, evictedVal V, evicted bool) {
	if c.entries == 0 {
		return evictedKey, evictedVal, false
	}
	h := mix(c.hash(k))
	return c.fill(k, v, h, c.setOf(h))
}

func (c *Cache[K, V]) fill(k K, v V, h uint64, set int) (evictedKey K, evictedVal V, evicted bool) {
	if s := c.find(k, h, set); s >= 0 {
		c.st.Updates++
		c.vals[s] = v
		if c.cfg.Policy == LRU {
			c.lru.touch(set, s)
		}
		return evictedKey, evictedVal, false
	}
	// The list keeps free slots at its tail under every policy (a fill
	// moves its slot to the head): LRU and FIFO evict the tail, Random a
	// random way once the set is full.
	s := c.lru.tail(set)
	if c.used(s) && c.cfg.Policy == Random {
		s = int32(set*c.ways + int(c.next()%uint64(c.ways)))
	}
	if c.used(s) {
		evictedKey, evictedVal, evicted = c.keys[s], c.vals[s], true
		c.st.Evictions++
		if c.indexed {
			c.idx.remove(tagOf(c.tags[s]), s)
		}
	} else {
		c.count++
	}
	c.st.Fills++
	c.tags[s], c.keys[s], c.vals[s] = slotTag(h), k, v
	c.setFP(s, slotTag(h))
	if c.indexed {
		c.idx.insert(tagOf(h), s)
	}
	c.lru.touch(set, s)
	return evictedKey, evictedVal, evicted
}

// Get is the whole lookup path of the NIC: Lookup, and on a miss call load
// (the host-memory read, a PCIe read of EntryBytes in the timing model) and
// Fill if load found the entry. ok reports whether an entry was found at
// all; hit whether it came from the cache. load is not called on a hit.
func (c *Cache[K, V]) Get(k K, load func(K) (V, bool)) (v V, ok bool, hit bool) {
	if c.entries == 0 {
		c.st.Misses++
		v, ok = load(k)
		return v, ok, false
	}
	h := mix(c.hash(k))
	set := c.setOf(h)
	if v, ok = c.lookup(k, h, set); ok {
		return v, true, true
	}
	if v, ok = load(k); ok {
		c.fill(k, v, h, set)
	}
	return v, ok, false
}

// Peek returns k's entry without touching LRU order or counters, for tests
// and debugging; the NIC itself uses Lookup or Get.
func (c *Cache[K, V]) Peek(k K) (V, bool) {
	var zero V
	if c.entries == 0 {
		return zero, false
	}
	h := mix(c.hash(k))
	if s := c.find(k, h, c.setOf(h)); s >= 0 {
		return c.vals[s], true
	}
	return zero, false
}

// Invalidate drops k, as the NIC must when the host destroys the object
// (MR deregistration, QP destroy) so a stale entry is never used. It
// reports whether k was cached; only a dropped entry counts an invalidation.
func (c *Cache[K, V]) Invalidate(k K) bool {
	if c.entries == 0 {
		return false
	}
	h := mix(c.hash(k))
	s := c.find(k, h, c.setOf(h))
	if s < 0 {
		return false
	}
	c.drop(s)
	return true
}

// InvalidateFunc drops every entry for which f returns true (all MTT entries
// of one MR, all QPCs of one PD) and returns how many it dropped. f must not
// call the cache.
func (c *Cache[K, V]) InvalidateFunc(f func(K, V) bool) int {
	n := 0
	for s, t := range c.tags {
		if t != 0 && f(c.keys[s], c.vals[s]) {
			c.drop(int32(s))
			n++
		}
	}
	return n
}

// Flush drops every entry, as on a device reset; each counts an
// invalidation.
func (c *Cache[K, V]) Flush() {
	c.st.Invalidations += uint64(c.count)
	c.count = 0
	clear(c.keys)
	clear(c.vals)
	clear(c.tags)
	clear(c.fps)
	if c.indexed {
		c.idx.reset()
	}
}

// drop frees slot s and moves it to its set's LRU end, where Fill finds it.
// The key and value are zeroed so the cache keeps nothing they point to alive.
func (c *Cache[K, V]) drop(s int32) {
	if c.indexed {
		c.idx.remove(tagOf(c.tags[s]), s)
	}
	var zk K
	var zv V
	c.tags[s], c.keys[s], c.vals[s] = 0, zk, zv
	c.setFP(s, 0)
	c.lru.demote(int(s)/c.ways, s)
	c.count--
	c.st.Invalidations++
}

// next steps Random's generator (splitmix64).
func (c *Cache[K, V]) next() uint64 {
	c.rng += 0x9e3779b97f4a7c15
	z := c.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
