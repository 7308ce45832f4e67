package wire

import "encoding/binary"

// UDP is a view of a UDP header (RFC 768). Accessors do not check the
// length: check len(u) >= UDPHeaderSize first (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Length             |           Checksum            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type UDP []byte

const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6 // masked to ones in the ICRC
)

// UDPFields holds every field of a UDP header, for Encode.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

// Encode writes all 8 bytes of the UDP header from f.
func (u UDP) Encode(f *UDPFields) {
	_ = u[UDPHeaderSize-1]
	binary.BigEndian.PutUint16(u[udpSrcPort:], f.SrcPort)
	binary.BigEndian.PutUint16(u[udpDstPort:], f.DstPort)
	binary.BigEndian.PutUint16(u[udpLength:], f.Length)
	binary.BigEndian.PutUint16(u[udpChecksum:], f.Checksum)
}

// SrcPort returns the "source port" field of the UDP header.
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[udpSrcPort:]) }

// DstPort returns the "destination port" field of the UDP header.
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[udpDstPort:]) }

// Length returns the "length" field of the UDP header (header included).
func (u UDP) Length() uint16 { return binary.BigEndian.Uint16(u[udpLength:]) }

// Checksum returns the "checksum" field of the UDP header (0: none).
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[udpChecksum:]) }

// SetSrcPort sets the "source port" field of the UDP header.
func (u UDP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(u[udpSrcPort:], p) }

// SetDstPort sets the "destination port" field of the UDP header.
func (u UDP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(u[udpDstPort:], p) }

// SetLength sets the "length" field of the UDP header.
func (u UDP) SetLength(n uint16) { binary.BigEndian.PutUint16(u[udpLength:], n) }

// SetChecksum sets the "checksum" field of the UDP header.
func (u UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(u[udpChecksum:], c) }
