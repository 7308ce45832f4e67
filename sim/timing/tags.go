package timing

import "github.com/rnic/rnic/sim"

// tagHeap is a binary min-heap of the times at which read tags become
// free.
type tagHeap []sim.Time

// take removes the k earliest-free tags (k <= len) and returns when the
// last of them is free. Their slots are kept at the end of the slice for
// give.
func (h tagHeap) take(k int) sim.Time {
	var latest sim.Time
	n := len(h)
	for i := range k {
		top := h[0]
		latest = max(latest, top)
		last := n - 1 - i
		h[0], h[last] = h[last], top
		h[:last].down(0)
	}
	return latest
}

// give returns the k tags taken last, all free again at t.
func (h tagHeap) give(k int, t sim.Time) {
	n := len(h)
	for i := n - k; i < n; i++ {
		h[i] = t
		h[:i+1].up(i)
	}
}

func (h tagHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h tagHeap) down(i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
