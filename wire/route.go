package wire

import "encoding/binary"

// Route holds the outer (IP and UDP) header fields of a RoCEv2 packet: what
// an RC or UC QP's address vector, or a UD address handle, resolves to. The
// zero value of every field but Src and Dst is a working default.
//
// The IP version follows Dst: an IPv4-mapped Dst means IPv4, and then Src
// must be IPv4-mapped too (only its last 4 bytes are used).
type Route struct {
	Src, Dst GID
	// SrcPort is the UDP source port; 0 means UDPPort. Senders vary it per
	// QP so that ECMP spreads QPs over paths.
	SrcPort uint16
	// TrafficClass is the IPv4 TOS or IPv6 traffic class: DSCP<<2 | ECN.
	TrafficClass uint8
	// HopLimit is the IPv4 TTL or IPv6 hop limit; 0 means 64.
	HopLimit uint8
	// FlowLabel is the IPv6 flow label (20 bits).
	FlowLabel uint32
	// IPID is the IPv4 identification. It is covered by the ICRC, so a
	// sender whose kernel writes the IP header must predict it: Linux
	// writes 0 for an unconnected UDP socket with DF set.
	IPID uint16
	// NoDF clears the IPv4 Don't Fragment flag (DF is set by default, as
	// every RoCEv2 sender does).
	NoDF bool
	// UDPChecksum computes the UDP checksum; by default it is 0, as rxe
	// sends it.
	UDPChecksum bool
}

// DefaultHopLimit is the TTL or hop limit a Route with HopLimit 0 writes,
// as Linux does.
const DefaultHopLimit = 64

// IPv6 reports whether packets on this route are IPv6 (Dst is not
// IPv4-mapped).
func (r *Route) IPv6() bool { return !r.Dst.IsIPv4() }

// HeaderLen returns the size of the IP and UDP headers the route writes.
func (r *Route) HeaderLen() int {
	if r.IPv6() {
		return IPv6HeaderSize + UDPHeaderSize
	}
	return IPv4HeaderSize + UDPHeaderSize
}

func (r *Route) hopLimit() uint8 {
	if r.HopLimit == 0 {
		return DefaultHopLimit
	}
	return r.HopLimit
}

func (r *Route) srcPort() uint16 {
	if r.SrcPort == 0 {
		return UDPPort
	}
	return r.SrcPort
}

// WriteHeaders writes the IP and UDP headers at the start of a frame whose
// length is len(frame) (the whole packet through the ICRC), with lengths
// taken from len(frame), the IPv4 header checksum computed and the UDP
// checksum 0. len(frame) must be at least HeaderLen and fit the IP length
// field (65535 bytes, plus 40 for IPv6).
//
// The ICRC covers the IP lengths, identification and addresses but masks
// TTL, TOS and both checksums, so a frame is finished in this order:
// WriteHeaders, SetICRC, then SetUDPChecksum if wanted. Finish does all
// three.
func (r *Route) WriteHeaders(frame []byte) {
	n := len(frame)
	hl := IPv4HeaderSize
	if r.IPv6() {
		hl = IPv6HeaderSize
		IPv6(frame).Encode(&IPv6Fields{
			TrafficClass:  r.TrafficClass,
			FlowLabel:     r.FlowLabel,
			PayloadLength: uint16(n - IPv6HeaderSize),
			NextHeader:    IPProtocolUDP,
			HopLimit:      r.hopLimit(),
			Src:           r.Src,
			Dst:           r.Dst,
		})
	} else {
		r.writeIPv4UDP(frame)
		return
	}
	UDP(frame[hl:]).Encode(&UDPFields{
		SrcPort: r.srcPort(),
		DstPort: UDPPort,
		Length:  uint16(n - hl),
	})
}

// writeIPv4UDP is WriteHeaders for IPv4: every packet a NIC sends passes
// here, so the header is written as five 32-bit words and its checksum
// summed from those words, not encoded field by field and read back
// (IPv4.Encode, ComputeChecksum: the same bytes, TestWriteIPv4UDP).
func (r *Route) writeIPv4UDP(frame []byte) {
	_ = frame[IPv4HeaderSize+UDPHeaderSize-1]
	n := uint32(len(frame))
	var flags uint32 = IPv4FlagDF << ipv4FlagsShift
	if r.NoDF {
		flags = 0
	}
	w0 := uint32(4<<4|IPv4HeaderSize/4)<<24 | uint32(r.TrafficClass)<<16 | n&0xFFFF
	w1 := uint32(r.IPID)<<16 | flags
	w2 := uint32(r.hopLimit())<<24 | uint32(IPProtocolUDP)<<16 // checksum 0 for the sum
	src := binary.BigEndian.Uint32(r.Src[12:])
	dst := binary.BigEndian.Uint32(r.Dst[12:])
	sum := uint64(w0) + uint64(w1) + uint64(w2) + uint64(src) + uint64(dst)
	w2 |= uint32(^checksumFold(sum))
	be := binary.BigEndian
	be.PutUint32(frame[0:], w0)
	be.PutUint32(frame[4:], w1)
	be.PutUint32(frame[8:], w2)
	be.PutUint32(frame[12:], src)
	be.PutUint32(frame[16:], dst)
	be.PutUint32(frame[20:], uint32(r.srcPort())<<16|UDPPort)
	be.PutUint32(frame[24:], (n-IPv4HeaderSize)<<16) // UDP checksum 0: SetUDPChecksum
}

// Finish completes a frame whose transport headers, payload and pad are in
// place: it writes the IP and UDP headers, the ICRC and, if r.UDPChecksum,
// the UDP checksum.
func (r *Route) Finish(frame []byte) {
	r.WriteHeaders(frame)
	SetICRC(frame)
	if r.UDPChecksum {
		SetUDPChecksum(frame)
	}
}

// PadLen returns the number of pad bytes that follow a payload of n bytes,
// rounding it up to a multiple of 4.
func PadLen(n int) int { return -n & MaxPad }

// FrameLen returns the length of a frame on route r carrying opcode op and
// payloadLen bytes of payload: IP and UDP headers, BTH and extension
// headers, payload, pad and ICRC.
func FrameLen(r *Route, op Opcode, payloadLen int) int {
	return r.HeaderLen() + op.Info().HdrLen + payloadLen + PadLen(payloadLen) + ICRCSize
}
