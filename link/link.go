// Package link defines how frames leave and enter a NIC.
//
// A frame is one RoCEv2 packet from its IP header (IPv4 or IPv6) through
// the UDP header (destination port 4791), the InfiniBand transport headers,
// the payload and pad, to the 4-byte ICRC. The NIC builds whole frames
// (it needs the IP and UDP headers for the ICRC anyway); a link that rides
// on kernel sockets strips and rebuilds the outer headers itself.
//
// Implementations: link/mem (in-process, with seeded fault injection),
// link/udp (real sockets) and link/sim (virtual time). Each checks that it
// fits at compile time with `var _ link.Link = (*X)(nil)`.
package link

import "net/netip"

// Link is a NIC's port onto a network.
type Link interface {
	// Send transmits frames and takes ownership of every buffer: the link
	// releases each one when it is done with it (possibly after Send
	// returns). Send does not block on the receiver; a link that cannot
	// carry a frame drops it and counts the drop, as a wire would.
	Send(bufs []*Buf)

	// Attach sets the dispatcher that receives inbound frames. It is called
	// once, before the first Send.
	Attach(d Dispatcher)

	// MTU returns the largest frame, in bytes from the IP header through
	// the ICRC, that the link carries.
	MTU() int

	// Close stops the link: no Deliver call starts after Close returns,
	// and buffers still queued inside the link are released.
	Close() error
}

// Dispatcher receives inbound frames.
type Dispatcher interface {
	// Deliver hands frames to the NIC, which takes ownership of each
	// buffer. The slice itself is only valid during the call. Deliver must
	// not block on the sender (it queues and returns).
	Deliver(bufs []*Buf)
}

// SourcePorter is implemented by links whose transport writes the UDP
// source port itself (a kernel socket bound to one port). The ICRC covers
// the source port, so the NIC must build every frame with this port
// instead of spreading QPs over ports. 0 means the port is not fixed (a
// wrapper around a link that does not fix it).
type SourcePorter interface {
	SourcePort() uint16
}

// WireWriter is implemented by links whose transport writes header
// fields of a frame itself, with values other than the frame's: fields the
// ICRC masks, such as the UDP checksum a kernel socket computes. A tap
// that records what went on the wire (link/sniff) calls WireHeaders on its
// own copy of each frame; the NIC's frames are never changed.
type WireWriter interface {
	// WireHeaders rewrites, in place, the header fields of frame that the
	// link's transport writes to the values the wire carries. sent says
	// whether the frame was handed to Send or delivered by the link.
	WireHeaders(frame []byte, sent bool)
}

// Addresser is implemented by links that know the IP address they carry
// frames for; a NIC opened on one takes it as its GID 0 by default.
type Addresser interface {
	Addr() netip.Addr
}
