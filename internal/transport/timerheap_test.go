package transport

import (
	"math/rand/v2"
	"testing"
)

// TestTimerHeap: the typed timer heap under random pushes, deadline
// changes and removals keeps the heap order and each QP's index of its
// entry, and gives the deadlines back in order.
func TestTimerHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h timerHeap
	var in []*QP // the QPs with an entry
	check := func(step int) {
		for i, e := range h {
			if e.qp.timer.heapPos != i {
				t.Fatalf("step %d: entry %d's QP says it is at %d", step, i, e.qp.timer.heapPos)
			}
			if i > 0 && h[(i-1)/2].at > e.at {
				t.Fatalf("step %d: entry %d (%d) above its parent (%d)", step, i, e.at, h[(i-1)/2].at)
			}
		}
	}
	for step := range 5000 {
		switch op := r.IntN(4); {
		case op == 0 || len(in) == 0:
			qp := &QP{}
			h.push(timerEntry{at: r.Int64N(1000) + 1, qp: qp})
			in = append(in, qp)
		case op == 1:
			qp := in[r.IntN(len(in))]
			h[qp.timer.heapPos].at = r.Int64N(1000) + 1
			h.fix(qp.timer.heapPos)
		default:
			k := r.IntN(len(in))
			qp := in[k]
			if got := h.remove(qp.timer.heapPos); got.qp != qp {
				t.Fatalf("step %d: removed another QP's entry", step)
			}
			in = append(in[:k], in[k+1:]...)
		}
		check(step)
	}
	last := int64(0)
	for len(h) > 0 {
		e := h.remove(0)
		if e.at < last {
			t.Fatalf("deadline %d after %d", e.at, last)
		}
		last = e.at
		check(-1)
	}
}
