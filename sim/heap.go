package sim

// entry is the heap's key for one scheduled event: ordered by time, then by
// sequence number, so events due at the same instant run in the order they
// were scheduled. The payload sits in Sim.slots[slot]; keeping the key at
// 24 bytes packs more children per cache line in the sift loops.
type entry struct {
	at   Time
	seq  uint64
	slot uint32
}

func (a entry) before(b entry) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// eventHeap is a 4-ary min-heap: half the depth of a binary heap, and the
// four children of a node are adjacent in memory. It is written out rather
// than going through container/heap, whose interface boxes every element.
type eventHeap []entry

const arity = 4

func (h *eventHeap) push(e entry) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// pop removes and returns the minimum; the heap must not be empty.
func (h *eventHeap) pop() entry {
	old := *h
	top := old[0]
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	if n > 1 {
		h.down(0)
	}
	return top
}

func (h eventHeap) up(i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / arity
		if !e.before(h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (h eventHeap) down(i int) {
	n := len(h)
	e := h[i]
	for {
		c := i*arity + 1
		if c >= n {
			break
		}
		best := c
		end := min(c+arity, n)
		for j := c + 1; j < end; j++ {
			if h[j].before(h[best]) {
				best = j
			}
		}
		if !h[best].before(e) {
			break
		}
		h[i] = h[best]
		i = best
	}
	h[i] = e
}

// init restores the heap property after arbitrary changes (compaction).
func (h eventHeap) init() {
	for i := (len(h) - 2) / arity; i >= 0; i-- {
		h.down(i)
	}
}
