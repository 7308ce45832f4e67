package mem

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLineOrder checks the heap against sorting (a differential test):
// entries pop in (due, seq) order whatever the order of pushes and pops.
func TestLineOrder(t *testing.T) {
	for _, dues := range []int64{1, 4, 1000} { // few distinct dues means many ties
		r := rand.New(rand.NewPCG(1, uint64(dues)))
		var l line
		var model []entry
		for seq := uint64(1); seq <= 2000; seq++ {
			e := entry{due: r.Int64N(dues), seq: seq}
			wantTop := len(model) == 0 || e.before(slices.MinFunc(model, cmp))
			if top := l.push(e); top != wantTop {
				t.Fatalf("push(%+v) reported top %v, want %v", e, top, wantTop)
			}
			model = append(model, e)
			if r.IntN(3) == 0 { // interleave pops with pushes
				slices.SortFunc(model, cmp)
				if got := l.pop(); got != model[0] {
					t.Fatalf("pop = %+v, want %+v", got, model[0])
				}
				model = model[1:]
			}
		}
		slices.SortFunc(model, cmp)
		for _, want := range model {
			if got := l.pop(); got != want {
				t.Fatalf("pop = %+v, want %+v", got, want)
			}
		}
		if len(l) != 0 {
			t.Fatalf("%d entries left", len(l))
		}
	}
}

func cmp(a, b entry) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}
