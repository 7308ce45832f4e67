package wire

import "errors"

// Parse errors. Each reason a frame is rejected has its own sentinel so that
// the NIC can count drops per reason (as rxe counts RXE_CNT_*); compare with
// errors.Is or ==.
var (
	// ErrTruncated: the frame ends before a header it must contain.
	ErrTruncated = errors.New("wire: truncated frame")
	// ErrIPVersion: the IP version is neither 4 nor 6.
	ErrIPVersion = errors.New("wire: unsupported IP version")
	// ErrIPHeader: a malformed IP header (IPv4 IHL < 5, the reserved
	// flag set, or an IPv6 packet with IPv4-mapped addresses).
	ErrIPHeader = errors.New("wire: malformed IP header")
	// ErrIPChecksum: the IPv4 header checksum is wrong.
	ErrIPChecksum = errors.New("wire: bad IPv4 header checksum")
	// ErrIPLength: the IP total (IPv4) or payload (IPv6) length does not
	// match the frame length.
	ErrIPLength = errors.New("wire: IP length does not match frame")
	// ErrFragment: the packet is an IPv4 fragment; RoCEv2 never fragments.
	ErrFragment = errors.New("wire: IP fragment")
	// ErrNotUDP: the IP payload is not UDP (IPv6 extension headers
	// included).
	ErrNotUDP = errors.New("wire: not UDP")
	// ErrNotRoCEPort: the UDP destination port is not 4791.
	ErrNotRoCEPort = errors.New("wire: UDP destination port is not RoCEv2")
	// ErrUDPLength: the UDP length does not match the IP payload.
	ErrUDPLength = errors.New("wire: UDP length does not match IP payload")
	// ErrUDPChecksum: a non-zero UDP checksum is wrong.
	ErrUDPChecksum = errors.New("wire: bad UDP checksum")
	// ErrOpcode: the BTH opcode is not one this NIC implements.
	ErrOpcode = errors.New("wire: invalid opcode")
	// ErrTVer: the BTH transport header version is not 0.
	ErrTVer = errors.New("wire: unsupported BTH transport version")
	// ErrPad: the pad count exceeds the payload room, or payload plus pad
	// is not a multiple of 4 bytes.
	ErrPad = errors.New("wire: bad pad count")
	// ErrLength: an opcode without payload carries payload, or a CNP is not
	// exactly BTH + 16 reserved bytes.
	ErrLength = errors.New("wire: payload length not allowed for opcode")
	// ErrICRC: the Invariant CRC does not match the packet.
	ErrICRC = errors.New("wire: bad ICRC")
	// ErrGIDSyntax: a string is neither an IP address nor 32 hex digits.
	ErrGIDSyntax = errors.New("wire: invalid GID syntax")
)
