package nicmodel

import (
	"testing"

	"github.com/rnic/rnic/sim/profile"
)

// TestLockBuckets: the lock table's buckets as the profile's hash picks
// them. low_bits: words lock_buckets × lock_granule_bytes apart share a
// bucket, neighbours do not, and a granule's words share one; mix: those
// same far-apart words spread.
func TestLockBuckets(t *testing.T) {
	a := profile.Atomic{Units: 1, LockBuckets: 4096, LockHash: profile.LockHashLowBits, LockGranuleBytes: 8}
	u := newAtomicUnit(&a)
	g := func(addr uint64) uint64 { return addr >> u.shift }
	if u.bucket(g(0)) != u.bucket(g(32<<10)) || u.bucket(g(0)) != u.bucket(g(5<<40)) {
		t.Errorf("low_bits: addresses 32 KiB apart, or in other regions at the same offset, are in different buckets")
	}
	if u.bucket(g(0)) == u.bucket(g(8)) {
		t.Errorf("low_bits: neighbouring words share a bucket")
	}
	a.LockGranuleBytes = 64
	if u := newAtomicUnit(&a); u.bucket(0>>u.shift) != u.bucket(56>>u.shift) {
		t.Errorf("64-byte granule: the words of one granule are in different buckets")
	}
	a.LockHash, a.LockGranuleBytes = profile.LockHashMix, 8
	u = newAtomicUnit(&a)
	seen := map[int]bool{}
	for i := range uint64(64) {
		seen[u.bucket(i<<40>>u.shift)] = true // offset 0 of 64 regions
	}
	if len(seen) < 60 {
		t.Errorf("mix: 64 regions' first words fall in %d buckets, want nearly 64", len(seen))
	}
	if newAtomicUnit(&profile.Atomic{}) != nil {
		t.Errorf("no units: an atomic unit was built")
	}
}
