package hostif

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The queues in shared memory: what a program's verbs library writes and
// the NIC reads, and back, as a hardware RNIC's rings in host memory. A
// queue is an array of fixed-size slots in memory both map (memory the
// NIC creates, sealed against shrinking, so that a program cannot pull it
// from under the NIC); indices are free-running uint32 counters, the slot
// being index mod depth (a power of two). All fields are little-endian.
//
// The NIC copies a slot out once before it looks at it: the program may
// change its memory at any time, and what the NIC checks is what it uses.
//
// Send WQE (WQESize bytes):
//
//	 0 wr_id u64        8 opcode u8  9 send_flags u8  10 num_sge u8
//	12 imm_data / invalidate_rkey u32 (host order)
//	16 remote_addr u64 24 rkey u32   28 inline_len u32
//	32 compare_add u64 40 swap u64
//	48 remote_qpn u32  52 remote_qkey u32  56 ah u32
//	64 num_sge × {addr u64, length u32, lkey u32}, or inline_len bytes
//
// A BIND_MW WQE (opcode 8) puts the bind in the same fields: 12 the
// window's rkey, 16 addr, 24 the new rkey, 32 length u64, 40 mw_access
// u32, 48 the region's lkey. An ATOMIC WRITE (15) carries its 8 bytes at
// 32 (the little-endian word of the program's bytes); a FLUSH (14) its
// length at 32 (u64), placement type at 40 and selectivity level at 41.
//
// Receive WQE: 0 wr_id u64, 8 num_sge u8, 16 the SGEs.
//
// CQE (CQELen bytes): 0 wr_id u64, 8 status u32, 12 opcode u32,
// 16 wc_flags u32, 20 byte_len u32, 24 imm_data / invalidated_rkey u32,
// 28 qp_num u32, 32 src_qp u32, 36 vendor_err u32, 40 pkey_index u16,
// 42 sl u8, 60 owner u32: the lap (index / depth + 1, never 0) of the
// index the NIC wrote it at, stored last, so that a program polls a slot
// by its owner word alone.

// Sizes of the formats.
const (
	WQEHeaderLen  = 64
	RecvHeaderLen = 16
	SGELen        = 16
	CQELen        = 64
	// MaxSGE bounds the SGEs of a work request in a slot.
	MaxSGE = 32
)

// SGE is a scatter/gather element in a slot.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWQE is a send WQE copied out of its slot.
type SendWQE struct {
	WRID                  uint64
	Opcode, Flags, NumSGE uint8
	Imm                   uint32
	RemoteAddr            uint64
	RKey, InlineLen       uint32
	CompareAdd, Swap      uint64
	RemoteQPN, RemoteQKey uint32
	AH                    uint32
	SGL                   [MaxSGE]SGE
	Inline                []byte // aliases the copy of the slot
}

// RecvWQE is a receive WQE copied out of its slot.
type RecvWQE struct {
	WRID   uint64
	NumSGE uint8
	SGL    [MaxSGE]SGE
}

// CQE is a completion as the NIC writes it.
type CQE struct {
	WRID                                uint64
	Status, Opcode, Flags, ByteLen, Imm uint32
	QPNum, SrcQP, VendorErr             uint32
	PKeyIndex                           uint16
	SL                                  uint8
}

// WQESize is the slot size of a send queue whose WQEs carry up to maxSGE
// SGEs or maxInline inline bytes: a power of two, at least 64.
func WQESize(maxSGE, maxInline int) int {
	return pow2(WQEHeaderLen + max(SGELen*maxSGE, maxInline))
}

// RecvWQESize is the slot size of a receive queue of maxSGE SGEs.
func RecvWQESize(maxSGE int) int { return pow2(RecvHeaderLen + SGELen*maxSGE) }

func pow2(n int) int { return 1 << bits.Len(uint(n-1)) }

