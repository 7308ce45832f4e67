package cache

// lru keeps one circular doubly linked list per set, in fixed arrays, that
// orders every slot of the set from most to least recently used. Free slots
// are kept at the least recently used end, so the tail of a set is always
// the slot to fill next: a free slot if there is one, otherwise the LRU entry
// to evict. Node i < entries is slot i; node entries+s is the sentinel of
// set s.
type lru struct {
	links   []link
	entries int32
}

// link holds a node's neighbours: prev towards the MRU end, next towards
// the LRU end.
type link struct{ prev, next int32 }

// newLRU builds the lists with every slot of every set on its set's list.
func newLRU(sets, ways int) lru {
	l := lru{links: make([]link, sets*ways+sets), entries: int32(sets * ways)}
	for s := range sets {
		head := l.sentinel(s)
		l.links[head] = link{prev: head, next: head}
		for w := range ways {
			l.pushBack(s, int32(s*ways+w))
		}
	}
	return l
}

func (l *lru) sentinel(set int) int32 { return l.entries + int32(set) }

// tail returns the set's least recently used slot.
func (l *lru) tail(set int) int32 { return l.links[l.sentinel(set)].prev }

// touch makes slot the most recently used of its set.
func (l *lru) touch(set int, slot int32) {
	head := l.sentinel(set)
	if l.links[head].next == slot {
		return
	}
	l.unlink(slot)
	l.insertAfter(head, slot)
}

// demote makes slot the least recently used of its set, where a freed slot
// waits to be filled.
func (l *lru) demote(set int, slot int32) {
	l.unlink(slot)
	l.pushBack(set, slot)
}

func (l *lru) pushBack(set int, slot int32) {
	l.insertAfter(l.links[l.sentinel(set)].prev, slot)
}

func (l *lru) insertAfter(at, n int32) {
	next := l.links[at].next
	l.links[n] = link{prev: at, next: next}
	l.links[at].next = n
	l.links[next].prev = n
}

func (l *lru) unlink(n int32) {
	ln := l.links[n]
	l.links[ln.prev].next = ln.next
	l.links[ln.next].prev = ln.prev
}
