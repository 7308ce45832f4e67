package wire

import "encoding/binary"

// AtomicETH is a view of an Atomic Extended Transport Header (IBTA
// §9.3.4), the operands of a CmpSwap or FetchAdd request. Accessors do not
// check the length: check len(a) >= AtomicETHSize first (Packet.Parse
// does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Virtual Address (63..0)                    |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Remote Key                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Swap (or Add) Data (63..0)                   |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Compare Data (63..0)                      |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AtomicETH []byte

const (
	atomicVA      = 0
	atomicRKey    = 8
	atomicSwapAdd = 12
	atomicCompare = 20
)

// Encode writes all 28 bytes of the AtomicETH. FetchAdd ignores compare.
func (a AtomicETH) Encode(va uint64, rkey uint32, swapAdd, compare uint64) {
	_ = a[AtomicETHSize-1]
	binary.BigEndian.PutUint64(a[atomicVA:], va)
	binary.BigEndian.PutUint32(a[atomicRKey:], rkey)
	binary.BigEndian.PutUint64(a[atomicSwapAdd:], swapAdd)
	binary.BigEndian.PutUint64(a[atomicCompare:], compare)
}

// VA returns the "virtual address" field of the AtomicETH (8-byte aligned
// on a valid request).
func (a AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(a[atomicVA:]) }

// RKey returns the "remote key" field of the AtomicETH.
func (a AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(a[atomicRKey:]) }

// SwapAdd returns the "swap (or add) data" field of the AtomicETH.
func (a AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(a[atomicSwapAdd:]) }

// Compare returns the "compare data" field of the AtomicETH.
func (a AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(a[atomicCompare:]) }

// SetVA sets the "virtual address" field of the AtomicETH.
func (a AtomicETH) SetVA(va uint64) { binary.BigEndian.PutUint64(a[atomicVA:], va) }

// SetRKey sets the "remote key" field of the AtomicETH.
func (a AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(a[atomicRKey:], k) }

// SetSwapAdd sets the "swap (or add) data" field of the AtomicETH.
func (a AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(a[atomicSwapAdd:], v) }

// SetCompare sets the "compare data" field of the AtomicETH.
func (a AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(a[atomicCompare:], v) }