// DecodeSend copies slot into w and checks its counts against the slot:
// a malformed WQE is an error, never a read outside the slot. slot is the
// NIC's own copy (the caller copied it out of shared memory).
func DecodeSend(slot []byte, w *SendWQE) error {
	if len(slot) < WQEHeaderLen {
		return fmt.Errorf("%w: %d-byte WQE slot", ErrMalformed, len(slot))
	}
	le := binary.LittleEndian
	w.WRID = le.Uint64(slot)
	w.Opcode, w.Flags, w.NumSGE = slot[8], slot[9], slot[10]
	w.Imm = le.Uint32(slot[12:])
	w.RemoteAddr, w.RKey, w.InlineLen = le.Uint64(slot[16:]), le.Uint32(slot[24:]), le.Uint32(slot[28:])
	w.CompareAdd, w.Swap = le.Uint64(slot[32:]), le.Uint64(slot[40:])
	w.RemoteQPN, w.RemoteQKey, w.AH = le.Uint32(slot[48:]), le.Uint32(slot[52:]), le.Uint32(slot[56:])
	body := slot[WQEHeaderLen:]
	w.Inline = nil
	if w.InlineLen > 0 {
		if w.NumSGE != 0 || int64(w.InlineLen) > int64(len(body)) {
			return fmt.Errorf("%w: %d inline bytes and %d SGEs in a %d-byte slot", ErrMalformed, w.InlineLen, w.NumSGE, len(slot))
		}
		w.Inline = body[:w.InlineLen:w.InlineLen]
		return nil
	}
	if int(w.NumSGE) > MaxSGE || int(w.NumSGE)*SGELen > len(body) {
		return fmt.Errorf("%w: %d SGEs in a %d-byte slot", ErrMalformed, w.NumSGE, len(slot))
	}
	for i := range int(w.NumSGE) {
		s := body[i*SGELen:]
		w.SGL[i] = SGE{Addr: le.Uint64(s), Length: le.Uint32(s[8:]), LKey: le.Uint32(s[12:])}
	}
	return nil
}

// EncodeSend writes w into slot (the program's side).
func EncodeSend(slot []byte, w *SendWQE) error {
	n := int(w.NumSGE) * SGELen
	if len(w.Inline) > 0 {
		n = len(w.Inline)
	}
	if len(slot) < WQEHeaderLen+n || int(w.NumSGE) > MaxSGE || len(w.Inline) > 0 && w.NumSGE != 0 {
		return fmt.Errorf("hostif: a WQE of %d SGEs and %d inline bytes does not fit a %d-byte slot", w.NumSGE, len(w.Inline), len(slot))
	}
	le := binary.LittleEndian
	clear(slot[:WQEHeaderLen])
	le.PutUint64(slot, w.WRID)
	slot[8], slot[9], slot[10] = w.Opcode, w.Flags, w.NumSGE
	le.PutUint32(slot[12:], w.Imm)
	le.PutUint64(slot[16:], w.RemoteAddr)
	le.PutUint32(slot[24:], w.RKey)
	le.PutUint32(slot[28:], uint32(len(w.Inline)))
	le.PutUint64(slot[32:], w.CompareAdd)
	le.PutUint64(slot[40:], w.Swap)
	le.PutUint32(slot[48:], w.RemoteQPN)
	le.PutUint32(slot[52:], w.RemoteQKey)
	le.PutUint32(slot[56:], w.AH)
	body := slot[WQEHeaderLen:]
	if len(w.Inline) > 0 {
		copy(body, w.Inline)
		return nil
	}
	for i, s := range w.SGL[:w.NumSGE] {
		le.PutUint64(body[i*SGELen:], s.Addr)
		le.PutUint32(body[i*SGELen+8:], s.Length)
		le.PutUint32(body[i*SGELen+12:], s.LKey)
	}
	return nil
}

// DecodeRecv copies a receive slot into w, checking its count.
func DecodeRecv(slot []byte, w *RecvWQE) error {
	if len(slot) < RecvHeaderLen {
		return fmt.Errorf("%w: %d-byte receive slot", ErrMalformed, len(slot))
	}
	le := binary.LittleEndian
	w.WRID, w.NumSGE = le.Uint64(slot), slot[8]
	body := slot[RecvHeaderLen:]
	if int(w.NumSGE) > MaxSGE || int(w.NumSGE)*SGELen > len(body) {
		return fmt.Errorf("%w: %d SGEs in a %d-byte receive slot", ErrMalformed, w.NumSGE, len(slot))
	}
	for i := range int(w.NumSGE) {
		s := body[i*SGELen:]
		w.SGL[i] = SGE{Addr: le.Uint64(s), Length: le.Uint32(s[8:]), LKey: le.Uint32(s[12:])}
	}
	return nil
}

