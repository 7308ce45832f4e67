package cache

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLRUOrder drives one 4-way set with a script of operations, each a
// letter and a key: F fill, L lookup, G get (load succeeds), P peek,
// I invalidate, X flush. It runs with both the scanned and the indexed set.
func TestLRUOrder(t *testing.T) {
	tests := []struct {
		name        string
		script      string
		wantMRU     []uint32 // keys of the set, most recently used first
		wantEvicted []uint32 // keys Fill reported evicted, in order
	}{
		{"fills stack up", "F1 F2 F3 F4", []uint32{4, 3, 2, 1}, nil},
		{"hit moves to front", "F1 F2 F3 F4 L2", []uint32{2, 4, 3, 1}, nil},
		{"hit on front stays", "F1 F2 F3 F4 L4", []uint32{4, 3, 2, 1}, nil},
		{"miss changes nothing", "F1 F2 F3 F4 L9", []uint32{4, 3, 2, 1}, nil},
		{"peek does not move", "F1 F2 F3 F4 P1", []uint32{4, 3, 2, 1}, nil},
		{"full set evicts LRU", "F1 F2 F3 F4 F5", []uint32{5, 4, 3, 2}, []uint32{1}},
		{"hit protects from eviction", "F1 F2 F3 F4 L1 F5", []uint32{5, 1, 4, 3}, []uint32{2}},
		{"update in place moves to front", "F1 F2 F3 F4 F1 F5", []uint32{5, 1, 4, 3}, []uint32{2}},
		{"get miss fills over the LRU", "F1 F2 F3 F4 G7", []uint32{7, 4, 3, 2}, nil},
		{"get hit moves to front", "F1 F2 F3 F4 G2", []uint32{2, 4, 3, 1}, nil},
		{"invalidate frees a way", "F1 F2 F3 F4 I3 F5", []uint32{5, 4, 2, 1}, nil},
		{"invalidate LRU then two fills", "F1 F2 F3 F4 I1 F5 F6", []uint32{6, 5, 4, 3}, []uint32{2}},
		{"scan evicts in order", "F1 F2 F3 F4 F5 F6 F7", []uint32{7, 6, 5, 4}, []uint32{1, 2, 3}},
		{"flush then refill", "F1 F2 F3 F4 X0 F8 F9", []uint32{9, 8}, nil},
	}
	for _, indexed := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("indexed=%v/%s", indexed, tt.name), func(t *testing.T) {
				cfg := Config{Name: "qpc", CapacityBytes: 4 * 256, EntryBytes: 256}
				g, _ := geometryOf(cfg)
				c := build[uint32, uint32](cfg, g, hashIdentity, indexed)
				var evicted []uint32
				for _, step := range strings.Fields(tt.script) {
					k64, err := strconv.ParseUint(step[1:], 10, 32)
					if err != nil {
						t.Fatalf("bad step %q", step)
					}
					k := uint32(k64)
					switch step[0] {
					case 'F':
						if ek, ev, ok := c.Fill(k, k*10); ok {
							if ev != ek*10 {
								t.Errorf("evicted %d with value %d, want %d", ek, ev, ek*10)
							}
							evicted = append(evicted, ek)
						}
					case 'L':
						c.Lookup(k)
					case 'G':
						c.Get(k, func(k uint32) (uint32, bool) { return k * 10, true })
					case 'P':
						c.Peek(k)
					case 'I':
						c.Invalidate(k)
					case 'X':
						c.Flush()
					}
				}
				if got := setOrder(t, c, 0); !slices.Equal(got, tt.wantMRU) {
					t.Errorf("MRU order %v, want %v", got, tt.wantMRU)
				}
				if !slices.Equal(evicted, tt.wantEvicted) {
					t.Errorf("evicted %v, want %v", evicted, tt.wantEvicted)
				}
			})
		}
	}
}
