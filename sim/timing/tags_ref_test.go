package timing

import (
	"math/rand/v2"
	"testing"

	"github.com/rnic/rnic/sim"
)

// refTagHeap is the per-tag heap that tagPool replaced, kept as its
// reference: a binary min-heap of the times at which read tags become
// free.
type refTagHeap []sim.Time

// take removes the k earliest-free tags (k <= len) and returns when the
// last of them is free. Their slots are kept at the end of the slice for
// give.
func (h refTagHeap) take(k int) sim.Time {
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
func (h refTagHeap) give(k int, t sim.Time) {
	n := len(h)
	for i := n - k; i < n; i++ {
		h[i] = t
		h[:i+1].up(i)
	}
}

func (h refTagHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h refTagHeap) down(i int) {
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

// TestTagPoolMatchesPerTagHeap drives the batched pool and a heap of
// single tags with the same seeded takes and gives: every take must return
// the same time.
func TestTagPoolMatchesPerTagHeap(t *testing.T) {
	for _, size := range []int{1, 3, 32, 256} {
		rng := rand.New(rand.NewPCG(uint64(size), 7))
		pool, ref := newTagPool(size), make(refTagHeap, size)
		now := sim.Time(0)
		for i := range 20000 {
			now += sim.Time(rng.IntN(50))
			k := 1 + rng.IntN(size)
			got, want := pool.take(k), ref.take(k)
			if got != want {
				t.Fatalf("size %d, op %d: take(%d) = %v, per-tag heap says %v", size, i, k, got, want)
			}
			// Completions are not in issue order: a later, smaller read
			// can finish first.
			done := max(now, got) + sim.Time(rng.IntN(2000))
			pool.give(k, done)
			ref.give(k, done)
		}
		if int(pool.n) > size {
			t.Fatalf("size %d: %d batches, more than tags", size, pool.n)
		}
	}
}
