package wire

import "encoding/binary"

// AtomicAckETH is a view of an Atomic ACK Extended Transport Header (IBTA
// §9.3.6): the value the remote location held before the atomic operation.
// Accessors do not check the length: check len(a) >= AtomicAckETHSize
// first (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Original Remote Data (63..0)                 |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AtomicAckETH []byte

const atomicAckOrigData = 0

// OrigData returns the "original remote data" field of the AtomicAckETH.
func (a AtomicAckETH) OrigData() uint64 { return binary.BigEndian.Uint64(a[atomicAckOrigData:]) }

// SetOrigData sets the "original remote data" field of the AtomicAckETH.
func (a AtomicAckETH) SetOrigData(v uint64) {
	binary.BigEndian.PutUint64(a[atomicAckOrigData:], v)
}
