package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// qpcEntry stands in for a cached QP context: 64 bytes copied out per hit.
type qpcEntry [8]uint64

// The two shapes the NIC runs: a small 4-way QPC cache, scanned, and a
// 50,000-entry fully associative MTT cache of 8-byte page addresses, indexed.
var (
	benchQPC = Config{Name: "qpc", CapacityBytes: 256 * 256, EntryBytes: 256, Ways: 4}
	benchMTT = Config{Name: "mtt", CapacityBytes: 50000 * 8, EntryBytes: 8}
)

func qpcValue(k uint32) qpcEntry { return qpcEntry{uint64(k)} }
func mttValue(k uint32) uint64   { return uint64(k) << 12 }

func BenchmarkLookupHit(b *testing.B) {
	b.Run("qpc-4way-256", func(b *testing.B) { benchLookupHit(b, benchQPC, qpcValue) })
	b.Run("mtt-full-50000", func(b *testing.B) { benchLookupHit(b, benchMTT, mttValue) })
}

func BenchmarkMissFill(b *testing.B) {
	b.Run("qpc-4way-256", func(b *testing.B) { benchMissFill(b, benchQPC, qpcValue) })
	b.Run("mtt-full-50000", func(b *testing.B) { benchMissFill(b, benchMTT, mttValue) })
}

// fill fills c until every set is full and returns the keys it holds and
// the first key never filled.
func fill[V any](b *testing.B, c *Cache[uint32, V], value func(uint32) V) ([]uint32, uint32) {
	var next uint32
	for ; c.Stats().Entries < c.Entries(); next++ {
		if next > 100*uint32(c.Entries()) {
			b.Fatalf("sets still not full after %d fills", next)
		}
		c.Fill(next, value(next))
	}
	var keys []uint32
	for k := range next {
		if _, ok := c.Peek(k); ok {
			keys = append(keys, k)
		}
	}
	return keys, next
}

func benchLookupHit[V any](b *testing.B, cfg Config, value func(uint32) V) {
	c, err := New[uint32, V](cfg, hashIdentity)
	if err != nil {
		b.Fatal(err)
	}
	benchHits(b, c, value)
}

// benchHits fills c and looks up resident keys in a random order, so the
// large caches pay for CPU cache misses as a real workload would.
func benchHits[V any](b *testing.B, c *Cache[uint32, V], value func(uint32) V) {
	keys, _ := fill(b, c, value)
	r := rand.New(rand.NewPCG(1, 2))
	order := make([]uint32, 1<<16)
	for i := range order {
		order[i] = keys[r.IntN(len(keys))]
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := c.Lookup(order[i&(len(order)-1)]); !ok {
			b.Fatal("miss")
		}
	}
}

func benchMissFill[V any](b *testing.B, cfg Config, value func(uint32) V) {
	c, err := New[uint32, V](cfg, hashIdentity)
	if err != nil {
		b.Fatal(err)
	}
	_, next := fill(b, c, value)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Lookup(next); ok {
			b.Fatal("hit")
		}
		if _, _, ev := c.Fill(next, value(next)); !ev {
			b.Fatal("no eviction")
		}
		next++
	}
}

// BenchmarkScanVsIndex measures a hit on 4096-entry caches of growing
// associativity searched both ways; it is how scanWays was chosen.
func BenchmarkScanVsIndex(b *testing.B) {
	for _, ways := range []int{1, 2, 4, 8, 16, 32} {
		for _, indexed := range []bool{false, true} {
			b.Run(fmt.Sprintf("ways=%d/indexed=%v", ways, indexed), func(b *testing.B) {
				cfg := Config{Name: "t", CapacityBytes: 4096 * 8, EntryBytes: 8, Ways: ways}
				g, err := geometryOf(cfg)
				if err != nil {
					b.Fatal(err)
				}
				benchHits(b, build[uint32, uint64](cfg, g, hashIdentity, indexed), mttValue)
			})
		}
	}
}
