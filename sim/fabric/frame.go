package fabric

import (
	"net/netip"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/wire"
)

// HostID numbers the hosts of a fabric in the order they were added,
// from 0.
type HostID int32

// Frame is one packet in the fabric: a real frame (Buf set) or a
// metadata-only frame (Buf nil). See the package documentation.
type Frame struct {
	// Buf is the real frame, or nil for a metadata-only frame.
	Buf *link.Buf
	// Len is the frame's length in bytes from the IP header through the
	// ICRC. For a real frame it is Buf.Len().
	Len int
	// Src and Dst are the sending and receiving hosts.
	Src, Dst HostID
	// ECN is the IP ECN codepoint (wire.ECNNotECT, ECNECT0, ECNECT1,
	// ECNCE). Switches mark ECT frames CE when congested.
	ECN uint8
	// Prio is the frame's priority (traffic class, 0..7): its queue at
	// every egress, and what PFC pauses. A real frame's comes from its
	// DSCP (DSCP/8, the common default mapping: RoCE's DSCP 26 is
	// priority 3, CNPs' DSCP 48 priority 6).
	Prio uint8
	// Entropy is what ECMP hashes besides the two hosts: a real frame's
	// UDP source port, which RoCEv2 varies per QP. A metadata-only frame
	// with none set hashes its Meta.QPN instead.
	Entropy uint16
	// SentAt is when the frame was handed to the fabric, for latency.
	SentAt sim.Time
	// Meta stands in for the headers of a metadata-only frame; the fabric
	// does not interpret it.
	Meta Meta
}

// Meta is the header record of a metadata-only frame: what a NIC model
// needs from a packet without its bytes. The fabric carries it unchanged.
type Meta struct {
	Opcode uint8  // BTH opcode
	Flags  uint8  // model-defined (e.g. AckReq, solicited)
	QPN    uint32 // destination QP
	PSN    uint32
	Aux    uint64 // model-defined: message id, MSN, byte offset
}

// ecnCapable reports whether the frame may be marked instead of dropped.
func (f *Frame) ecnCapable() bool { return f.ECN == wire.ECNECT0 || f.ECN == wire.ECNECT1 }

// markCE sets Congestion Experienced on the frame, in its IP header if it
// is real.
func (f *Frame) markCE() {
	f.ECN = wire.ECNCE
	if f.Buf != nil {
		wire.MarkCE(f.Buf.Bytes())
	}
}

// ipInfo is what the fabric reads from a real frame's headers.
type ipInfo struct {
	dst     netip.Addr
	ecn     uint8
	prio    uint8
	entropy uint16 // UDP source port, 0 if the packet is not UDP
}

// parseIP reads a real frame's IP header (and the UDP source port after
// it), or returns ok false if it has no complete IPv4 or IPv6 header.
func parseIP(b []byte) (h ipInfo, ok bool) {
	if len(b) == 0 {
		return h, false
	}
	var tc uint8
	var l4 int
	var udp bool
	switch b[0] >> 4 {
	case 4:
		if len(b) < wire.IPv4HeaderSize {
			return h, false
		}
		ip := wire.IPv4(b)
		h.dst, tc = netip.AddrFrom4(ip.Dst()), ip.TOS()
		l4, udp = int(b[0]&0xf)*4, b[9] == 17
	case 6:
		if len(b) < wire.IPv6HeaderSize {
			return h, false
		}
		ip := wire.IPv6(b)
		h.dst, tc = netip.AddrFrom16(ip.Dst()).Unmap(), ip.TrafficClass()
		l4, udp = wire.IPv6HeaderSize, b[6] == 17
	default:
		return h, false
	}
	h.ecn, h.prio = tc&wire.ECNMask, tc>>5
	if udp && l4 >= 20 && len(b) >= l4+2 {
		h.entropy = uint16(b[l4])<<8 | uint16(b[l4+1])
	}
	return h, true
}
