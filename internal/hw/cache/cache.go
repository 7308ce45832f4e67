package cache

import "fmt"

// scanWays is the widest set searched by scanning its tags; wider sets use
// the index. Measured on 4096-entry caches (BenchmarkScanVsIndex), a hit
// costs about the same either way at 8 ways, and the scan grows by about a
// nanosecond per way beyond while the index stays flat.
const scanWays = 8

// Cache is a set-associative cache of entries of a host-memory table,
// modelling one SRAM of the RNIC. Construct it with New. It is not safe for
// concurrent use: one NIC engine owns it.
type Cache[K comparable, V any] struct {
	cfg     Config
	hash    func(K) uint64
	sets    int
	ways    int
	entries int
	setMask uint64 // sets-1 when sets is a power of two above 1, else 0
	indexed bool   // find by idx rather than by scanning the set

	// Slot i holds way i%ways of set i/ways.
	tags []uint64 // slotTag of the key's mixed hash; 0 marks a free slot
	// fps holds, for a set of at most 8 ways that is scanned, one byte
	// per way in one word: the fingerprint of the way's tag (0 when the
	// way is free). A scan compares all of them at once and only the
	// ways whose byte matches compare their tag and key.
	fps  []uint64
	keys []K
	vals []V
	lru  lru
	idx  index

	rng uint64 // Random's generator state (splitmix64)

	count int // slots in use
	st    Stats
	names [numCounters]string
}

// New returns an empty cache with the geometry of cfg. hash maps a key to 64
// bits; it need not mix well (the identity is fine for integer keys) but
// equal keys must hash equally. New fails, wrapping ErrConfig, when cfg is
// invalid or hash is nil.
func New[K comparable, V any](cfg Config, hash func(K) uint64) (*Cache[K, V], error) {
	g, err := geometryOf(cfg)
	if err != nil {
		return nil, err
	}
	if hash == nil {
		return nil, fmt.Errorf("cache %q: %w: hash is nil", cfg.Name, ErrConfig)
	}
	return build[K, V](cfg, g, hash, g.ways > scanWays), nil
}

// build allocates every array the cache will ever use. indexed is a
// parameter so tests can run narrow sets through the index too.
func build[K comparable, V any](cfg Config, g geometry, hash func(K) uint64, indexed bool) *Cache[K, V] {
	c := &Cache[K, V]{
		cfg:     cfg,
		hash:    hash,
		sets:    g.sets,
		ways:    g.ways,
		entries: g.entries,
		indexed: indexed && g.entries > 0,
		tags:    make([]uint64, g.entries),
		keys:    make([]K, g.entries),
		vals:    make([]V, g.entries),
		lru:     newLRU(g.sets, g.ways),
		names:   counterNames(cfg.Name),
	}
	c.rng = cfg.Seed
	if c.rng == 0 {
		for _, b := range []byte(cfg.Name) {
			c.rng = c.rng*131 + uint64(b)
		}
		c.rng = mix(c.rng ^ 0x9e3779b97f4a7c15)
	}
	if g.sets > 1 && g.sets&(g.sets-1) == 0 {
		c.setMask = uint64(g.sets - 1)
	}
	if c.indexed {
		c.idx = newIndex(g.entries)
	} else if g.entries > 0 && g.ways <= fpWays {
		c.fps = make([]uint64, g.sets)
	}
	return c
}

// Config returns the configuration the cache was built from, as given.
func (c *Cache[K, V]) Config() Config { return c.cfg }

// Sets returns the number of sets; 0 when the cache is disabled.
func (c *Cache[K, V]) Sets() int { return c.sets }

// Ways returns the associativity; 0 when the cache is disabled.
func (c *Cache[K, V]) Ways() int { return c.ways }

// Entries returns the capacity in entries, Sets()*Ways(), after rounding
// down to whole entries and whole sets.
func (c *Cache[K, V]) Entries() int { return c.entries }

// Set returns the set k maps to, or -1 when the cache is disabled, so that
// experiments can study conflict misses.
func (c *Cache[K, V]) Set(k K) int {
	if c.entries == 0 {
		return -1
	}
	return c.setOf(mix(c.hash(k)))
}
