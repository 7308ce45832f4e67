package wire

import "encoding/binary"

// IPProtocolUDP is the IPv4 protocol and IPv6 next-header number of UDP.
const IPProtocolUDP = 17

// ECN codepoints: the low two bits of the IPv4 TOS byte and of the IPv6
// traffic class. A switch marks ECN-capable RoCEv2 traffic ECNCE when it
// is congested; the receiver answers with a CNP.
const (
	ECNNotECT = 0
	ECNECT1   = 1
	ECNECT0   = 2
	ECNCE     = 3
	ECNMask   = 3
)

// PacketECN returns the ECN codepoint of an IP packet (its IPv4 or IPv6
// header first), and ok false if it has no whole IP header.
func PacketECN(pkt []byte) (ecn uint8, ok bool) {
	switch {
	case len(pkt) >= IPv4HeaderSize && pkt[0]>>4 == 4:
		return IPv4(pkt).TOS() & ECNMask, true
	case len(pkt) >= IPv6HeaderSize && pkt[0]>>4 == 6:
		// The traffic class straddles bytes 0 and 1: its ECN bits are
		// bits 5..4 of byte 1.
		return pkt[1] >> 4 & ECNMask, true
	}
	return 0, false
}

// ECNCapable reports whether an IP packet is ECT(0) or ECT(1): one a
// congested switch may mark rather than drop.
func ECNCapable(pkt []byte) bool {
	ecn, ok := PacketECN(pkt)
	return ok && (ecn == ECNECT0 || ecn == ECNECT1)
}

// MarkCE marks an ECN-capable IP packet Congestion Experienced, as a
// congested switch does (the IPv4 header checksum recomputed; the ICRC
// masks the ECN bits, so it stays valid), and reports whether it did: a
// packet that is not ECN-capable is left as it is.
func MarkCE(pkt []byte) bool {
	if !ECNCapable(pkt) {
		return false
	}
	if pkt[0]>>4 == 4 {
		ip := IPv4(pkt)
		ip.SetTOS(ip.TOS() | ECNCE)
		ip.SetChecksum(ip.ComputeChecksum())
		return true
	}
	pkt[1] |= ECNCE << 4
	return true
}

// IPv4 flag bits, as returned by IPv4.Flags.
const (
	IPv4FlagMF       = 1 << 0 // more fragments
	IPv4FlagDF       = 1 << 1 // don't fragment
	IPv4FlagReserved = 1 << 2 // must be zero
)

// IPv4 is a view of an IPv4 header (RFC 791). Accessors do not check the
// length: check len(ip) >= IPv4HeaderSize (and HeaderLen) first
// (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options (IHL > 5)                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv4 []byte

const (
	ipv4VersionIHL   = 0
	ipv4TOS          = 1 // masked to ones in the ICRC
	ipv4TotalLength  = 2
	ipv4ID           = 4
	ipv4FlagsFragOff = 6
	ipv4TTL          = 8 // masked to ones in the ICRC
	ipv4Protocol     = 9
	ipv4Checksum     = 10 // masked to ones in the ICRC
	ipv4Src          = 12
	ipv4Dst          = 16

	ipv4FragOffMask = 0x1FFF
	ipv4FlagsShift  = 13
)

// IPv4Fields holds the fields of an option-less IPv4 header, for Encode.
type IPv4Fields struct {
	TOS            uint8
	TotalLength    uint16
	ID             uint16
	Flags          uint8  // IPv4FlagDF, IPv4FlagMF
	FragmentOffset uint16 // in 8-byte units
	TTL            uint8
	Protocol       uint8
	Checksum       uint16
	Src, Dst       [4]byte
}

// Encode writes a 20-byte IPv4 header (version 4, IHL 5) from f. It does
// not compute the checksum; see ComputeChecksum.
func (ip IPv4) Encode(f *IPv4Fields) {
	_ = ip[IPv4HeaderSize-1]
	ip[ipv4VersionIHL] = 4<<4 | IPv4HeaderSize/4
	ip[ipv4TOS] = f.TOS
	binary.BigEndian.PutUint16(ip[ipv4TotalLength:], f.TotalLength)
	binary.BigEndian.PutUint16(ip[ipv4ID:], f.ID)
	binary.BigEndian.PutUint16(ip[ipv4FlagsFragOff:], uint16(f.Flags)<<ipv4FlagsShift|f.FragmentOffset&ipv4FragOffMask)
	ip[ipv4TTL] = f.TTL
	ip[ipv4Protocol] = f.Protocol
	binary.BigEndian.PutUint16(ip[ipv4Checksum:], f.Checksum)
	copy(ip[ipv4Src:], f.Src[:])
	copy(ip[ipv4Dst:], f.Dst[:])
}

// Version returns the "version" field of the IPv4 header (4).
func (ip IPv4) Version() uint8 { return ip[ipv4VersionIHL] >> 4 }

