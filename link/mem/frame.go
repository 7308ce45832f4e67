package mem

import "net/netip"

// Offsets within a frame, which starts at its IP header (RFC 791, RFC 8200).
const (
	ipv4MinHeader = 20
	ipv4Protocol  = 9
	ipv4Dst       = 16
	ipv6Header    = 40
	ipv6NextHdr   = 6
	ipv6Dst       = 24
	udpHeader     = 8
	protoUDP      = 17
)

// frameDst returns the frame's IP destination, unmapped, or false if the
// frame is too short or not IPv4/IPv6.
func frameDst(frame []byte) (netip.Addr, bool) {
	if len(frame) == 0 {
		return netip.Addr{}, false
	}
	switch frame[0] >> 4 {
	case 4:
		if len(frame) >= ipv4MinHeader {
			return netip.AddrFrom4([4]byte(frame[ipv4Dst:])), true
		}
	case 6:
		if len(frame) >= ipv6Header {
			return netip.AddrFrom16([16]byte(frame[ipv6Dst:])).Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// udpPayload returns the offset of the UDP payload (the BTH) in frame, or
// -1 if the frame carries no UDP payload. RoCEv2 uses no IPv6 extension
// headers, so a Next Header other than UDP means "not ours".
func udpPayload(frame []byte) int {
	off := -1
	switch {
	case len(frame) == 0:
	case frame[0]>>4 == 4 && len(frame) >= ipv4MinHeader && frame[ipv4Protocol] == protoUDP:
		if ihl := int(frame[0]&0x0f) * 4; ihl >= ipv4MinHeader {
			off = ihl + udpHeader
		}
	case frame[0]>>4 == 6 && len(frame) >= ipv6Header && frame[ipv6NextHdr] == protoUDP:
		off = ipv6Header + udpHeader
	}
	if off >= len(frame) {
		return -1
	}
	return off
}
