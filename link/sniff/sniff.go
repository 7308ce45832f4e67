package sniff

import (
	"net/netip"
	"sync"
	"time"

	"github.com/rnic/rnic/link"
)

// Direction says whether the NIC sent a frame or received it.
type Direction uint8

// Directions, as seen from the NIC whose link is wrapped.
const (
	TX Direction = iota // sent by the NIC
	RX                  // received by the NIC
)

// String returns "TX" or "RX".
func (d Direction) String() string {
	switch d {
	case TX:
		return "TX"
	case RX:
		return "RX"
	}
	return "Direction(?)"
}

// Func receives a frame, IP header through ICRC. The frame is valid only
// during the call: copy what must be kept.
type Func func(dir Direction, ts time.Time, frame []byte)

// PacketWriter records IP packets: a *pcap.Writer (wire/pcap), or a
// writer that rotates files or bounds their size around one.
type PacketWriter interface {
	WriteIPPacket(ts time.Time, ip []byte) error
}

// Options say where frames are recorded. The zero value records nothing.
type Options struct {
	// Pcap, if set, receives every frame as one record, through
	// WriteIPPacket (so a *pcap.Writer of LinkTypeRaw or LinkTypeEthernet
	// both work). The Link serializes its writes, but a *pcap.Writer must
	// not be used by anything else, another Link included, while the Link
	// runs (a PacketWriter of one's own may be shared if it locks). After
	// the first write error the Link stops writing; Err returns it. Leave
	// it nil for no capture: a nil *pcap.Writer put in it is not nil.
	Pcap PacketWriter

	// Func, if set, is called with every frame. Calls are serialized (one
	// at a time, in the order frames are recorded in the pcap) and made
	// with the Link's lock held, so Func must not call the Link.
	Func Func

	// Clock returns the timestamp of frames; nil means time.Now. A link
	// running in virtual time passes its own clock. It is read once per
	// batch: frames sent or delivered together share a timestamp.
	Clock func() time.Time
}

// Link wraps a link.Link and records its frames. Its methods are safe for
// concurrent use as far as the inner link's are.
type Link struct {
	inner link.Link
	on    bool // something to record to
	clock func() time.Time

	// wire, if the inner link writes header fields itself
	// (link.WireWriter), turns each frame into what the wire carries,
	// in scratch: the recorded frame is the wire's, the NIC's is untouched.
	wire link.WireWriter

	mu      sync.Mutex // serializes pcap writes and Func calls
	pcap    PacketWriter
	fn      Func
	err     error // first pcap write error
	scratch []byte
	snap    []*link.Buf // TryDeliver's copies of the frames it offers
}

var _ link.Link = (*Link)(nil)

// New returns a Link that forwards to inner and records as opts say.
func New(inner link.Link, opts Options) *Link {
	l := &Link{
		inner: inner,
		on:    opts.Pcap != nil || opts.Func != nil,
		clock: opts.Clock,
		pcap:  opts.Pcap,
		fn:    opts.Func,
	}
	if l.clock == nil {
		l.clock = time.Now
	}
	l.wire, _ = inner.(link.WireWriter)
	return l
}

// Send records the frames as TX, then hands them to the inner link, which
// takes ownership of the buffers.
func (l *Link) Send(bufs []*link.Buf) {
	if l.on && len(bufs) > 0 {
		l.record(TX, bufs)
	}
	l.inner.Send(bufs)
}

// Attach makes d receive the inner link's frames, recorded as RX on their
// way to d.
func (l *Link) Attach(d link.Dispatcher) {
	if !l.on || d == nil {
		l.inner.Attach(d)
		return
	}
	l.inner.Attach(&dispatcher{l: l, d: d})
}

// MTU returns the inner link's MTU.
func (l *Link) MTU() int { return l.inner.MTU() }

// Close closes the inner link. The pcap writer stays the caller's to
// flush and close: after Close returns no frame is recorded any more.
func (l *Link) Close() error { return l.inner.Close() }

// Addr returns the inner link's address if it has one (link/mem ports do),
// so that rnic.Open finds the NIC's address through the wrapper; otherwise
// the zero Addr.
func (l *Link) Addr() netip.Addr {
	if a, ok := l.inner.(interface{ Addr() netip.Addr }); ok {
		return a.Addr()
	}
	return netip.Addr{}
}

// SourcePort implements link.SourcePorter for an inner link that fixes
// the UDP source port (a kernel socket), so that the NIC builds its ICRCs
// over the port the socket writes; 0 when the inner link does not fix it.
func (l *Link) SourcePort() uint16 {
	if sp, ok := l.inner.(link.SourcePorter); ok {
		return sp.SourcePort()
	}
	return 0
}

// Unwrap returns the inner link.
func (l *Link) Unwrap() link.Link { return l.inner }

// Err returns the first error writing the pcap, if any.
func (l *Link) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// record shows each frame of bufs to the pcap writer and to Func. The
// caller still owns the buffers and hands them on afterwards.
func (l *Link) record(dir Direction, bufs []*link.Buf) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(dir, bufs)
}

// recordLocked is record with l.mu held.
func (l *Link) recordLocked(dir Direction, bufs []*link.Buf) {
	ts := l.clock() // under the lock, so that records are in time order
	for _, b := range bufs {
		link.FixICRC(b) // a capture shows the ICRC a frame would carry on a wire
		frame := b.Bytes()
		if l.wire != nil {
			l.scratch = append(l.scratch[:0], frame...)
			frame = l.scratch
			l.wire.WireHeaders(frame, dir == TX)
		}
		if l.pcap != nil && l.err == nil {
			l.err = l.pcap.WriteIPPacket(ts, frame)
		}
		if l.fn != nil {
			l.fn(dir, ts, frame)
		}
	}
}

// dispatcher records inbound frames before the NIC's dispatcher gets them.
type dispatcher struct {
	l *Link
	d link.Dispatcher
}

// Deliver records the frames as RX, then hands them to the NIC.
func (d *dispatcher) Deliver(bufs []*link.Buf) {
	if len(bufs) > 0 {
		d.l.record(RX, bufs)
	}
	d.d.Deliver(bufs)
}

// TryDeliver hands the frames to a NIC with a bounded queue, which takes
// what fits, and records those as RX (link.Receiver); the rest stay with
// the wrapped link, to be offered again. A NIC without one takes them all.
// The frames are copied first: once the NIC has them, its engine may
// process and release them at any moment, and which it took is known only
// then.
func (d *dispatcher) TryDeliver(bufs []*link.Buf) int {
	r, ok := d.d.(link.Receiver)
	if !ok {
		d.Deliver(bufs)
		return len(bufs)
	}
	l := d.l
	l.mu.Lock() // the frames are recorded in the order the NIC takes them
	defer l.mu.Unlock()
	l.snap = l.snap[:0]
	for _, b := range bufs {
		l.snap = append(l.snap, b.Clone())
	}
	n := r.TryDeliver(bufs)
	l.recordLocked(RX, l.snap[:n])
	for _, c := range l.snap {
		c.Release()
	}
	clear(l.snap)
	return n
}

// Wake passes a lossless link's wake-up on to the NIC (link.Waker).
func (d *dispatcher) Wake() {
	if w, ok := d.d.(link.Waker); ok {
		w.Wake()
	}
}
