package atu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bitmapAlloc is the naive oracle of extentAlloc: one bit per MTT index.
// First fit over a bitmap: the lowest index that starts a run of n free
// indices below the high-water mark, else the mark itself, which then grows;
// the mark is always one past the highest index in use.
type bitmapAlloc struct{ used []bool }

func (b *bitmapAlloc) top() uint32 {
	t := len(b.used)
	for t > 0 && !b.used[t-1] {
		t--
	}
	return uint32(t)
}

// alloc returns where first fit puts n indices. A maximal free run below
// the top is an extent of extentAlloc's free list, so first fit over
// extents and over the bitmap agree.
func (b *bitmapAlloc) alloc(n uint32) uint32 {
	top := b.top()
	b.used = b.used[:top]
	for start := uint32(0); start < top; {
		if b.used[start] {
			start++
			continue
		}
		end := start
		for end < top && !b.used[end] {
			end++
		}
		if end-start >= n {
			b.mark(start, n, true)
			return start
		}
		start = end
	}
	b.used = append(b.used, make([]bool, n)...)
	b.mark(top, n, true)
	return top
}

func (b *bitmapAlloc) mark(start, n uint32, v bool) {
	for i := start; i < start+n; i++ {
		b.used[i] = v
	}
}

func (b *bitmapAlloc) count() uint32 {
	n := uint32(0)
	for _, u := range b.used {
		if u {
			n++
		}
	}
	return n
}

// checkExtents checks extentAlloc's invariants and its agreement with the
// bitmap: free extents are sorted, non-empty, never adjacent (merged),
// below the top and never ending at it (the top shrinks), and are exactly
// the bitmap's free runs.
func checkExtents(tb testing.TB, a *extentAlloc, b *bitmapAlloc) {
	tb.Helper()
	if a.top != b.top() {
		tb.Fatalf("top %d, oracle %d", a.top, b.top())
	}
	if a.used() != b.count() {
		tb.Fatalf("used() = %d, oracle %d", a.used(), b.count())
	}
	free := make([]bool, a.top)
	for i, e := range a.free {
		if e.n == 0 {
			tb.Fatalf("free extent %d is empty: %v", i, a.free)
		}
		if e.start+e.n > a.top || e.start+e.n < e.start {
			tb.Fatalf("free extent %v reaches past top %d", e, a.top)
		}
		if e.start+e.n == a.top {
			tb.Fatalf("free extent %v ends at the top %d: the top did not shrink", e, a.top)
		}
		if i > 0 && a.free[i-1].start+a.free[i-1].n >= e.start {
			tb.Fatalf("free extents %v and %v overlap, touch or are unsorted", a.free[i-1], e)
		}
		for j := e.start; j < e.start+e.n; j++ {
			free[j] = true
		}
	}
	for i := range a.top {
		if free[i] == b.used[i] {
			tb.Fatalf("index %d: free in extents %v, used in oracle %v", i, free[i], b.used[i])
		}
	}
}

// TestExtentAllocDifferential runs random allocate/release sequences on
// extentAlloc and on the bitmap oracle and compares every result: the
// allocator is how a driver carves each region's page list out of the
// device's global MTT, so a wrong answer would give two regions the same
// MTT entries.
func TestExtentAllocDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xe47))
			var a extentAlloc
			var b bitmapAlloc
			type ext struct{ start, n uint32 }
			var live []ext
			maxN := uint32(1 + rng.IntN(40))
			for step := range 3000 {
				if len(live) == 0 || rng.IntN(100) < 55 {
					n := 1 + rng.Uint32N(maxN)
					if rng.IntN(20) == 0 {
						n = 0 // alloc(0) takes nothing
					}
					top := a.top
					got, ok := a.alloc(n)
					if !ok {
						t.Fatalf("step %d: alloc(%d) failed", step, n)
					}
					if n == 0 {
						if got != top || a.top != top {
							t.Fatalf("step %d: alloc(0) = %d and top %d, want %d and top unchanged", step, got, a.top, top)
						}
						continue
					}
					if want := b.alloc(n); got != want {
						t.Fatalf("step %d: alloc(%d) = %d, first fit %d (free %v)", step, n, got, want, a.free)
					}
					for _, l := range live {
						if got < l.start+l.n && l.start < got+n {
							t.Fatalf("step %d: alloc(%d) = [%d, %d) overlaps live [%d, %d)", step, n, got, got+n, l.start, l.start+l.n)
						}
					}
					live = append(live, ext{got, n})
				} else {
					i := rng.IntN(len(live))
					e := live[i]
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
					a.release(e.start, e.n)
					b.mark(e.start, e.n, false)
				}
				checkExtents(t, &a, &b)
			}
			for _, e := range live { // release everything: back to empty
				a.release(e.start, e.n)
				b.mark(e.start, e.n, false)
				checkExtents(t, &a, &b)
			}
			if a.top != 0 || len(a.free) != 0 || a.used() != 0 {
				t.Fatalf("after releasing everything: top %d, free %v", a.top, a.free)
			}
		})
	}
}

