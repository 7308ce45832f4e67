package fabric

import (
	"errors"
	"net/netip"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
)

// Receiver takes delivery of frames at their arrival time, real or
// metadata-only. It owns each frame (and its Buf) from then on.
type Receiver interface {
	Receive(s *sim.Sim, f Frame)
}

// HostStats count the frames a host's port refused or could not deliver.
type HostStats struct {
	Oversize   uint64 // sent frames longer than the MTU
	NoRoute    uint64 // sent frames to an address or host the fabric lacks
	Closed     uint64 // frames sent on, or arriving at, a closed port
	NoReceiver uint64 // arrived frames with nowhere to go (see Port.Attach)
	Delivered  uint64 // frames handed to the receiver or dispatcher
}

// Port is a host's attachment to the fabric: the virtual-time equivalent
// of a NIC's link.Link. Send puts frames on the host's egress queue at the
// simulator's current time; arriving frames are handed, at their arrival
// time, to the Receiver if one is set, else real frames to the attached
// link.Dispatcher.
type Port struct {
	f    *Fabric
	id   HostID
	addr netip.Addr
	up   *egress // host → switch
	down *egress // switch output port → host
	// The leaf switch and its port the host is attached to.
	sw     *Switch
	swPort int32

	recv    Receiver
	disp    link.Dispatcher
	scratch [1]*link.Buf // Deliver's batch, reused
	// The last route looked up (hosts are never removed, so it stays
	// true).
	routed    bool
	routeAddr netip.Addr
	routeDst  HostID
	closed    bool
	st        HostStats
}

var _ link.Link = (*Port)(nil)

// ID returns the host's number.
func (p *Port) ID() HostID { return p.id }

// Addr returns the host's IP address.
func (p *Port) Addr() netip.Addr { return p.addr }

// Send implements link.Link: each real frame is routed by its IP
// destination and queued on the host's egress port now. Frames that are
// too long, unroutable or over the egress buffer are released and counted.
func (p *Port) Send(bufs []*link.Buf) { p.SendAt(p.f.s.Now(), bufs) }

// SendAt is Send for frames that reach the egress port at a known later
// time at: a NIC model that has computed when its packets leave hands them
// over at once instead of scheduling an event for each. A frame offered
// for an earlier time than the port's previous one queues behind it (see
// egress.enqueue).
func (p *Port) SendAt(at sim.Time, bufs []*link.Buf) {
	at = max(at, p.f.s.Now())
	for _, b := range bufs {
		if p.closed {
			p.st.Closed++
			b.Release()
			continue
		}
		if b.Len() > p.f.cfg.MTU {
			p.st.Oversize++
			b.Release()
			continue
		}
		h, ok := parseIP(b.Bytes())
		var dst HostID
		switch {
		case ok && h.dst == p.routeAddr && p.routed:
			dst = p.routeDst // a NIC's frames mostly go to one peer
		case ok:
			if dst, ok = p.f.addrs[h.dst]; ok {
				p.routed, p.routeAddr, p.routeDst = true, h.dst, dst
			}
		}
		if !ok {
			p.st.NoRoute++
			b.Release()
			continue
		}
		fr := Frame{Buf: b, Len: b.Len(), Src: p.id, Dst: dst, ECN: h.ecn, Prio: h.prio, Entropy: h.entropy, SentAt: at}
		if !p.f.send(p, at, fr) {
			b.Release()
		}
	}
}

// SendFrame queues a frame on the host's egress port now and reports
// whether it was accepted. Src and SentAt are set here; for a real frame
// (Buf set) Len is taken from Buf, and Dst must still be set by the
// caller (Send routes by the IP header instead). A refused frame's Buf is
// released.
func (p *Port) SendFrame(fr Frame) bool {
	at := p.f.s.Now()
	fr.Src, fr.SentAt = p.id, at
	if fr.Buf != nil {
		fr.Len = fr.Buf.Len()
	}
	var refused *uint64
	switch {
	case p.closed:
		refused = &p.st.Closed
	case fr.Len <= 0 || fr.Len > p.f.cfg.MTU:
		refused = &p.st.Oversize
	case fr.Dst < 0 || int(fr.Dst) >= len(p.f.hosts):
		refused = &p.st.NoRoute
	case fr.Prio >= Priorities:
		refused = &p.st.NoRoute
	}
	if refused == nil && p.f.send(p, at, fr) {
		return true
	}
	if refused != nil {
		*refused++
	}
	if fr.Buf != nil {
		fr.Buf.Release()
	}
	return false
}

// SetReceiver sets where arriving frames go; it takes precedence over an
// attached dispatcher. Metadata-only frames can only go to a Receiver.
func (p *Port) SetReceiver(r Receiver) { p.recv = r }

// Attach implements link.Link: real frames arriving while no Receiver is
// set are delivered to d, one per Deliver call, at their arrival time.
func (p *Port) Attach(d link.Dispatcher) { p.disp = d }

// MTU implements link.Link.
func (p *Port) MTU() int { return p.f.cfg.MTU }

// ErrClosed is returned by Close on a port already closed.
var ErrClosed = errors.New("fabric: port already closed")

// Close implements link.Link: later sends are refused, and frames that
// arrive for this host are released. Frames already sent keep going:
// they have left the NIC.
func (p *Port) Close() error {
	if p.closed {
		return ErrClosed
	}
	p.closed = true
	return nil
}

// deliver hands an arrived frame to the host.
func (p *Port) deliver(fr Frame) {
	switch {
	case p.closed:
		p.st.Closed++
	case p.recv != nil:
		p.st.Delivered++
		p.recv.Receive(p.f.s, fr)
		return
	case p.disp != nil && fr.Buf != nil:
		p.st.Delivered++
		p.scratch[0] = fr.Buf
		p.disp.Deliver(p.scratch[:])
		p.scratch[0] = nil
		return
	default:
		p.st.NoReceiver++
	}
	if fr.Buf != nil {
		fr.Buf.Release()
	}
}

// Stats returns the host's delivery counters.
func (p *Port) Stats() HostStats { return p.st }

// UplinkFreeAt returns when the host's uplink will have sent every frame
// offered to it so far but those of paused priorities: how far its
// transmit queue reaches ahead of the wire.
func (p *Port) UplinkFreeAt() sim.Time { return p.up.freeAt(p.f.s.Now()) }

// UplinkStats returns the counters of the host's egress port (NIC to
// switch).
func (p *Port) UplinkStats() PortStats { return p.up.stats(p.f.s.Now()) }

// UplinkPaused reports whether PFC has paused priority prio of the
// host's uplink, and the bytes of that priority's frames waiting there:
// what a NIC's transmit buffer for the priority holds while it cannot
// drain.
func (p *Port) UplinkPaused(prio uint8) (paused bool, waiting int) {
	st := p.up.sched
	if st == nil || prio >= Priorities {
		return false, 0
	}
	return st.paused[prio], st.clsBytes[prio]
}

// OnUplinkResume has fn called when PFC resumes a priority of the host's
// uplink: a NIC that stopped for a pause goes on.
func (p *Port) OnUplinkResume(fn func()) { p.up.onResume = fn }

// SwitchPortName names the switch's output port towards this host as
// Fabric.Ports does (PortName): the port WatchPort watches by that name.
func (p *Port) SwitchPortName() string { return PortName(p.sw.name, int(p.swPort)) }

// SwitchPortStats returns the counters of the switch's output port
// towards this host: where incast queues build, drop and mark.
func (p *Port) SwitchPortStats() PortStats { return p.down.stats(p.f.s.Now()) }