// IHL returns the "internet header length" field, in 32-bit words.
func (ip IPv4) IHL() uint8 { return ip[ipv4VersionIHL] & 0xF }

// HeaderLen returns the header length in bytes, options included.
func (ip IPv4) HeaderLen() int { return int(ip.IHL()) * 4 }

// TOS returns the "type of service" byte of the IPv4 header: DSCP<<2 | ECN.
func (ip IPv4) TOS() uint8 { return ip[ipv4TOS] }

// TotalLength returns the "total length" field of the IPv4 header.
func (ip IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(ip[ipv4TotalLength:]) }

// ID returns the "identification" field of the IPv4 header.
func (ip IPv4) ID() uint16 { return binary.BigEndian.Uint16(ip[ipv4ID:]) }

// Flags returns the 3-bit "flags" field of the IPv4 header.
func (ip IPv4) Flags() uint8 { return ip[ipv4FlagsFragOff] >> 5 }

// FragmentOffset returns the "fragment offset" field, in 8-byte units.
func (ip IPv4) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16(ip[ipv4FlagsFragOff:]) & ipv4FragOffMask
}

// DF reports whether the "don't fragment" flag is set.
func (ip IPv4) DF() bool { return ip.Flags()&IPv4FlagDF != 0 }

// MF reports whether the "more fragments" flag is set.
func (ip IPv4) MF() bool { return ip.Flags()&IPv4FlagMF != 0 }

// TTL returns the "time to live" field of the IPv4 header.
func (ip IPv4) TTL() uint8 { return ip[ipv4TTL] }

// Protocol returns the "protocol" field of the IPv4 header.
func (ip IPv4) Protocol() uint8 { return ip[ipv4Protocol] }

// Checksum returns the "header checksum" field of the IPv4 header.
func (ip IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(ip[ipv4Checksum:]) }

// Src returns the "source address" field of the IPv4 header.
func (ip IPv4) Src() [4]byte { return [4]byte(ip[ipv4Src:]) }

// Dst returns the "destination address" field of the IPv4 header.
func (ip IPv4) Dst() [4]byte { return [4]byte(ip[ipv4Dst:]) }

// SetIHL sets the "version" field to 4 and the "internet header length"
// field to words 32-bit words.
func (ip IPv4) SetIHL(words uint8) { ip[ipv4VersionIHL] = 4<<4 | words&0xF }

// SetTOS sets the "type of service" byte of the IPv4 header.
func (ip IPv4) SetTOS(v uint8) { ip[ipv4TOS] = v }

// SetTotalLength sets the "total length" field of the IPv4 header.
func (ip IPv4) SetTotalLength(n uint16) { binary.BigEndian.PutUint16(ip[ipv4TotalLength:], n) }

// SetID sets the "identification" field of the IPv4 header.
func (ip IPv4) SetID(id uint16) { binary.BigEndian.PutUint16(ip[ipv4ID:], id) }

// SetFlagsFragmentOffset sets the "flags" and "fragment offset" fields.
func (ip IPv4) SetFlagsFragmentOffset(flags uint8, off uint16) {
	binary.BigEndian.PutUint16(ip[ipv4FlagsFragOff:], uint16(flags)<<ipv4FlagsShift|off&ipv4FragOffMask)
}

// SetTTL sets the "time to live" field of the IPv4 header.
func (ip IPv4) SetTTL(v uint8) { ip[ipv4TTL] = v }

// SetProtocol sets the "protocol" field of the IPv4 header.
func (ip IPv4) SetProtocol(p uint8) { ip[ipv4Protocol] = p }

// SetChecksum sets the "header checksum" field of the IPv4 header.
func (ip IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(ip[ipv4Checksum:], c) }

// SetSrc sets the "source address" field of the IPv4 header.
func (ip IPv4) SetSrc(a [4]byte) { copy(ip[ipv4Src:], a[:]) }

// SetDst sets the "destination address" field of the IPv4 header.
func (ip IPv4) SetDst(a [4]byte) { copy(ip[ipv4Dst:], a[:]) }

// ComputeChecksum returns the header checksum that belongs in the header
// (options included), ignoring the current value of the checksum field.
func (ip IPv4) ComputeChecksum() uint16 {
	hl := ip.HeaderLen()
	sum := checksumAdd(0, ip[:ipv4Checksum])
	sum = checksumAdd(sum, ip[ipv4Checksum+2:hl])
	return ^checksumFold(sum)
}

// IsChecksumValid reports whether the header checksum is correct.
func (ip IPv4) IsChecksumValid() bool {
	if ip.IHL() == 5 {
		// Without options, as RoCE's are (every packet received comes
		// here): five words, no loop.
		be := binary.BigEndian
		_ = ip[IPv4HeaderSize-1]
		sum := uint64(be.Uint32(ip)) + uint64(be.Uint32(ip[4:])) + uint64(be.Uint32(ip[8:])) +
			uint64(be.Uint32(ip[12:])) + uint64(be.Uint32(ip[16:]))
		return checksumFold(sum) == 0xFFFF
	}
	return checksumFold(checksumAdd(0, ip[:ip.HeaderLen()])) == 0xFFFF
}

