package cache

// mix is the 64-bit finalizer of MurmurHash3 (fmix64). It is a bijection, so
// distinct hashes stay distinct, and every input bit reaches every output
// bit, so sequential keys such as QPNs or page numbers land in unrelated sets
// even when the caller's hash is the identity.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// setOf returns the set a mixed hash maps to: h mod sets, by mask when sets
// is a power of two as it usually is in hardware.
func (c *Cache[K, V]) setOf(h uint64) int {
	if c.setMask != 0 || c.sets == 1 {
		return int(h & c.setMask)
	}
	return int(h % uint64(c.sets))
}
