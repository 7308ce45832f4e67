package wire

// The UDP checksum of a whole frame. RoCEv2 senders normally send 0 (no
// checksum; the ICRC protects the packet), as rxe does; a sender that goes
// through a kernel UDP socket gets one computed.

// SetUDPChecksum computes the UDP checksum of a frame that starts at its IP
// header, over the pseudo header and the UDP datagram, which runs to the
// end of the frame. Call it last: the checksum covers the ICRC, while the
// ICRC masks the checksum. A computed 0 is sent as 0xFFFF (RFC 768). It
// panics if the frame has no valid IP and UDP header, which only a bug in
// the caller's encoder can cause.
func SetUDPChecksum(frame []byte) {
	hl, err := ipHeaderLen(frame)
	if err != nil || len(frame) < hl+UDPHeaderSize {
		panic("wire: SetUDPChecksum on a malformed frame")
	}
	udp := UDP(frame[hl:])
	udp.SetChecksum(0)
	c := ^udpChecksumSum(frame, hl)
	if c == 0 {
		c = 0xFFFF
	}
	udp.SetChecksum(c)
}

// CheckUDPChecksum verifies the UDP checksum of a frame that starts at its
// IP header. A zero checksum means "none" and passes (on IPv6 too, as RFC
// 6936 allows for tunnels). It returns ErrUDPChecksum on a mismatch and a
// parse error if the headers cannot be found.
func CheckUDPChecksum(frame []byte) error {
	hl, err := ipHeaderLen(frame)
	if err != nil {
		return err
	}
	if len(frame) < hl+UDPHeaderSize {
		return ErrTruncated
	}
	if UDP(frame[hl:]).Checksum() == 0 {
		return nil
	}
	if udpChecksumSum(frame, hl) != 0xFFFF {
		return ErrUDPChecksum
	}
	return nil
}

// udpChecksumSum returns the folded one's-complement sum of the pseudo
// header and the UDP datagram frame[hl:], checksum field included.
func udpChecksumSum(frame []byte, hl int) uint16 {
	n := uint64(len(frame) - hl)
	sum := n + IPProtocolUDP
	if frame[0]>>4 == 4 {
		sum = checksumAdd(sum, frame[ipv4Src:ipv4Dst+4])
	} else {
		sum = checksumAdd(sum, frame[ipv6Src:ipv6Dst+16])
	}
	return checksumFold(checksumAdd(sum, frame[hl:]))
}
