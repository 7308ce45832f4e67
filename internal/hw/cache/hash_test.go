package cache

import (
	"fmt"
	"testing"
)

// TestSetSpread checks that keys with a regular stride, as QPNs and page
// numbers have, spread over the sets even with the identity hash. Without
// the mixing step a stride of the set count would put every key in set 0.
func TestSetSpread(t *testing.T) {
	const sets, perSet = 64, 64
	for _, stride := range []uint64{1, 3, sets, 4096, 1 << 20, 1 << 32} {
		for _, nsets := range []int{sets, sets - 1} {
			t.Run(fmt.Sprintf("stride=%d/sets=%d", stride, nsets), func(t *testing.T) {
				c, err := New[uint64, struct{}](Config{Name: "t", CapacityBytes: nsets * 4 * 8, EntryBytes: 8, Ways: 4},
					func(k uint64) uint64 { return k })
				if err != nil {
					t.Fatal(err)
				}
				count := make([]int, c.Sets())
				for i := range uint64(nsets * perSet) {
					count[c.Set(i*stride)]++
				}
				for s, n := range count {
					if n < perSet/2 || n > 2*perSet {
						t.Fatalf("set %d holds %d of %d keys (mean %d)", s, n, nsets*perSet, perSet)
					}
				}
			})
		}
	}
}