// EncodeRecv writes w into a receive slot (the program's side).
func EncodeRecv(slot []byte, w *RecvWQE) error {
	if int(w.NumSGE) > MaxSGE || len(slot) < RecvHeaderLen+int(w.NumSGE)*SGELen {
		return fmt.Errorf("hostif: a receive WQE of %d SGEs does not fit a %d-byte slot", w.NumSGE, len(slot))
	}
	le := binary.LittleEndian
	clear(slot[:RecvHeaderLen])
	le.PutUint64(slot, w.WRID)
	slot[8] = w.NumSGE
	for i, s := range w.SGL[:w.NumSGE] {
		b := slot[RecvHeaderLen+i*SGELen:]
		le.PutUint64(b, s.Addr)
		le.PutUint32(b[8:], s.Length)
		le.PutUint32(b[12:], s.LKey)
	}
	return nil
}

// PutCQE writes c into slot (CQELen bytes, 4-byte aligned) at lap, the
// owner word last, with a release store: a program that sees the owner
// sees the rest.
func PutCQE(slot []byte, c *CQE, lap uint32) {
	le := binary.LittleEndian
	le.PutUint64(slot, c.WRID)
	le.PutUint32(slot[8:], c.Status)
	le.PutUint32(slot[12:], c.Opcode)
	le.PutUint32(slot[16:], c.Flags)
	le.PutUint32(slot[20:], c.ByteLen)
	le.PutUint32(slot[24:], c.Imm)
	le.PutUint32(slot[28:], c.QPNum)
	le.PutUint32(slot[32:], c.SrcQP)
	le.PutUint32(slot[36:], c.VendorErr)
	le.PutUint16(slot[40:], c.PKeyIndex)
	slot[42] = c.SL
	Word(slot, 60).Store(lap)
}

// GetCQE reads the CQE in slot if its owner word says lap (the program's
// side), with an acquire load of the owner first.
func GetCQE(slot []byte, lap uint32, c *CQE) bool {
	if Word(slot, 60).Load() != lap {
		return false
	}
	le := binary.LittleEndian
	c.WRID = le.Uint64(slot)
	c.Status, c.Opcode, c.Flags = le.Uint32(slot[8:]), le.Uint32(slot[12:]), le.Uint32(slot[16:])
	c.ByteLen, c.Imm, c.QPNum = le.Uint32(slot[20:]), le.Uint32(slot[24:]), le.Uint32(slot[28:])
	c.SrcQP, c.VendorErr = le.Uint32(slot[32:]), le.Uint32(slot[36:])
	c.PKeyIndex, c.SL = le.Uint16(slot[40:]), slot[42]
	return true
}

// Lap is the owner value of ring index i in a ring of depth slots.
func Lap(i uint32, depth uint32) uint32 { return i/depth + 1 }

// The doorbell page's word 0: the NIC's state, which a program reads
// after storing a producer index to learn whether the NIC needs waking.
const (
	NICRunning = 0 // the NIC polls: a doorbell needs nothing more
	NICAsleep  = 1 // it sleeps: the program that swaps in NICWaking writes the wake-up eventfd
	NICWaking  = 2 // a wake-up is on its way: the programs' other doorbells need none
)

// Word returns the 4-byte-aligned word at off of shared memory m, for
// atomic loads and stores (doorbell records, the NIC's state, owner
// words). It panics if off is not aligned or out of m: offsets come from
// the NIC's own layout, never from the program.
func Word(m []byte, off int) *atomic.Uint32 {
	if off%4 != 0 || off < 0 || off+4 > len(m) {
		panic(fmt.Sprintf("hostif: word at %d of %d bytes", off, len(m)))
	}
	return (*atomic.Uint32)(unsafe.Pointer(&m[off]))
}
