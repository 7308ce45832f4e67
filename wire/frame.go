package wire

// ipHeaderLen returns the length of the IP header a frame starts with. It
// checks only what it needs to find the UDP header, so that the ICRC and
// checksum code work on frames Parse would reject for other reasons.
func ipHeaderLen(frame []byte) (int, error) {
	if len(frame) == 0 {
		return 0, ErrTruncated
	}
	switch frame[0] >> 4 {
	case 4:
		if len(frame) < IPv4HeaderSize {
			return 0, ErrTruncated
		}
		hl := IPv4(frame).HeaderLen()
		if hl < IPv4HeaderSize {
			return 0, ErrIPHeader
		}
		if hl > len(frame) {
			return 0, ErrTruncated
		}
		return hl, nil
	case 6:
		if len(frame) < IPv6HeaderSize {
			return 0, ErrTruncated
		}
		return IPv6HeaderSize, nil
	}
	return 0, ErrIPVersion
}
