package timing

import "github.com/rnic/rnic/sim"

// tagPool holds the times at which the link's read tags become free, as
// batches: the tags a read takes are given back together, at the time it
// completes, so one entry stands for all of them (a 64 KiB payload read
// is 128 request TLPs). The batches are kept in order of their free
// times in a ring: reads mostly complete in the order they were issued,
// so a batch given back usually goes at the tail, and the earliest-free
// batches a read takes are at the head; each costs a step or two, where a
// heap of batches cost a sift through its depth.
type tagPool struct {
	ring []tagBatch // len a power of two, more than size
	head uint       // the earliest-free batch is ring[head&mask]
	n    uint       // batches held
	size int        // tags in all
}

type tagBatch struct {
	free sim.Time // when these tags are free
	n    int      // how many
}

func newTagPool(size int) *tagPool {
	c := 1
	for c <= size { // every batch holds a tag: at most size of them
		c *= 2
	}
	p := &tagPool{ring: make([]tagBatch, c), size: size, n: 1}
	p.ring[0] = tagBatch{free: 0, n: size}
	return p
}

func (p *tagPool) at(i uint) *tagBatch { return &p.ring[i&uint(len(p.ring)-1)] }

// take removes the k earliest-free tags (0 < k <= size) and returns when
// the last of them is free.
func (p *tagPool) take(k int) sim.Time {
	var latest sim.Time
	for k > 0 {
		b := p.at(p.head)
		latest = b.free // free times only grow along the ring
		if b.n > k {
			b.n -= k
			break
		}
		k -= b.n
		p.head++
		p.n--
	}
	return latest
}

// give returns k tags, free again at t.
func (p *tagPool) give(k int, t sim.Time) {
	i := p.head + p.n
	p.n++
	// Keep the order: it goes ahead of the later-free batches (a read
	// that completes before ones issued earlier).
	for ; i != p.head && p.at(i-1).free > t; i-- {
		*p.at(i) = *p.at(i - 1)
	}
	*p.at(i) = tagBatch{free: t, n: k}
}
