package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// mttKey is a struct key, as an MTT cache indexed by (MR, page) would use,
// so the generic code is also exercised with non-integer keys.
type mttKey struct {
	mr   uint32
	page uint64
}

func hashMTT(k mttKey) uint64 { return uint64(k.mr)<<40 ^ k.page }

// hashIdentity is the hash a QPC cache would use: the QPN itself.
func hashIdentity(k uint32) uint64 { return uint64(k) }

// hashCoarse maps four keys to each hash, so equal tags with unequal keys,
// long probe runs and crowded sets all occur.
func hashCoarse(k uint32) uint64 { return uint64(k >> 2) }

// diffGeometries covers every shape the NIC configures: direct-mapped,
// narrow and wide sets, partial sets dropped, non-power-of-two set counts,
// fully associative small (scanned) and large (indexed), and disabled.
var diffGeometries = []struct {
	name string
	cfg  Config
}{
	{"direct-mapped", Config{Name: "t", CapacityBytes: 64 * 8, EntryBytes: 8, Ways: 1}},
	{"2-way", Config{Name: "t", CapacityBytes: 64 * 8, EntryBytes: 8, Ways: 2}},
	{"8-way", Config{Name: "t", CapacityBytes: 128 * 8, EntryBytes: 8, Ways: 8}},
	{"8-way-partial-set", Config{Name: "t", CapacityBytes: 100 * 8, EntryBytes: 8, Ways: 8}},
	{"3-way-10-sets", Config{Name: "t", CapacityBytes: 30 * 8, EntryBytes: 8, Ways: 3}},
	{"24-way-5-sets", Config{Name: "t", CapacityBytes: 120 * 8, EntryBytes: 8, Ways: 24}},
	{"32-way-32-sets", Config{Name: "t", CapacityBytes: 1024 * 8, EntryBytes: 8, Ways: 32}},
	{"full-small", Config{Name: "t", CapacityBytes: 16 * 64, EntryBytes: 64, Ways: 0}},
	{"full-large", Config{Name: "t", CapacityBytes: 2000 * 8, EntryBytes: 8, Ways: 0}},
	{"disabled", Config{Name: "t", CapacityBytes: 0, EntryBytes: 256}},
}

func TestDifferential(t *testing.T) {
	ops := 10000
	if testing.Short() {
		ops = 2000
	}
	for _, g := range diffGeometries {
		for _, cfg := range []Config{g.cfg, withPolicy(g.cfg, FIFO)} {
			for _, indexed := range []bool{false, true} {
				name := fmt.Sprintf("%s/%v/indexed=%v", g.name, cfg.Policy, indexed)
				g := struct{ cfg Config }{cfg}
				for seed := uint64(1); seed <= 2; seed++ {
					t.Run(fmt.Sprintf("%s/identity/seed=%d", name, seed), func(t *testing.T) {
						runDifferential(t, g.cfg, indexed, seed, ops, hashIdentity, func(i int) uint32 { return uint32(i) })
					})
					t.Run(fmt.Sprintf("%s/coarse/seed=%d", name, seed), func(t *testing.T) {
						runDifferential(t, g.cfg, indexed, seed, ops, hashCoarse, func(i int) uint32 { return uint32(i) })
					})
					t.Run(fmt.Sprintf("%s/mtt-key/seed=%d", name, seed), func(t *testing.T) {
						runDifferential(t, g.cfg, indexed, seed, ops, hashMTT, func(i int) mttKey { return mttKey{uint32(i % 3), uint64(i / 3)} })
					})
				}
			}
		}
	}
}

func withPolicy(c Config, p Policy) Config {
	c.Policy = p
	return c
}

type opKind int

const (
	opGet opKind = iota
	opLookup
	opFill
	opPeek
	opInvalidate
	opInvalidateFunc
	opFlush
	opResetStats
)

// opWeights is the workload mix, in parts per thousand: mostly the NIC's
// lookup path, some direct fills, and the rarer control-path operations.
var opWeights = []struct {
	op     opKind
	weight int
}{
	{opGet, 450}, {opLookup, 200}, {opFill, 180}, {opPeek, 50},
	{opInvalidate, 105}, {opInvalidateFunc, 10}, {opFlush, 3}, {opResetStats, 2},
}

func pickOp(r *rand.Rand) opKind {
	n := r.IntN(1000)
	for _, w := range opWeights {
		if n < w.weight {
			return w.op
		}
		n -= w.weight
	}
	panic("opWeights do not sum to 1000")
}

// keySource draws key numbers from a skewed mix: a Zipf hot set, uniform
// keys over a universe three times the capacity, and a sequential scan that
// defeats LRU.
type keySource struct {
	r        *rand.Rand
	zipf     *rand.Zipf
	universe int
	next     int
}

func newKeySource(r *rand.Rand, universe int) *keySource {
	return &keySource{r: r, zipf: rand.NewZipf(r, 1.2, 1, uint64(universe-1)), universe: universe}
}

func (s *keySource) key() int {
	switch p := s.r.IntN(10); {
	case p < 6:
		return int(s.zipf.Uint64())
	case p < 8:
		return s.r.IntN(s.universe)
	default:
		s.next = (s.next + 1) % s.universe
		return s.next
	}
}

