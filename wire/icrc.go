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
	if frame[0]>>4 == 6 {
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

	crc := crcUpdate(icrcSeed, hdr[:n])
	return crc32.Update(crc, crc32.IEEETable, frame[n:len(frame)-ICRCSize]), nil
}

// SetICRC computes the ICRC of a complete frame (headers, payload and pad in
// place) and stores it in the frame's last 4 bytes. The IP and UDP lengths
// must already be final. It panics if the frame is malformed, which only a
// bug in the caller's encoder can cause.
func SetICRC(frame []byte) {
	crc, err := ComputeICRC(frame)
	if err != nil {
		panic("wire: SetICRC: " + err.Error())
	}
	binary.LittleEndian.PutUint32(frame[len(frame)-ICRCSize:], crc)
}

// CheckICRC verifies the ICRC of a frame that starts at its IP header. It
// returns ErrICRC on a mismatch, a parse error if the headers cannot be
// found, and never panics.
func CheckICRC(frame []byte) error {
	crc, err := ComputeICRC(frame)
	if err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(frame[len(frame)-ICRCSize:]) != crc {
		return ErrICRC
	}
	return nil
}
