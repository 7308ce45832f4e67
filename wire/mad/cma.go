package mad

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// PortSpace is an rdma_cm port space (RDMA_PS_*): with the port, what
// the service ID of an rdma_cm id is.
type PortSpace uint16

const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceIB    PortSpace = 0x013F
	PortSpaceTCP   PortSpace = 0x0106 // RC ids
	PortSpaceUDP   PortSpace = 0x0111 // UD ids (SIDR)
)

// ServiceID is the service ID rdma_cm forms for port of port space ps.
func ServiceID(ps PortSpace, port uint16) uint64 {
	return 0x0000000001000000 | uint64(ps)<<16 | uint64(port)
}

// SplitServiceID returns the port space and port of an rdma_cm service
// ID, and false if id is not one. (The port spaces used over RoCE all
// have 0x01 in their high byte, the prefix's last bit, so bits 16-31 of
// the ID are the port space whole.)
func SplitServiceID(id uint64) (PortSpace, uint16, bool) {
	if id>>24 != 1 {
		return 0, 0, false
	}
	return PortSpace(id >> 16 & 0xFFFF), uint16(id), true
}

// CMAHeaderSize is the length of rdma_cm's header at the start of a
// REQ's (and SIDR_REQ's) private data; the application's private data
// follow it (56 bytes of a REQ's 92).
const CMAHeaderSize = 36

// CMAHeader is rdma_cm's header in a REQ's private data (the kernel's
// struct cma_hdr): version 0, the IP version in the high nibble of byte
// 1, the active side's port, its address and the passive side's, each
// 16 bytes (an IPv4 address in the last 4).
//
//	+---------+---------+-------------------+
//	| version | IPver<<4| source port       |
//	+---------+---------+-------------------+
//	| source address (16)                   |
//	| destination address (16)              |
type CMAHeader struct {
	Version  uint8
	Src, Dst netip.AddrPort // Dst's port is the service ID's
}

// DecodeCMAHeader reads rdma_cm's header from private data p, giving Dst
// the port of service ID sid.
func DecodeCMAHeader(p []byte, sid uint64) (CMAHeader, error) {
	if len(p) < CMAHeaderSize {
		return CMAHeader{}, fmt.Errorf("mad: %d bytes of private data for rdma_cm's %d-byte header", len(p), CMAHeaderSize)
	}
	h := CMAHeader{Version: p[0]}
	port := binary.BigEndian.Uint16(p[2:])
	_, dport, _ := SplitServiceID(sid)
	var src, dst netip.Addr
	switch p[1] >> 4 {
	case 4:
		src, dst = netip.AddrFrom4([4]byte(p[16:20])), netip.AddrFrom4([4]byte(p[32:36]))
	case 6:
		src, dst = netip.AddrFrom16([16]byte(p[4:20])), netip.AddrFrom16([16]byte(p[20:36]))
	default:
		return CMAHeader{}, fmt.Errorf("mad: rdma_cm header of IP version %d", p[1]>>4)
	}
	h.Src, h.Dst = netip.AddrPortFrom(src, port), netip.AddrPortFrom(dst, dport)
	return h, nil
}

// Encode writes the header into the first CMAHeaderSize bytes of p.
func (h *CMAHeader) Encode(p []byte) {
	clear(p[:CMAHeaderSize])
	p[0] = h.Version
	binary.BigEndian.PutUint16(p[2:], h.Src.Port())
	if h.Src.Addr().Is4() {
		p[1] = 4 << 4
		s, d := h.Src.Addr().As4(), h.Dst.Addr().As4()
		copy(p[16:20], s[:])
		copy(p[32:36], d[:])
		return
	}
	p[1] = 6 << 4
	s, d := h.Src.Addr().As16(), h.Dst.Addr().As16()
	copy(p[4:20], s[:])
	copy(p[20:36], d[:])
}
