package wire

import "encoding/binary"

// IETH is a view of an Invalidate Extended Transport Header (IBTA
// §9.3.7): the rkey the responder invalidates when a SEND with invalidate
// completes. Accessors do not check the length: check len(i) >= IETHSize
// first (Packet.Parse does).
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           R_Key                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IETH []byte

const iethRKey = 0

// RKey returns the "R_Key" field of the IETH.
func (i IETH) RKey() uint32 { return binary.BigEndian.Uint32(i[iethRKey:]) }

// SetRKey sets the "R_Key" field of the IETH.
func (i IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(i[iethRKey:], k) }
