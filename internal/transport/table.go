package transport

import (
	"sync"
	"sync/atomic"
)

// Table is a host-memory context table (QPC, CQC): objects by number. The
// number is the slot index plus a base (QPNs 0 and 1 are the special QPs,
// so QP numbers start higher). Lookups are lock-free; allocation takes a
// lock. The engines read it on a cache miss.
type Table[T any] struct {
	base  uint32
	slots []atomic.Pointer[T]

	mu   sync.Mutex
	free []uint32
	next uint32
	used int
}

// NewTable returns a table of n slots whose numbers start at base.
func NewTable[T any](base uint32, n int) *Table[T] {
	return &Table[T]{base: base, slots: make([]atomic.Pointer[T], n)}
}

// Cap returns the number of slots.
func (t *Table[T]) Cap() int { return len(t.slots) }

// Len returns the number of objects.
func (t *Table[T]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used
}

// Alloc reserves a slot and returns its number and index.
func (t *Table[T]) Alloc() (num, index uint32, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.free); n > 0 {
		index = t.free[n-1]
		t.free = t.free[:n-1]
	} else if int(t.next) < len(t.slots) {
		index = t.next
		t.next++
	} else {
		return 0, 0, false
	}
	t.used++
	return index + t.base, index, true
}

// Set publishes v in slot index.
func (t *Table[T]) Set(index uint32, v *T) { t.slots[index].Store(v) }

// Release empties slot index and makes it reusable.
func (t *Table[T]) Release(index uint32) {
	t.slots[index].Store(nil)
	t.mu.Lock()
	t.free = append(t.free, index)
	t.used--
	t.mu.Unlock()
}

// Get returns the object with number num, or nil.
func (t *Table[T]) Get(num uint32) *T {
	i := num - t.base
	if num < t.base || int(i) >= len(t.slots) {
		return nil
	}
	return t.slots[i].Load()
}

// ByIndex returns the object in slot i, or nil.
func (t *Table[T]) ByIndex(i uint32) *T {
	if int(i) >= len(t.slots) {
		return nil
	}
	return t.slots[i].Load()
}

// Each calls f for every object, in slot order.
func (t *Table[T]) Each(f func(*T)) {
	for i := range t.slots {
		if v := t.slots[i].Load(); v != nil {
			f(v)
		}
	}
}
