package wire

import "encoding/binary"

// FETH is a view of the FLUSH Extended Transport Header (IBTA 1.5, the
// RDMA FLUSH operation): what a FLUSH makes durable. It follows the BTH of
// an RC FLUSH request, before the RETH that names the range. Accessors do
// not check the length: check len(f) >= FETHSize first (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Reserved                       |SEL| PLT   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// PLT (bits 3..0) is the placement type, one bit each: global visibility
// (FlushGlobal) and persistence (FlushPersistent). SEL (bits 5..4) is the
// selectivity level: the RETH's range (FlushRange) or the whole region its
// R_Key names (FlushMR).
type FETH []byte

// Placement types and selectivity levels of a FLUSH (enum ib_flush_type,
// enum ib_flush_level; rdma-core's IBV_FLUSH_*).
const (
	FlushGlobal     = 1 << 0
	FlushPersistent = 1 << 1

	FlushRange = 0
	FlushMR    = 1
)

const (
	fethPLTMask  = 0x0f
	fethSELMask  = 0x30
	fethSELShift = 4
)

// Encode writes the FETH: placement type and selectivity level, the rest
// zero.
func (f FETH) Encode(placement, level uint8) {
	binary.BigEndian.PutUint32(f, uint32(placement)&fethPLTMask|uint32(level)<<fethSELShift&fethSELMask)
}

// Placement returns the placement type bits.
func (f FETH) Placement() uint8 { return uint8(binary.BigEndian.Uint32(f) & fethPLTMask) }

// Level returns the selectivity level.
func (f FETH) Level() uint8 { return uint8(binary.BigEndian.Uint32(f) & fethSELMask >> fethSELShift) }

// Reserved returns the reserved bits (zero in a well-formed FETH).
func (f FETH) Reserved() uint32 { return binary.BigEndian.Uint32(f) &^ (fethPLTMask | fethSELMask) }
