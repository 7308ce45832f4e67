package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/mix"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/perftest"
	"github.com/rnic/rnic/wire"
)

// perfLineRate is the line rate rnic perf gives DCQCN (--dcqcn): a link
// on kernel UDP sockets knows no port speed, so the rate is a 100 Gb/s
// port's, and DCQCN only slows a QP down once CNPs come.
const perfLineRate = 100e9

// dcqcnCounters are the counters of the --dcqcn line, in its order.
var dcqcnCounters = []string{"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored"}

// printDCQCN writes the --dcqcn line: the device's DCQCN counters when
// the run ended, and with --rx-mark-ce the frames that fault marked.
func (p *perfDevices) printDCQCN(w io.Writer, res *perftest.Result) {
	if res == nil || res.Counters == nil {
		return
	}
	fmt.Fprint(w, "dcqcn:")
	for _, name := range dcqcnCounters {
		for _, ctr := range res.Counters {
			if ctr.Name == name {
				fmt.Fprintf(w, " %s %d", name, ctr.Value)
			}
		}
	}
	if p.rxMarkCE > 0 {
		fmt.Fprintf(w, " rx_mark_ce_frames %d", p.marked.Load())
	}
	fmt.Fprintln(w)
}

// markCELink wraps a link and marks the ECN-capable frames it receives
// Congestion Experienced with a probability, before the NIC sees them, as
// a congested switch's RED queue with ECN would on the way to the NIC. It
// changes only the ECN bits (and the IPv4 header checksum): the ICRC
// masks them, so a marked frame's ICRC stays valid. Frames it sends pass
// unchanged. The link's other abilities are found through Unwrap
// (link.Find).
type markCELink struct {
	inner  link.Link
	p      float64
	marked *atomic.Uint64

	mu  sync.Mutex
	rng *rand.Rand
}

var (
	_ link.Link         = (*markCELink)(nil)
	_ link.Wrapper      = (*markCELink)(nil)
	_ link.SourcePorter = (*markCELink)(nil)
	_ link.Addresser    = (*markCELink)(nil)
)

// newMarkCELink returns inner with probability p of marking: each
// ECN-capable frame received draws once from a PCG seeded with (seed, a
// hash of addr); frames that are not ECN-capable draw nothing, so the same
// seed and the same ECN-capable frames mark the same frames. marked
// counts the frames marked.
func newMarkCELink(inner link.Link, p float64, seed int64, addr netip.Addr, marked *atomic.Uint64) *markCELink {
	b := addr.As16()
	stream := mix.Mix64(binary.BigEndian.Uint64(b[:8]) ^ mix.Mix64(binary.BigEndian.Uint64(b[8:])))
	return &markCELink{inner: inner, p: p, marked: marked, rng: rand.New(rand.NewPCG(uint64(seed), ^stream))}
}

func (l *markCELink) Send(bufs []*link.Buf) { l.inner.Send(bufs) }
func (l *markCELink) MTU() int              { return l.inner.MTU() }
func (l *markCELink) Close() error          { return l.inner.Close() }
func (l *markCELink) Unwrap() link.Link     { return l.inner }

// Attach makes d receive the inner link's frames, marked on their way.
func (l *markCELink) Attach(d link.Dispatcher) {
	if d == nil {
		l.inner.Attach(nil)
		return
	}
	l.inner.Attach(&markCEDispatcher{l: l, d: d})
}

// Addr returns the inner link's address, or the zero Addr.
func (l *markCELink) Addr() netip.Addr {
	if a, ok := l.inner.(link.Addresser); ok {
		return a.Addr()
	}
	return netip.Addr{}
}

// SourcePort returns the inner link's fixed UDP source port, or 0.
func (l *markCELink) SourcePort() uint16 {
	if sp, ok := l.inner.(link.SourcePorter); ok {
		return sp.SourcePort()
	}
	return 0
}

// mark draws for each ECN-capable frame of bufs and marks the hits CE.
func (l *markCELink) mark(bufs []*link.Buf) {
	var n uint64
	l.mu.Lock()
	for _, b := range bufs {
		f := b.Bytes()
		if wire.ECNCapable(f) && l.rng.Float64() < l.p {
			wire.MarkCE(f)
			n++
		}
	}
	l.mu.Unlock()
	if n > 0 {
		l.marked.Add(n)
	}
}

// markCEDispatcher marks inbound frames before the NIC's dispatcher gets
// them.
type markCEDispatcher struct {
	l *markCELink
	d link.Dispatcher
}

func (d *markCEDispatcher) Deliver(bufs []*link.Buf) {
	d.l.mark(bufs)
	d.d.Deliver(bufs)
}

// TryDeliver marks the frames, then offers them to a NIC with a bounded
// queue (link.Receiver). Frames it does not take come back marked or not:
// a CE frame is not ECN-capable any more and draws nothing, an unmarked
// one draws again.
func (d *markCEDispatcher) TryDeliver(bufs []*link.Buf) int {
	d.l.mark(bufs)
	if r, ok := d.d.(link.Receiver); ok {
		return r.TryDeliver(bufs)
	}
	d.d.Deliver(bufs)
	return len(bufs)
}

// Wake passes a lossless link's wake-up on to the NIC (link.Waker).
func (d *markCEDispatcher) Wake() {
	if w, ok := d.d.(link.Waker); ok {
		w.Wake()
	}
}