// IPv6 is a view of an IPv6 header (RFC 8200). Accessors do not check the
// length: check len(ip) >= IPv6HeaderSize first (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Source Address (128 bits)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Destination Address (128 bits)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv6 []byte

const (
	ipv6VersionTCFlow = 0 // version, traffic class, flow label: masked in the ICRC
	ipv6PayloadLength = 4
	ipv6NextHeader    = 6
	ipv6HopLimit      = 7 // masked to ones in the ICRC
	ipv6Src           = 8
	ipv6Dst           = 24

	ipv6FlowLabelMask = 0xFFFFF
	ipv6TCShift       = 20
)

// IPv6Fields holds the fields of an IPv6 header, for Encode.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32 // 20 bits
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      [16]byte
}

// Encode writes the 40-byte IPv6 header (version 6) from f.
func (ip IPv6) Encode(f *IPv6Fields) {
	_ = ip[IPv6HeaderSize-1]
	binary.BigEndian.PutUint32(ip[ipv6VersionTCFlow:], 6<<28|uint32(f.TrafficClass)<<ipv6TCShift|f.FlowLabel&ipv6FlowLabelMask)
	binary.BigEndian.PutUint16(ip[ipv6PayloadLength:], f.PayloadLength)
	ip[ipv6NextHeader] = f.NextHeader
	ip[ipv6HopLimit] = f.HopLimit
	copy(ip[ipv6Src:], f.Src[:])
	copy(ip[ipv6Dst:], f.Dst[:])
}

// Version returns the "version" field of the IPv6 header (6).
func (ip IPv6) Version() uint8 { return ip[ipv6VersionTCFlow] >> 4 }

// TrafficClass returns the "traffic class" field: DSCP<<2 | ECN.
func (ip IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint32(ip[ipv6VersionTCFlow:]) >> ipv6TCShift)
}

// FlowLabel returns the 20-bit "flow label" field of the IPv6 header.
func (ip IPv6) FlowLabel() uint32 {
	return binary.BigEndian.Uint32(ip[ipv6VersionTCFlow:]) & ipv6FlowLabelMask
}

// PayloadLength returns the "payload length" field of the IPv6 header.
func (ip IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(ip[ipv6PayloadLength:]) }

// NextHeader returns the "next header" field of the IPv6 header.
func (ip IPv6) NextHeader() uint8 { return ip[ipv6NextHeader] }

// HopLimit returns the "hop limit" field of the IPv6 header.
func (ip IPv6) HopLimit() uint8 { return ip[ipv6HopLimit] }

// Src returns the "source address" field of the IPv6 header.
func (ip IPv6) Src() [16]byte { return [16]byte(ip[ipv6Src:]) }

// Dst returns the "destination address" field of the IPv6 header.
func (ip IPv6) Dst() [16]byte { return [16]byte(ip[ipv6Dst:]) }

// SetTrafficClass sets the "traffic class" field of the IPv6 header.
func (ip IPv6) SetTrafficClass(tc uint8) {
	v := binary.BigEndian.Uint32(ip[ipv6VersionTCFlow:])
	binary.BigEndian.PutUint32(ip[ipv6VersionTCFlow:], v&^(0xFF<<ipv6TCShift)|uint32(tc)<<ipv6TCShift)
}

// SetFlowLabel sets the "flow label" field to the low 20 bits of fl.
func (ip IPv6) SetFlowLabel(fl uint32) {
	v := binary.BigEndian.Uint32(ip[ipv6VersionTCFlow:])
	binary.BigEndian.PutUint32(ip[ipv6VersionTCFlow:], v&^ipv6FlowLabelMask|fl&ipv6FlowLabelMask)
}

// SetPayloadLength sets the "payload length" field of the IPv6 header.
func (ip IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16(ip[ipv6PayloadLength:], n) }

// SetNextHeader sets the "next header" field of the IPv6 header.
func (ip IPv6) SetNextHeader(p uint8) { ip[ipv6NextHeader] = p }

// SetHopLimit sets the "hop limit" field of the IPv6 header.
func (ip IPv6) SetHopLimit(v uint8) { ip[ipv6HopLimit] = v }

// SetSrc sets the "source address" field of the IPv6 header.
func (ip IPv6) SetSrc(a [16]byte) { copy(ip[ipv6Src:], a[:]) }

// SetDst sets the "destination address" field of the IPv6 header.
func (ip IPv6) SetDst(a [16]byte) { copy(ip[ipv6Dst:], a[:]) }
