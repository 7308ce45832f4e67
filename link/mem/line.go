package mem

import (
	"time"

	"github.com/rnic/rnic/link"
)

// entry is one frame on a delay line.
type entry struct {
	due int64  // delay-line clock, ns
	seq uint64 // send order, so frames due at the same time keep it
	b   *link.Buf
}

// line is a binary min-heap of entries ordered by (due, seq). It is
// hand-rolled rather than container/heap so that pushing a frame does not
// box the entry into an interface (an allocation per frame); the backing
// slice is reused, so a line in steady state does not allocate.
type line []entry

func (a entry) before(b entry) bool {
	return a.due < b.due || a.due == b.due && a.seq < b.seq
}

// push adds e and reports whether it became the earliest entry.
func (l *line) push(e entry) bool {
	h := append(*l, e)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	*l = h
	return i == 0
}

// pop removes and returns the earliest entry; the line must not be empty.
func (l *line) pop() entry {
	h := *l
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = entry{} // drop the reference for the GC
	h = h[:last]
	for i := 0; ; {
		min, left := i, 2*i+1
		if left < len(h) && h[left].before(h[min]) {
			min = left
		}
		if right := left + 1; right < len(h) && h[right].before(h[min]) {
			min = right
		}
		if min == i {
			break
		}
		h[i], h[min] = h[min], h[i]
		i = min
	}
	*l = h
	return top
}

// routineDelayLine delivers the port's delayed frames when they are due.
// It runs from the first delayed frame until Close.
func (p *Port) routineDelayLine() {
	defer close(p.exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*link.Buf // reused batch of frames due now
	for {
		p.eg.Lock()
		if p.eg.closed {
			p.eg.Unlock()
			return
		}
		now := p.now()
		for len(p.eg.line) > 0 && p.eg.line[0].due <= now {
			due = append(due, p.eg.line.pop().b)
		}
		wait := time.Duration(-1)
		if len(due) == 0 && len(p.eg.line) > 0 {
			wait = time.Duration(p.eg.line[0].due - now)
		}
		p.eg.Unlock()

		if len(due) > 0 {
			p.forward(due)
			clear(due)
			due = due[:0]
			continue // more may have come due while delivering
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-p.wake:
		case <-p.done:
			return
		}
	}
}
