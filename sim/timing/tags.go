package timing

import "github.com/rnic/rnic/sim"

// tagPool holds the times at which the link's read tags become free, as a
// min-heap of batches: the tags a read takes are given back together, at
// the time it completes, so one entry stands for all of them. A read of n
// request TLPs then costs a heap operation or two instead of n pops and n
// pushes on a heap of every tag (a 64 KiB payload read is 128 requests).
type tagPool struct {
	h    []tagBatch
	size int // tags in all
}

type tagBatch struct {
	free sim.Time // when these tags are free
	n    int      // how many
}

func newTagPool(size int) *tagPool {
	return &tagPool{h: []tagBatch{{free: 0, n: size}}, size: size}
}

// take removes the k earliest-free tags (0 < k <= size) and returns when
// the last of them is free.
func (p *tagPool) take(k int) sim.Time {
	var latest sim.Time
	for k > 0 {
		b := &p.h[0]
		latest = b.free // the heap's minimum only grows while taking
		if b.n > k {
			b.n -= k
			break
		}
		k -= b.n
		p.pop()
	}
	return latest
}

// give returns k tags, free again at t.
func (p *tagPool) give(k int, t sim.Time) {
	p.h = append(p.h, tagBatch{free: t, n: k})
	h := p.h
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent].free <= h[i].free {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (p *tagPool) pop() {
	h := p.h
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	p.h = h
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].free < h[c].free {
			c++
		}
		if h[i].free <= h[c].free {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