// TestExtentAllocMerges checks each way a release joins its neighbours.
func TestExtentAllocMerges(t *testing.T) {
	tests := []struct {
		name     string
		release  [][2]uint32 // after allocating [0,2) [2,5) [5,6) [6,10) [10,12)
		wantFree []extent
		wantTop  uint32
	}{
		{"middle alone", [][2]uint32{{2, 3}}, []extent{{2, 3}}, 12},
		{"merge with previous", [][2]uint32{{2, 3}, {5, 1}}, []extent{{2, 4}}, 12},
		{"merge with next", [][2]uint32{{5, 1}, {2, 3}}, []extent{{2, 4}}, 12},
		{"merge with both", [][2]uint32{{2, 3}, {6, 4}, {5, 1}}, []extent{{2, 8}}, 12},
		{"two apart", [][2]uint32{{0, 2}, {5, 1}}, []extent{{0, 2}, {5, 1}}, 12},
		{"top shrinks", [][2]uint32{{10, 2}}, nil, 10},
		{"top shrinks over a merged run", [][2]uint32{{5, 1}, {6, 4}, {10, 2}}, nil, 5},
		{"top shrinks to zero", [][2]uint32{{2, 3}, {0, 2}, {6, 4}, {10, 2}, {5, 1}}, nil, 0},
		{"release of nothing", [][2]uint32{{3, 0}}, nil, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a extentAlloc
			for i, n := range []uint32{2, 3, 1, 4, 2} {
				if _, ok := a.alloc(n); !ok {
					t.Fatalf("alloc %d failed", i)
				}
			}
			for _, r := range tt.release {
				a.release(r[0], r[1])
			}
			if fmt.Sprint(a.free) != fmt.Sprint(tt.wantFree) || a.top != tt.wantTop {
				t.Fatalf("free %v top %d, want %v top %d", a.free, a.top, tt.wantFree, tt.wantTop)
			}
		})
	}
}

// TestExtentAllocFull checks that the allocator refuses to hand out
// indices past 2^32 rather than wrap onto entries in use.
func TestExtentAllocFull(t *testing.T) {
	a := extentAlloc{top: math.MaxUint32 - 9}
	if base, ok := a.alloc(9); !ok || base != math.MaxUint32-9 {
		t.Fatalf("alloc(9) with 10 indices left = %d, %v", base, ok)
	}
	// One index is left, but the high-water mark would be 2^32, which
	// a uint32 cannot hold.
	if base, ok := a.alloc(1); ok {
		t.Fatalf("alloc(1) at top %d = %d, want failure", a.top, base)
	}
	if base, ok := a.alloc(1 << 31); ok {
		t.Fatalf("alloc(2^31) at top %d = %d, want failure", a.top, base)
	}
	if a.top != math.MaxUint32 {
		t.Fatalf("failed allocations moved top to %d", a.top)
	}
	// Freed space below still serves.
	a.release(100, 50)
	if base, ok := a.alloc(50); !ok || base != 100 {
		t.Fatalf("alloc(50) into a freed extent = %d, %v", base, ok)
	}
}
