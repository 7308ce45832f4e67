package mem

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rnic/rnic/link"
)

// forward routes frames and delivers each run of consecutive frames with
// the same destination in one Deliver call. The runs are sub-slices of
// bufs, so nothing is copied or allocated; a frame that cannot be routed
// ends the run before it and is released. forward owns every buffer in
// bufs and reads none after handing it over.
func (p *Port) forward(bufs []*link.Buf) {
	var (
		t        tally
		to       *Port // destination of the run bufs[start:i]
		toAddr   netip.Addr
		start    int
		runBytes int
	)
	for i, b := range bufs {
		frame := b.Bytes()
		var dst *Port
		a, ok := frameDst(frame)
		switch {
		case len(frame) > p.mtu:
			t.oversize++
		case !ok:
			t.noRoute++
		case to != nil && a == toAddr:
			dst = to
		default:
			if dst = p.sw.lookup(a); dst == nil {
				t.noRoute++
			}
		}
		if dst != to || dst == nil {
			p.deliver(to, bufs[start:i], runBytes)
			to, toAddr, start, runBytes = dst, a, i, 0
		}
		if dst == nil {
			b.Release()
			start = i + 1
			continue
		}
		runBytes += len(frame)
	}
	p.deliver(to, bufs[start:], runBytes)
	t.addTo(&p.c)
}

// deliver hands run (of n bytes, all for port to) to to's dispatcher, or
// releases it if to is closing or unattached. A dispatcher with a bounded
// queue (a link.Receiver) takes what fits and the rest waits (deliverTo).
func (p *Port) deliver(to *Port, run []*link.Buf, n int) {
	if len(run) == 0 {
		return
	}
	if !to.rx.gate.enter() {
		release(run, &p.c.closedDrops)
		return
	}
	defer to.rx.gate.leave()
	d := to.rx.d.Load()
	if d == nil {
		release(run, &p.c.unattached)
		return
	}
	if d.recv != nil {
		p.deliverTo(to, d.recv, run)
		return
	}
	to.c.rxFrames.Add(uint64(len(run)))
	to.c.rxBytes.Add(uint64(n))
	d.Deliver(run)
}

// gate counts the Deliver calls in flight into one port, so that Close can
// wait for them without a lock around Deliver (which would deadlock a
// dispatcher that calls Send, or two ports sending to each other).
type gate struct{ n atomic.Int64 }

// gateClosed is the bit of gate.n set by close.
const gateClosed = 1 << 62

// enter reports whether a Deliver may start; if so, leave must follow.
func (g *gate) enter() bool {
	if g.n.Add(1)&gateClosed != 0 {
		g.n.Add(-1)
		return false
	}
	return true
}

// leave ends a Deliver begun by a successful enter.
func (g *gate) leave() { g.n.Add(-1) }

// close refuses new Delivers and waits for those in flight. Close is rare
// and Deliver is short (it queues and returns), so polling is enough.
func (g *gate) close() {
	g.n.Or(gateClosed)
	for i := 0; g.n.Load() != gateClosed; i++ {
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}
