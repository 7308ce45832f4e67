package transport

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/wire"
)

// AHTable is the NIC's address handle table: the AHs by number, as a UD
// send WQE names its destination (queue.WQEAH), the way a NIC keeps its
// address vectors in a table in host memory (rxe's AH pool). The engine
// looks an AH up when it fetches the WQE and checks that it belongs to
// the QP's protection domain. Its slots come in chunks, allocated as AHs
// are made: a NIC that makes none (most) keeps none.
type AHTable struct {
	chunks [ahChunks]atomic.Pointer[ahChunk]

	mu   sync.Mutex
	free []uint32
	next uint32 // numbers below it have been handed out (0 is none)
	used int
}

// The table's shape: MaxAH numbers, 1 to MaxAH (0 names no AH).
const (
	ahChunkLen = 256
	ahChunks   = 256
	// MaxAH is the number of address handles a NIC holds (max_ah).
	MaxAH = ahChunkLen*ahChunks - 1
)

type ahChunk [ahChunkLen]atomic.Pointer[AH]

// ErrNoAH is New's error when the table is full.
var ErrNoAH = errors.New("transport: the address handle table is full")

// New makes an address handle of r for protection domain pd and gives it
// a number; destroy, if set, runs when the application destroys it (the
// device releases its reference on the PD).
func (t *AHTable) New(r wire.Route, pd uint32, destroy func() error) (*AH, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var num uint32
	if n := len(t.free); n > 0 {
		num = t.free[n-1]
		t.free = t.free[:n-1]
	} else if t.next < MaxAH {
		t.next++
		num = t.next
	} else {
		return nil, ErrNoAH
	}
	c := t.chunks[num/ahChunkLen].Load()
	if c == nil {
		c = new(ahChunk)
		t.chunks[num/ahChunkLen].Store(c)
	}
	a := &AH{Route: r, PD: pd, Num: num, table: t, destroy: destroy}
	c[num%ahChunkLen].Store(a)
	t.used++
	return a, nil
}

// Get returns the AH with number num, or nil.
func (t *AHTable) Get(num uint32) *AH {
	if t == nil || num == 0 || num > MaxAH {
		return nil
	}
	c := t.chunks[num/ahChunkLen].Load()
	if c == nil {
		return nil
	}
	return c[num%ahChunkLen].Load()
}

// Len returns the number of AHs in the table.
func (t *AHTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used
}

// release takes a out of the table; its number may be given again.
func (t *AHTable) release(a *AH) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.chunks[a.Num/ahChunkLen].Load()
	if c == nil || c[a.Num%ahChunkLen].Load() != a {
		return
	}
	c[a.Num%ahChunkLen].Store(nil)
	t.free = append(t.free, a.Num)
	t.used--
}
