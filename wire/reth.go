package wire

import "encoding/binary"

// RETH is a view of an RDMA Extended Transport Header (IBTA §9.3.3): where
// an RDMA WRITE or READ goes in the responder's memory. It follows the BTH
// of WRITE FIRST/ONLY and READ requests. Accessors do not check the length:
// check len(r) >= RETHSize first (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Virtual Address (63..32)                   |
//	|                    Virtual Address (31..0)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Remote Key                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          DMA Length                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type RETH []byte

const (
	rethVA     = 0
	rethRKey   = 8
	rethDMALen = 12
)

// Encode writes all 16 bytes of the RETH.
func (r RETH) Encode(va uint64, rkey, dmaLen uint32) {
	_ = r[RETHSize-1]
	binary.BigEndian.PutUint64(r[rethVA:], va)
	binary.BigEndian.PutUint32(r[rethRKey:], rkey)
	binary.BigEndian.PutUint32(r[rethDMALen:], dmaLen)
}

// VA returns the "virtual address" field of the RETH.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r[rethVA:]) }

// RKey returns the "remote key" field of the RETH.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[rethRKey:]) }

// DMALen returns the "DMA length" field of the RETH: the length of the
// whole message, not of this packet.
func (r RETH) DMALen() uint32 { return binary.BigEndian.Uint32(r[rethDMALen:]) }

// SetVA sets the "virtual address" field of the RETH.
func (r RETH) SetVA(va uint64) { binary.BigEndian.PutUint64(r[rethVA:], va) }

// SetRKey sets the "remote key" field of the RETH.
func (r RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(r[rethRKey:], k) }

// SetDMALen sets the "DMA length" field of the RETH.
func (r RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32(r[rethDMALen:], n) }
