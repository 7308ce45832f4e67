package mem

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Send transmits frames, taking ownership of every buffer (see link.Link).
// It is safe for concurrent use and holds no lock while frames are
// delivered.
func (p *Port) Send(bufs []*link.Buf) {
	if len(bufs) == 0 {
		return
	}
	var n int
	for _, b := range bufs {
		n += b.Len()
	}
	p.c.txFrames.Add(uint64(len(bufs)))
	p.c.txBytes.Add(uint64(n))
	switch {
	case p.closed.Load():
		release(bufs, &p.c.closedDrops)
	case p.perfect.Load():
		p.forward(bufs)
	default:
		p.sendFaulty(bufs)
	}
}

// scratch holds the per-Send output lists of the fault path; it is a pool
// because Send is concurrent and must not hold a lock while delivering.
var scratch = sync.Pool{New: func() any { s := make([]*link.Buf, 0, 64); return &s }}

// sendFaulty makes the fault decisions for bufs under the egress lock, then
// forwards the frames due now.
func (p *Port) sendFaulty(bufs []*link.Buf) {
	sp := scratch.Get().(*[]*link.Buf)
	out := (*sp)[:0]
	var t tally
	now := int64(-1) // read the clock once, and only if a frame is delayed

	p.eg.Lock()
	if p.eg.closed { // Close ran after the check in Send
		p.eg.Unlock()
		release(bufs, &p.c.closedDrops)
		scratch.Put(sp)
		return
	}
	in := &p.eg.inj
	for _, b := range bufs {
		if b.Len() > p.mtu {
			out = append(out, b) // forward drops and counts it
			continue
		}
		if in.hit(in.f.Loss) {
			b.Release()
			t.dropped++
			continue
		}
		if in.hit(in.f.Corrupt) {
			link.FixICRC(b) // sent before the faults changed: the receiver must check it
			if in.corrupt(b.Bytes()) {
				t.corrupted++
			}
		}
		if in.f.MarkCE > 0 && in.hit(in.f.MarkCE) && wire.MarkCE(b.Bytes()) {
			t.marked++
		}
		var dup *link.Buf
		if in.hit(in.f.Duplicate) {
			dup = b.Clone()
			t.duplicated++
		}
		out = p.schedule(b, out, &now, &t)
		if dup != nil {
			out = p.schedule(dup, out, &now, &t)
		}
	}
	p.eg.Unlock()

	t.addTo(&p.c)
	p.forward(out)
	clear(out)
	*sp = out[:0]
	scratch.Put(sp)
}

// schedule draws b's timing and either appends it to out (due now) or puts
// it on the delay line. The egress lock is held.
func (p *Port) schedule(b *link.Buf, out []*link.Buf, now *int64, t *tally) []*link.Buf {
	d, reordered := p.eg.inj.delay()
	if reordered {
		t.reordered++
	}
	if d <= 0 {
		return append(out, b)
	}
	if *now < 0 {
		*now = p.now()
	}
	t.delayed++
	p.eg.seq++
	if p.eg.line.push(entry{due: *now + int64(d), seq: p.eg.seq, b: b}) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	if !p.eg.running {
		p.eg.running = true
		go p.routineDelayLine()
	}
	return out
}

// now returns the delay line's clock: monotonic nanoseconds since the port
// was made.
func (p *Port) now() int64 { return int64(time.Since(p.epoch)) }

// release releases every buffer and counts them in c.
func release(bufs []*link.Buf, c *atomic.Uint64) {
	for _, b := range bufs {
		b.Release()
	}
	c.Add(uint64(len(bufs)))
}
