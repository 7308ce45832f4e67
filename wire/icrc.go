package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// The Invariant CRC (IBTA annex A17.3.3, as rxe_icrc.c computes it) covers
// every byte of the packet from the IP header to the end of the pad, with
// the fields a router may change replaced by ones:
//
//	8 bytes 0xFF            the LRH an InfiniBand packet would have
//	IPv4 header             TOS, TTL and header checksum = ones
//	  or IPv6 header        traffic class, flow label and hop limit = ones
//	UDP header              checksum = ones
//	BTH                     byte 4 (FECN, BECN, resv6) = ones
//	extension headers, payload, pad
//
// It is CRC-32 as in Ethernet (crc32.ChecksumIEEE) and is stored
// little-endian in the last 4 bytes of the frame.
//
// IPv4 options, if any, are covered as part of the IP header.

// icrcSeed is the CRC of the 8 bytes of 0xFF that stand for the masked
// LRH (rxe starts from the equivalent internal state 0xdebb20e3).
const icrcSeed = 0x2144DF1C

// maxMaskedHeader is the longest IP + UDP + BTH prefix: IPv4 with 40 bytes
// of options.
const maxMaskedHeader = 60 + UDPHeaderSize + BTHSize

// ComputeICRC returns the ICRC of a frame that starts at its IP header
// (IPv4 or IPv6) and ends with the 4 ICRC bytes, which are not covered.
// It checks only that the headers can be found (ErrTruncated, ErrIPVersion,
// ErrIPHeader); it does not allocate.
func ComputeICRC(frame []byte) (uint32, error) {
	hl, err := ipHeaderLen(frame)
	if err != nil {
		return 0, err
	}
	n := hl + UDPHeaderSize + BTHSize // the masked prefix
	if len(frame) < n+ICRCSize {
		return 0, ErrTruncated
	}
	var hdr [maxMaskedHeader]byte
	copy(hdr[:], frame[:n])
	maskVariant(hdr[:n], hl)
	crc := crcUpdate(icrcSeed, hdr[:n])
	return crc32.Update(crc, crc32.IEEETable, frame[n:len(frame)-ICRCSize]), nil
}

// maskVariant sets to ones, in a copy of a frame's first bytes (its IP
// header of hl bytes, the UDP header and at least the BTH's first five
// bytes), the fields the ICRC masks.
func maskVariant(hdr []byte, hl int) {
	if hdr[0]>>4 == 6 {
		hdr[0] |= 0x0F // traffic class, high nibble
		hdr[1], hdr[2], hdr[3] = 0xFF, 0xFF, 0xFF
		hdr[ipv6HopLimit] = 0xFF
	} else {
		hdr[ipv4TOS] = 0xFF
		hdr[ipv4TTL] = 0xFF
		hdr[ipv4Checksum], hdr[ipv4Checksum+1] = 0xFF, 0xFF
	}
	hdr[hl+udpChecksum], hdr[hl+udpChecksum+1] = 0xFF, 0xFF
	hdr[hl+UDPHeaderSize+bthResv8a] = 0xFF
}

// SetICRC computes the ICRC of a complete frame (headers, payload and pad in
// place) and stores it in the frame's last 4 bytes. The IP and UDP lengths
// must already be final. It panics if the frame is malformed, which only a
// bug in the caller's encoder can cause. The frame is the caller's alone
// while SetICRC runs (see icrcInPlace).
func SetICRC(frame []byte) {
	crc, err := icrcInPlace(frame)
	if err != nil {
		panic("wire: SetICRC: " + err.Error())
	}
	binary.LittleEndian.PutUint32(frame[len(frame)-ICRCSize:], crc)
}

// CheckICRCOwned is CheckICRC for a frame that is the caller's alone
// while it runs, as a received frame is its receiver's: it computes the
// ICRC in place (see icrcInPlace), where CheckICRC copies the header.
// The frame is unchanged when it returns.
func CheckICRCOwned(frame []byte) error {
	crc, err := icrcInPlace(frame)
	return stored(frame, crc, err)
}

// icrcInPlace is ComputeICRC for a frame no one else reads or writes
// meanwhile: it masks the variant fields in the frame, computes the CRC of
// the whole frame in one crc32.Update, and puts the fields back. One call
// over a whole small packet takes hash/crc32's folding path (16 bytes an
// instruction, from 64 bytes on), which a separate pass over the 40-byte
// header cannot: the header cost as much as the rest of a 64-byte WRITE.
// It masks ComputeICRC's fields one by one, which costs less than saving
// and restoring the header whole (TestSetICRCInPlace and FuzzParse check
// that the two agree).
func icrcInPlace(frame []byte) (uint32, error) {
	hl, err := ipHeaderLen(frame)
	if err != nil {
		return 0, err
	}
	n := hl + UDPHeaderSize + BTHSize
	if len(frame) < n+ICRCSize {
		return 0, ErrTruncated
	}
	var saved [5]uint32
	ip := frame[:hl]
	v6 := frame[0]>>4 == 6
	if v6 {
		saved[0] = binary.BigEndian.Uint32(ip) // version, traffic class, flow label
		saved[1] = uint32(ip[ipv6HopLimit])
		binary.BigEndian.PutUint32(ip, saved[0]|0x0FFFFFFF)
		ip[ipv6HopLimit] = 0xFF
	} else {
		saved[0] = uint32(ip[ipv4TOS])
		saved[1] = uint32(ip[ipv4TTL])
		saved[2] = uint32(binary.BigEndian.Uint16(ip[ipv4Checksum:]))
		ip[ipv4TOS], ip[ipv4TTL] = 0xFF, 0xFF
		binary.BigEndian.PutUint16(ip[ipv4Checksum:], 0xFFFF)
	}
	udp := frame[hl : hl+UDPHeaderSize]
	saved[3] = uint32(binary.BigEndian.Uint16(udp[udpChecksum:]))
	binary.BigEndian.PutUint16(udp[udpChecksum:], 0xFFFF)
	saved[4] = uint32(frame[hl+UDPHeaderSize+bthResv8a])
	frame[hl+UDPHeaderSize+bthResv8a] = 0xFF

	crc := crc32.Update(icrcSeed, crc32.IEEETable, frame[:len(frame)-ICRCSize])

	if v6 {
		binary.BigEndian.PutUint32(ip, saved[0])
		ip[ipv6HopLimit] = byte(saved[1])
	} else {
		ip[ipv4TOS], ip[ipv4TTL] = byte(saved[0]), byte(saved[1])
		binary.BigEndian.PutUint16(ip[ipv4Checksum:], uint16(saved[2]))
	}
	binary.BigEndian.PutUint16(udp[udpChecksum:], uint16(saved[3]))
	frame[hl+UDPHeaderSize+bthResv8a] = byte(saved[4])
	return crc, nil
}

// CheckICRC verifies the ICRC of a frame that starts at its IP header. It
// returns ErrICRC on a mismatch, a parse error if the headers cannot be
// found, and never panics.
func CheckICRC(frame []byte) error {
	crc, err := ComputeICRC(frame)
	return stored(frame, crc, err)
}

// stored checks the ICRC a frame carries against crc, computed with err.
func stored(frame []byte, crc uint32, err error) error {
	if err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(frame[len(frame)-ICRCSize:]) != crc {
		return ErrICRC
	}
	return nil
}
