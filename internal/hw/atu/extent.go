package atu

import "sort"

// extentAlloc hands out contiguous ranges of MTT indices, as a driver
// carves an MR's page list out of the device's global MTT. First fit over
// a sorted list of free extents; freed neighbours merge, and a free extent
// at the top shrinks the table's high-water mark.
type extentAlloc struct {
	free []extent // sorted by start, never adjacent
	top  uint32   // indices [0, top) have been handed out at least once
}

type extent struct{ start, n uint32 }

func (a *extentAlloc) alloc(n uint32) (uint32, bool) {
	if n == 0 {
		return a.top, true
	}
	for i, e := range a.free {
		if e.n >= n {
			if e.n == n {
				a.free = append(a.free[:i], a.free[i+1:]...)
			} else {
				a.free[i] = extent{e.start + n, e.n - n}
			}
			return e.start, true
		}
	}
	if a.top+n < a.top { // 2^32 MTT entries is far past any real table
		return 0, false
	}
	base := a.top
	a.top += n
	return base, true
}

func (a *extentAlloc) release(start, n uint32) {
	if n == 0 {
		return
	}
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].start > start })
	// Merge with the previous and next extents when they touch.
	if i > 0 && a.free[i-1].start+a.free[i-1].n == start {
		i--
		a.free[i].n += n
	} else {
		a.free = append(a.free, extent{})
		copy(a.free[i+1:], a.free[i:])
		a.free[i] = extent{start, n}
	}
	if i+1 < len(a.free) && a.free[i].start+a.free[i].n == a.free[i+1].start {
		a.free[i].n += a.free[i+1].n
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if last := len(a.free) - 1; last >= 0 && a.free[last].start+a.free[last].n == a.top {
		a.top = a.free[last].start
		a.free = a.free[:last]
	}
}

// used returns how many indices are allocated.
func (a *extentAlloc) used() uint32 {
	u := a.top
	for _, e := range a.free {
		u -= e.n
	}
	return u
}
