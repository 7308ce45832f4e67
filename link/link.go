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

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/rnic/rnic/wire"
)

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

// Intact is implemented by links that can promise that a frame arrives
// exactly as it was sent: nothing on the way can change a bit (link/mem
// without corruption faults). A sender may then leave the ICRC out and
// mark the frame FlagNoICRC, and the receiver takes it unchecked, as
// checksum offload on a loopback device. The answer may change (faults
// configured later): a sender asks for each frame it builds, and a link
// that changes or shows a FlagNoICRC frame calls FixICRC first. Links over
// a real medium (link/udp) never promise it.
type Intact interface {
	Intact() bool
}

// Inline is implemented by links that hand frames to the dispatcher on
// the sender's goroutine and hold no lock of theirs while they do
// (link/mem): the receiving NIC may then do its work on that goroutine
// before Deliver returns, instead of waking its own. A wrapper that holds
// a lock across delivery (a capture) does not implement it, and the NIC
// looks only at the link it was given, not through wrappers.
type Inline interface {
	DeliversInline() bool
}

// FixICRC computes the ICRC of a frame sent with FlagNoICRC and clears
// the flag, for a link about to change the frame or show it (a capture
// must be Wireshark-clean). A frame sent by reference gets its payload's
// bytes first (Buf.Materialize); one whose memory was taken back keeps
// its reference and flag, and its receiver drops it. Other frames are
// left as they are.
func FixICRC(b *Buf) {
	if b.Flags&FlagNoICRC == 0 {
		return
	}
	if !b.Materialize() {
		return // its payload's memory was taken back: the receiver drops it
	}
	f := b.Bytes()
	if crc, err := wire.ComputeICRC(f); err == nil {
		binary.LittleEndian.PutUint32(f[len(f)-wire.ICRCSize:], crc)
	}
	b.Flags &^= FlagNoICRC
}

// SourcePorter is implemented by links whose transport writes the UDP
// source port itself (a kernel socket bound to one port). The ICRC covers
// the source port, so the NIC must build every frame with this port
// instead of spreading QPs over ports. 0 means the port is not fixed (a
// wrapper around a link that does not fix it).
type SourcePorter interface {
	SourcePort() uint16
}

// Netdev is the network interface a link sends through, as the kernel
// describes it (ip link): what rdma_rxe binds a device to, and what
// programs look up through the device (sysfs's gid_attrs/ndevs, the
// device's net/ directory, libfabric's interface filter).
type Netdev struct {
	Name         string           // ifname, e.g. eth0, lo, veth1
	Index        int              // ifindex
	HardwareAddr net.HardwareAddr // MAC; empty for loopback
	MTU          int              // the interface's MTU, bytes of IP packet
	// SpeedMbps is the link speed ethtool reports (/sys/class/net/IF/speed),
	// 0 when the interface has none (loopback, a link that is down).
	SpeedMbps int
}

// Netdever is implemented by links bound to a network interface
// (link/udp): Netdev describes it as it was when the link opened.
type Netdever interface {
	Netdev() Netdev
}

// Receiver is implemented by a dispatcher whose receive queue is bounded
// (a NIC). A lossless link hands it frames with TryDeliver, which takes as
// many as fit, in order, and returns how many; the link keeps the rest
// until the dispatcher calls its Drained. Deliver, for links that do not
// hold frames, takes every frame and drops (and counts) what does not fit.
type Receiver interface {
	TryDeliver(bufs []*Buf) int
}

// QuietReceiver is a Receiver that a link may hand frames without waking
// it (TryDeliverQuiet) and tell once the link holds none of its locks
// (Delivered, with the bytes handed over): the telling goroutine then does the
// receiver's work itself if the receiver's own goroutine sleeps and the
// work is small, as an in-process sender (link/udp's siblings) can,
// instead of waking it.
type QuietReceiver interface {
	Receiver
	TryDeliverQuiet(bufs []*Buf) int
	Delivered(bytes int)
}

// Drainer is implemented by links that hold frames for a receiver that had
// no room (lossless links). The receiver calls Drained after it took frames
// out of its queue, from any goroutine and as often as it likes: the link
// then hands it what waits. It must be cheap when nothing waits.
type Drainer interface {
	Drained()
}

// Backlogger is implemented by lossless links, which pause senders rather
// than drop: Backlog is the number of this port's frames that wait in the
// link for a receiver that has no room. The NIC's arbiter holds back new
// requests while it is high, as a sender paused by PFC does, and wakes when
// the link calls its dispatcher's Wake (a Waker) because the backlog fell
// to ResumeBacklog or below.
type Backlogger interface {
	Backlog() int
}

// Waker is implemented by a dispatcher that the link may ask to look at
// its Backlog again.
type Waker interface {
	Wake()
}

// ResumeBacklog is the backlog at which a lossless link wakes a paused
// sender (the low watermark of its pause).
const ResumeBacklog = 32

// Poller is implemented by links whose receive path can be driven by the
// caller: Poll takes the frames that have already arrived, without
// blocking, and hands them to the dispatcher as the link's own receive
// path would, returning how many it delivered. A NIC polled by a busy
// application (an empty CQ poll) calls it so that frames reach the engine
// without waiting for the link's goroutine to be scheduled. Poll may be
// called from any goroutine, concurrently with the link's own receive
// path; it returns 0 at once if that path is taking a batch.
type Poller interface {
	Poll() int
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

// Counted is implemented by links that count their work: Counters calls
// f with each counter's name (prefixed link_) and value, which the NIC's
// statistics include (rnic stat).
type Counted interface {
	Counters(f func(name string, value uint64))
}

// Wrapper is implemented by links that wrap another (link/sniff): Unwrap
// returns the wrapped link.
type Wrapper interface {
	Unwrap() Link
}

// Find returns the first link in l's chain of wrappers, l first, that
// implements T: a NIC asks for a link's optional abilities (Poller,
// Drainer, Backlogger) through it, since a wrapper that hands frames on
// unchanged need not repeat them.
func Find[T any](l Link) (T, bool) {
	for l != nil {
		if t, ok := l.(T); ok {
			return t, true
		}
		w, ok := l.(Wrapper)
		if !ok {
			break
		}
		l = w.Unwrap()
	}
	var zero T
	return zero, false
}
