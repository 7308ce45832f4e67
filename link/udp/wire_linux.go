package udp

import "github.com/rnic/rnic/wire"

// WireHeaders implements link.WireWriter: it sets the header fields the
// kernel writes differently from the NIC's frame to what the wire
// carries, so that a capture (link/sniff) shows the datagram. On Linux
// the frame and the datagram agree on everything but the IPv6 UDP
// checksum: IPv4 goes with SO_NO_CHECK (checksum 0, as in the frame) and
// every frame's TTL or hop limit is sent as a control message, while an
// IPv6 socket computes the checksum (RFC 8200 requires one, and GSO needs
// it), and a received IPv6 datagram was accepted with a valid one. The
// IPv4 frames the link rebuilds on receive (FlagIPRebuilt) keep ID 0 and
// checksum 0, what a link/udp or rxe peer sends; the socket reports
// neither.
func (l *Link) WireHeaders(frame []byte, sent bool) {
	if l.o.v6 && len(frame) >= wire.IPv6HeaderSize+wire.UDPHeaderSize && frame[0]>>4 == 6 {
		wire.SetUDPChecksum(frame)
	}
}
