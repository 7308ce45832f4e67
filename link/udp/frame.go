package udp

import (
	"encoding/binary"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// minPayload is the smallest UDP payload of a RoCEv2 frame: a BTH and the
// ICRC.
const minPayload = wire.BTHSize + wire.ICRCSize

// ipv4DF is the IPv4 flags/fragment-offset word the kernel writes for a
// socket with IP_PMTUDISC_DO: DF set, offset 0.
const ipv4DF = wire.IPv4FlagDF << 13

// txFrame is a frame that passed the send checks: its buffer, and the
// destination and traffic class the datagram gets.
type txFrame struct {
	b    *link.Buf
	dst  [16]byte // IPv4 in the first 4 bytes, or IPv6
	port uint16   // UDP destination port
	tos  uint8    // IPv4 TOS or IPv6 traffic class
	ttl  uint8    // IPv4 TTL or IPv6 hop limit
}

// verdict is the outcome of a frame check.
type verdict uint8

const (
	ok verdict = iota
	oversize
	mismatch
	malformed
)

// checkTx decides whether the kernel, sending f's UDP payload from the
// link's socket, would write exactly the IP and UDP header fields that f
// carries and its ICRC covers, and fills t's destination if so. Fields the
// ICRC masks (TOS, TTL, flow label, hop limit, checksums) are not checked;
// the traffic class and the TTL or hop limit travel as control messages,
// so that the datagram carries the frame's (an IPv4 TTL of 0, which the
// kernel cannot send, is a mismatch).
func (l *Link) checkTx(f []byte, t *txFrame) verdict {
	if len(f) > l.mtu {
		return oversize
	}
	if len(f) < wire.IPv4HeaderSize+wire.UDPHeaderSize+minPayload {
		return malformed
	}
	switch f[0] >> 4 {
	case 4:
		ip := wire.IPv4(f)
		if ip.Protocol() != wire.IPProtocolUDP || int(ip.TotalLength()) != len(f) || ip.IHL() < 5 {
			return malformed
		}
		// The kernel writes no options, ID 0 (unconnected socket, DF) and
		// DF; a frame with anything else would fail its ICRC.
		if l.o.v6 || ip.IHL() != 5 || ip.ID() != 0 || binary.BigEndian.Uint16(f[6:]) != ipv4DF ||
			ip.Src() != [4]byte(l.src[:4]) || ip.TTL() == 0 {
			return mismatch
		}
		t.dst = [16]byte{}
		copy(t.dst[:4], f[16:20])
		t.tos, t.ttl = ip.TOS(), ip.TTL()
	case 6:
		if len(f) < wire.IPv6HeaderSize+wire.UDPHeaderSize+minPayload {
			return malformed
		}
		ip := wire.IPv6(f)
		if ip.NextHeader() != wire.IPProtocolUDP || int(ip.PayloadLength()) != len(f)-wire.IPv6HeaderSize {
			return malformed
		}
		t.dst = ip.Dst()
		// An IPv4-mapped destination would make the kernel send IPv4.
		if !l.o.v6 || ip.Src() != l.src || wire.GID(t.dst).IsIPv4() {
			return mismatch
		}
		t.tos, t.ttl = ip.TrafficClass(), ip.HopLimit()
	default:
		return malformed
	}
	u := wire.UDP(f[l.hl-wire.UDPHeaderSize:])
	if int(u.Length()) != len(f)-l.hl+wire.UDPHeaderSize || u.DstPort() == 0 {
		return malformed
	}
	if u.SrcPort() != l.o.Port {
		return mismatch
	}
	t.port = u.DstPort()
	return ok
}

// rebuild writes the IP and UDP headers in front of a datagram received on
// the UDP socket: f is the whole frame, its UDP payload already at
// f[l.hl:]. src holds the sender's address (IPv4 in the first 4 bytes),
// tos the TOS or traffic class and ttl the TTL or hop limit the kernel
// reported.
//
// IPv6: every field the ICRC covers (payload length, next header,
// addresses, UDP ports and length) is known exactly, so the frame is as
// the sender's kernel wrote it, up to masked fields. IPv4: the ID and the
// flags are not reported by the socket; the header gets ID 0 and DF (what
// a link/udp peer writes) and the frame is marked link.FlagIPRebuilt,
// because an rxe peer writes a random ID the ICRC covers. The UDP checksum
// is not reported either and is written 0, what link/udp and rxe send on
// IPv4; IPv6 datagrams carry one, which WireHeaders recomputes for a
// capture.
func (l *Link) rebuild(b *link.Buf, src *[16]byte, srcPort uint16, tos, ttl uint8) {
	f := b.Bytes()
	if l.o.v6 {
		wire.IPv6(f).Encode(&wire.IPv6Fields{
			TrafficClass:  tos,
			PayloadLength: uint16(len(f) - wire.IPv6HeaderSize),
			NextHeader:    wire.IPProtocolUDP,
			HopLimit:      ttl,
			Src:           *src,
			Dst:           l.src,
		})
	} else {
		ip := wire.IPv4(f)
		ip.Encode(&wire.IPv4Fields{
			TOS:         tos,
			TotalLength: uint16(len(f)),
			Flags:       wire.IPv4FlagDF,
			TTL:         ttl,
			Protocol:    wire.IPProtocolUDP,
			Src:         [4]byte(src[:4]),
			Dst:         [4]byte(l.src[:4]),
		})
		ip.SetChecksum(ip.ComputeChecksum())
		b.Flags |= link.FlagIPRebuilt
	}
	wire.UDP(f[l.hl-wire.UDPHeaderSize:]).Encode(&wire.UDPFields{
		SrcPort: srcPort,
		DstPort: l.o.Port,
		Length:  uint16(len(f) - l.hl + wire.UDPHeaderSize),
	})
}

// checkRaw decides whether a datagram from the raw IPv4 socket (the whole
// IP packet) is a frame for this link: the BPF filter already selected on
// destination address and port, but the socket may queue packets before
// the filter is attached, and a filter is not a proof.
func (l *Link) checkRaw(f []byte) verdict {
	if len(f) < wire.IPv4HeaderSize || f[0]>>4 != 4 {
		return malformed
	}
	ip := wire.IPv4(f)
	hl := ip.HeaderLen()
	if hl < wire.IPv4HeaderSize || int(ip.TotalLength()) != len(f) || len(f) < hl+wire.UDPHeaderSize+minPayload ||
		ip.Protocol() != wire.IPProtocolUDP || ip.MF() || ip.FragmentOffset() != 0 ||
		ip.Dst() != [4]byte(l.src[:4]) {
		return malformed
	}
	u := wire.UDP(f[hl:])
	if u.DstPort() != l.o.Port || int(u.Length()) != len(f)-hl {
		return malformed
	}
	return ok
}