func runDifferential[K comparable](t *testing.T, cfg Config, indexed bool, seed uint64, ops int, hash func(K) uint64, mk func(int) K) {
	g, err := geometryOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := build[K, uint64](cfg, g, hash, indexed)
	o := newOracle(cfg, hash)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	keys := newKeySource(r, 3*c.Entries()+64)

	// load is the host-table read: deterministic per key, absent for some.
	var loads, oracleLoads int
	load := func(k K) (uint64, bool) { loads++; return hash(k)*7 + 1, hash(k)%13 != 0 }
	oracleLoad := func(k K) (uint64, bool) { oracleLoads++; return hash(k)*7 + 1, hash(k)%13 != 0 }
	reset := false

	for i := range ops {
		k := mk(keys.key())
		op := pickOp(r)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d op %d (%d on %v): %s", seed, i, op, k, fmt.Sprintf(format, args...))
		}
		if got, want := c.Set(k), o.set(k); got != want {
			fail("Set = %d, oracle %d", got, want)
		}
		switch op {
		case opGet:
			v, ok, hit := c.Get(k, load)
			wv, wok, whit := o.get(k, oracleLoad)
			if v != wv || ok != wok || hit != whit || loads != oracleLoads {
				fail("Get = %d,%v,%v (loads %d), oracle %d,%v,%v (loads %d)", v, ok, hit, loads, wv, wok, whit, oracleLoads)
			}
		case opLookup:
			v, ok := c.Lookup(k)
			if wv, wok := o.lookup(k); v != wv || ok != wok {
				fail("Lookup = %d,%v, oracle %d,%v", v, ok, wv, wok)
			}
		case opFill:
			v := r.Uint64()
			ek, ev, e := c.Fill(k, v)
			if wk, wv, we := o.fill(k, v); ek != wk || ev != wv || e != we {
				fail("Fill evicted %v,%d,%v, oracle %v,%d,%v", ek, ev, e, wk, wv, we)
			}
		case opPeek:
			v, ok := c.Peek(k)
			if wv, wok := o.peek(k); v != wv || ok != wok {
				fail("Peek = %d,%v, oracle %d,%v", v, ok, wv, wok)
			}
		case opInvalidate:
			if got, want := c.Invalidate(k), o.invalidate(k); got != want {
				fail("Invalidate = %v, oracle %v", got, want)
			}
		case opInvalidateFunc:
			m := uint64(r.IntN(7) + 2)
			f := func(k K, v uint64) bool { return hash(k)%m == 0 || v%5 == 0 }
			if got, want := c.InvalidateFunc(f), o.invalidateFunc(f); got != want {
				fail("InvalidateFunc = %d, oracle %d", got, want)
			}
		case opFlush:
			c.Flush()
			o.flush()
		case opResetStats:
			c.ResetStats()
			o.st = Stats{}
			reset = true
		}
		st := c.Stats()
		if want := o.stats(); st != want {
			fail("Stats = %+v, oracle %+v", st, want)
		}
		if !reset && uint64(st.Entries) != st.Fills-st.Evictions-st.Invalidations {
			fail("Entries %d != Fills-Evictions-Invalidations in %+v", st.Entries, st)
		}
		if i%256 == 0 || i == ops-1 {
			for s := range c.Sets() {
				if got, want := setOrder(t, c, s), o.keysMRU(s); !slices.Equal(got, want) {
					fail("set %d MRU order %v, oracle %v", s, got, want)
				}
			}
			checkIndex(t, c)
		}
	}
}

// setOrder returns the keys of one set, most recently used first, checking
// the list invariants on the way: exactly Ways slots, all of this set, and
// free slots only after every valid one.
func setOrder[K comparable, V any](t *testing.T, c *Cache[K, V], set int) []K {
	t.Helper()
	var ks []K
	free, n := false, 0
	head := c.lru.sentinel(set)
	for s := c.lru.links[head].next; s != head; s = c.lru.links[s].next {
		n++
		switch {
		case n > c.ways:
			t.Fatalf("set %d list does not close after %d slots", set, c.ways)
		case int(s)/c.ways != set:
			t.Fatalf("slot %d on the list of set %d", s, set)
		case !c.used(s):
			free = true
		case free:
			t.Fatalf("set %d: valid slot %d after a free slot", set, s)
		default:
			ks = append(ks, c.keys[s])
		}
	}
	if n != c.ways {
		t.Fatalf("set %d list has %d slots, want %d", set, n, c.ways)
	}
	return ks
}

// checkIndex checks that an indexed cache's index holds exactly the valid
// slots, each under its own key's tag.
func checkIndex[K comparable, V any](t *testing.T, c *Cache[K, V]) {
	t.Helper()
	if !c.indexed {
		return
	}
	n := 0
	for i, b := range c.idx.buckets {
		if b.ref == 0 {
			continue
		}
		n++
		if s := int32(b.ref - 1); !c.used(s) || tagOf(c.tags[s]) != b.tag {
			t.Fatalf("bucket %d refers to slot %d (used %v) with tag %#x", i, s, c.used(s), b.tag)
		}
	}
	if n != c.count {
		t.Fatalf("index holds %d slots, cache %d entries", n, c.count)
	}
}
