package sched

import (
	"math/rand/v2"
	"testing"
)

// mustNew returns an arbiter for cfg or fails the test.
func mustNew(t testing.TB, cfg Config) *Arbiter {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return a
}

// engine drives an Arbiter as a protocol engine would: it takes a grant,
// sends packets from the queue's backlog while the grant allows (a packet
// starts while the bytes sent are below Grant.Bytes), and reports with Done.
type engine struct {
	a       *Arbiter
	rng     *rand.Rand
	lo, hi  []int // packet sizes of each queue: uniform in [lo, hi]
	backlog []int // packets left per queue; negative = endless
	head    []int // size of each queue's next packet, 0 = not drawn yet
	pkts    []uint64
	bytes   []uint64
}

// newEngine returns an engine over n queues whose packets are all size
// bytes and whose backlogs are endless.
func newEngine(a *Arbiter, n, size int) *engine {
	e := &engine{
		a: a, rng: rand.New(rand.NewPCG(1, 2)),
		lo: make([]int, n), hi: make([]int, n), backlog: make([]int, n),
		head: make([]int, n), pkts: make([]uint64, n), bytes: make([]uint64, n),
	}
	for q := range n {
		e.lo[q], e.hi[q], e.backlog[q] = size, size, -1
	}
	return e
}

// packet returns the size of q's next packet without sending it.
func (e *engine) packet(q uint32) int {
	if e.head[q] == 0 {
		e.head[q] = e.lo[q] + e.rng.IntN(e.hi[q]-e.lo[q]+1)
	}
	return e.head[q]
}

// turn serves one grant; ok is false when nothing was ready.
func (e *engine) turn(t testing.TB) (q uint32, g Grant, sent int, ok bool) {
	t.Helper()
	q, g, ok = e.a.Next()
	if !ok {
		return q, g, 0, false
	}
	if g.Packets < 1 || g.Bytes < 1 {
		t.Fatalf("queue %d: empty grant %+v", q, g)
	}
	n, b := 0, 0
	for n < g.Packets && b < g.Bytes && e.backlog[q] != 0 {
		sz := e.packet(q)
		e.head[q] = 0
		n, b = n+1, b+sz
		if e.backlog[q] > 0 {
			e.backlog[q]--
		}
	}
	e.pkts[q] += uint64(n)
	e.bytes[q] += uint64(b)
	e.a.Done(q, n, b, e.backlog[q] != 0)
	return q, g, n, true
}

// shares returns each value's fraction of their sum.
func shares(v []uint64) []float64 {
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x) / sum
	}
	return f
}

// checkInvariants walks every ready list and checks its links and counts
// against the arbiter's bookkeeping.
func checkInvariants(t testing.TB, a *Arbiter) {
	t.Helper()
	total := 0
	for l := range a.cfg.Levels {
		lv := &a.levels[l]
		for w := range 2 {
			li := lv.lists[w]
			n, prev := uint32(0), nilQ
			for q := li.head; n < li.n; q = a.qs[q].next {
				s := &a.qs[q]
				if s.flags&queued == 0 || int(s.level) != l || s.list() != uint8(w) || s.prev != prev {
					t.Fatalf("level %d list %d: queue %d has flags %b level %d prev %d, want queued here after %d", l, w, q, s.flags, s.level, s.prev, prev)
				}
				prev, n = q, n+1
			}
			if li.n > 0 && (li.tail != prev || a.qs[prev].next != nilQ) {
				t.Fatalf("level %d list %d: tail %d, walked to %d", l, w, li.tail, prev)
			}
			total += int(li.n)
		}
		if busy := lv.lists[0].n+lv.lists[1].n > 0; busy != (a.nonEmpty&(1<<l) != 0) {
			t.Fatalf("level %d: non-empty bit %v, lists hold %d", l, !busy, lv.lists[0].n+lv.lists[1].n)
		}
	}
	queuedN := 0
	for q := range a.qs {
		if a.qs[q].flags&queued != 0 {
			queuedN++
		}
	}
	if total != a.ready || queuedN != a.ready {
		t.Fatalf("Ready() = %d, lists hold %d, %d queues flagged queued", a.ready, total, queuedN)
	}
}
