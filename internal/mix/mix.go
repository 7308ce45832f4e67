// Package mix has the 64-bit integer hash the links' seeded faults and the
// fabric's ECMP use: SplitMix64's finalizer, which spreads every input bit
// over the whole output, so that seeds and flow keys differing in a bit
// give unrelated draws.
package mix

// Mix64 is SplitMix64's finalizer.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
