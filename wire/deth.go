package wire

import "encoding/binary"

// DETH is a view of a Datagram Extended Transport Header (IBTA §9.3.2),
// carried by every UD packet: the Q_Key that authorises the send and the
// sender's QP. Accessors do not check the length: check len(d) >= DETHSize
// first (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Queue Key                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Reserved    |            Source QP                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DETH []byte

const (
	dethQKey  = 0
	dethSrcQP = 4 // read as a 32-bit word, low 24 bits
)

// Encode writes all 8 bytes of the DETH, zeroing the reserved byte.
func (d DETH) Encode(qkey, srcQP uint32) {
	_ = d[DETHSize-1]
	binary.BigEndian.PutUint32(d[dethQKey:], qkey)
	binary.BigEndian.PutUint32(d[dethSrcQP:], srcQP&QPNMask)
}

// QKey returns the "queue key" field of the DETH.
func (d DETH) QKey() uint32 { return binary.BigEndian.Uint32(d[dethQKey:]) }

// SrcQP returns the "source QP" field of the DETH.
func (d DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(d[dethSrcQP:]) & QPNMask }

// SetQKey sets the "queue key" field of the DETH.
func (d DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32(d[dethQKey:], k) }

// SetSrcQP sets the "source QP" field of the DETH to the low 24 bits of qpn.
func (d DETH) SetSrcQP(qpn uint32) { put24(d[dethSrcQP+1:], qpn) }
