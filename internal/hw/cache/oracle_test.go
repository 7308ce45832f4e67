package cache

import "slices"

// oracle is the most obvious set-associative LRU (or FIFO) cache: a slice
// per set, most recently used (filled) first, searched and reordered by copying. It derives
// the geometry and the set index from the documentation, not from the
// package, and is what the differential test holds Cache to.
type oracle[K comparable] struct {
	fifo       bool // FIFO: hits and updates leave the order alone
	sets, ways int
	hash       func(K) uint64
	lists      [][]pair[K]
	st         Stats
}

type pair[K comparable] struct {
	k K
	v uint64
}

func newOracle[K comparable](cfg Config, hash func(K) uint64) *oracle[K] {
	entries := 0
	if cfg.CapacityBytes > 0 {
		entries = cfg.CapacityBytes / cfg.EntryBytes
	}
	ways := cfg.Ways
	if ways == 0 || ways >= entries {
		ways = entries
	}
	sets := 0
	if ways > 0 {
		sets = entries / ways
	}
	return &oracle[K]{fifo: cfg.Policy == FIFO, sets: sets, ways: ways, hash: hash, lists: make([][]pair[K], sets)}
}

// fmix64 is MurmurHash3's finalizer, written out from its reference.
func fmix64(h uint64) uint64 {
	h = (h ^ h>>33) * 0xff51afd7ed558ccd
	h = (h ^ h>>33) * 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}

func (o *oracle[K]) set(k K) int {
	if o.sets == 0 {
		return -1
	}
	return int(fmix64(o.hash(k)) % uint64(o.sets))
}

func (o *oracle[K]) pos(k K) (list []pair[K], i int) {
	if o.sets == 0 {
		return nil, -1
	}
	list = o.lists[o.set(k)]
	return list, slices.IndexFunc(list, func(p pair[K]) bool { return p.k == k })
}

// toFront moves entry i of k's set to the front.
func (o *oracle[K]) toFront(k K, i int) {
	s := o.set(k)
	p := o.lists[s][i]
	o.lists[s] = slices.Insert(slices.Delete(o.lists[s], i, i+1), 0, p)
}

func (o *oracle[K]) lookup(k K) (uint64, bool) {
	list, i := o.pos(k)
	if i < 0 {
		o.st.Misses++
		return 0, false
	}
	o.st.Hits++
	v := list[i].v
	if !o.fifo {
		o.toFront(k, i)
	}
	return v, true
}

func (o *oracle[K]) fill(k K, v uint64) (ek K, ev uint64, evicted bool) {
	if o.sets == 0 {
		return ek, 0, false
	}
	list, i := o.pos(k)
	if i >= 0 {
		o.st.Updates++
		list[i].v = v
		if !o.fifo {
			o.toFront(k, i)
		}
		return ek, 0, false
	}
	s := o.set(k)
	if len(list) == o.ways {
		last := list[len(list)-1]
		ek, ev, evicted = last.k, last.v, true
		o.lists[s] = list[:len(list)-1]
		o.st.Evictions++
	}
	o.st.Fills++
	o.lists[s] = slices.Insert(o.lists[s], 0, pair[K]{k, v})
	return ek, ev, evicted
}

func (o *oracle[K]) get(k K, load func(K) (uint64, bool)) (uint64, bool, bool) {
	if v, ok := o.lookup(k); ok {
		return v, true, true
	}
	v, ok := load(k)
	if ok {
		o.fill(k, v)
	}
	return v, ok, false
}

func (o *oracle[K]) peek(k K) (uint64, bool) {
	list, i := o.pos(k)
	if i < 0 {
		return 0, false
	}
	return list[i].v, true
}

func (o *oracle[K]) invalidate(k K) bool {
	_, i := o.pos(k)
	if i < 0 {
		return false
	}
	s := o.set(k)
	o.lists[s] = slices.Delete(o.lists[s], i, i+1)
	o.st.Invalidations++
	return true
}

func (o *oracle[K]) invalidateFunc(f func(K, uint64) bool) int {
	n := 0
	for s := range o.lists {
		before := len(o.lists[s])
		o.lists[s] = slices.DeleteFunc(o.lists[s], func(p pair[K]) bool { return f(p.k, p.v) })
		n += before - len(o.lists[s])
	}
	o.st.Invalidations += uint64(n)
	return n
}

func (o *oracle[K]) flush() {
	for s := range o.lists {
		o.st.Invalidations += uint64(len(o.lists[s]))
		o.lists[s] = nil
	}
}

func (o *oracle[K]) stats() Stats {
	s := o.st
	s.Capacity = o.sets * o.ways
	for _, l := range o.lists {
		s.Entries += len(l)
	}
	return s
}

// keysMRU returns the keys of one set, most recently used first.
func (o *oracle[K]) keysMRU(set int) []K {
	var ks []K
	for _, p := range o.lists[set] {
		ks = append(ks, p.k)
	}
	return ks
}
