package wire

import "encoding/binary"

// The Internet checksum (RFC 1071) of the IPv4 header and of UDP.

// checksumAdd adds b, as a sequence of big-endian 16-bit words (an odd last
// byte padded with zero), to a running one's-complement sum. Words are
// summed 32 bits at a time into 64 bits; since 2^16 ≡ 1 mod 0xFFFF, folding
// the result gives the same checksum. Every b but the last of a sequence
// must have even length.
func checksumAdd(sum uint64, b []byte) uint64 {
	for len(b) >= 8 {
		sum += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	if len(b) >= 4 {
		sum += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return sum
}

// checksumFold folds a running sum to 16 bits.
func checksumFold(sum uint64) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return uint16(sum)
}
