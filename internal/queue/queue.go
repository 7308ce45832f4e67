// Package queue is the one binary format of a NIC's queues in host
// memory: send and receive work queue entries (WQEs), completion queue
// entries (CQEs) and the doorbell page's words, as a program writes and
// reads them and the NIC reads and writes them, the way a hardware RNIC's
// rings in host memory are. The provider's C header
// (provider/src/rnic_abi.h) is generated from the tables here
// (internal/abi, go generate), and a test fails when it drifts.
//
// A queue is an array of fixed-size slots; indices are free-running
// uint32 counters, the slot being index mod depth (a power of two). All
// fields are little-endian.
//
// Send WQE (WQESize bytes): a 64-byte header, then num_sge SGEs or
// inline_len bytes of inline data.
//
//	 0 wr_id u64        8 opcode u8  9 send_flags u8  10 num_sge u8
//	12 imm_data / invalidate_rkey u32 (host order)
//	16 remote_addr u64 24 rkey u32   28 inline_len u32
//	32 compare_add u64 40 swap u64
//	48 remote_qpn u32  52 remote_qkey u32  56 ah u32
//
// A BIND_MW WQE (opcode 8) puts the bind in the same fields: 12 the
// window's rkey, 16 addr, 24 the new rkey, 32 length u64, 40 mw_access
// u32, 48 the region's lkey. An ATOMIC WRITE (15) carries its 8 bytes at
// 32 (the little-endian word of the program's bytes); a FLUSH (14) its
// length at 32 (u64), placement type at 40 and selectivity level at 41.
//
// SGE (16 bytes): 0 addr u64, 8 length u32, 12 lkey u32.
//
// Receive WQE: 0 wr_id u64, 8 num_sge u8, 16 the SGEs.
//
// CQE (CQELen bytes): 0 wr_id u64, 8 status u32, 12 opcode u32,
// 16 wc_flags u32, 20 byte_len u32, 24 imm_data / invalidated_rkey u32,
// 28 qp_num u32, 32 src_qp u32, 36 vendor_err u32, 40 pkey_index u16,
// 42 sl u8, 60 owner u32: the lap (index / depth + 1, never 0) of the
// index the NIC wrote it at, stored last, so that a reader polls a slot
// by its owner word alone.
//
// The NIC decodes a slot once, field by field, into a copy of its own
// before it checks or uses it: the program may change its memory at any
// time, and what the NIC checks is what it uses.
package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Field is a field of a format: its name in the generated C header, its
// offset and its size in bytes.
type Field struct {
	Name      string
	Off, Size int
	Doc       string
}

// The send WQE header's fields.
const (
	WQEWRID       = 0
	WQEOpcode     = 8
	WQEFlags      = 9
	WQENumSGE     = 10
	WQEImm        = 12
	WQERemoteAddr = 16
	WQERKey       = 24
	WQEInlineLen  = 28
	WQECompareAdd = 32
	WQESwap       = 40
	WQERemoteQPN  = 48
	WQERemoteQKey = 52
	WQEAH         = 56

	// BIND_MW's fields, in the same header.
	BindMWRKey  = 12
	BindAddr    = 16
	BindNewRKey = 24
	BindLength  = 32
	BindAccess  = 40
	BindMRLKey  = 48

	// FLUSH's and ATOMIC WRITE's.
	FlushLength      = 32
	FlushPlacement   = 40
	FlushLevel       = 41
	AtomicWriteValue = 32
)

// SendFields lists the send WQE header, for the C header.
var SendFields = []Field{
	{"WR_ID", WQEWRID, 8, "wr_id"},
	{"OPCODE", WQEOpcode, 1, "enum ibv_wr_opcode"},
	{"FLAGS", WQEFlags, 1, "enum ibv_send_flags"},
	{"NUM_SGE", WQENumSGE, 1, "SGEs after the header (0 with inline data)"},
	{"IMM", WQEImm, 4, "imm_data in host order, or invalidate_rkey"},
	{"REMOTE_ADDR", WQERemoteAddr, 8, "RDMA and atomic remote address"},
	{"RKEY", WQERKey, 4, "RDMA and atomic rkey"},
	{"INLINE_LEN", WQEInlineLen, 4, "inline bytes after the header"},
	{"COMPARE_ADD", WQECompareAdd, 8, "atomic compare or add value"},
	{"SWAP", WQESwap, 8, "atomic swap value"},
	{"REMOTE_QPN", WQERemoteQPN, 4, "UD destination QPN"},
	{"REMOTE_QKEY", WQERemoteQKey, 4, "UD destination Q_Key"},
	{"AH", WQEAH, 4, "UD address handle"},
}

// BindFields lists a BIND_MW WQE's fields.
var BindFields = []Field{
	{"MW_RKEY", BindMWRKey, 4, "the window's current rkey"},
	{"ADDR", BindAddr, 8, "the window's address"},
	{"NEW_RKEY", BindNewRKey, 4, "the window's rkey after the bind"},
	{"LENGTH", BindLength, 8, "the window's length"},
	{"ACCESS", BindAccess, 4, "mw_access_flags"},
	{"MR_LKEY", BindMRLKey, 4, "the region's lkey"},
}

// FlushFields lists a FLUSH WQE's and an ATOMIC WRITE WQE's fields.
var FlushFields = []Field{
	{"LENGTH", FlushLength, 8, "FLUSH: bytes from remote_addr"},
	{"PLACEMENT", FlushPlacement, 1, "FLUSH: placement type"},
	{"LEVEL", FlushLevel, 1, "FLUSH: selectivity level"},
}

// The SGE's fields.
const (
	SGEAddr   = 0
	SGELength = 8
	SGELKey   = 12
)

// SGEFields lists an SGE's fields.
var SGEFields = []Field{
	{"ADDR", SGEAddr, 8, "address"},
	{"LENGTH", SGELength, 4, "length"},
	{"LKEY", SGELKey, 4, "lkey"},
}

// The receive WQE header's fields.
const (
	RecvWRID   = 0
	RecvNumSGE = 8
)

// RecvFields lists a receive WQE header's fields.
var RecvFields = []Field{
	{"WR_ID", RecvWRID, 8, "wr_id"},
	{"NUM_SGE", RecvNumSGE, 1, "SGEs after the header"},
}

// The CQE's fields.
const (
	CQEWRID      = 0
	CQEStatus    = 8
	CQEOpcode    = 12
	CQEFlags     = 16
	CQEByteLen   = 20
	CQEImm       = 24
	CQEQPNum     = 28
	CQESrcQP     = 32
	CQEVendorErr = 36
	CQEPKeyIndex = 40
	CQESL        = 42
	CQEOwner     = 60
)

// CQEFields lists a CQE's fields.
var CQEFields = []Field{
	{"WR_ID", CQEWRID, 8, "wr_id"},
	{"STATUS", CQEStatus, 4, "enum ibv_wc_status"},
	{"OPCODE", CQEOpcode, 4, "enum ibv_wc_opcode"},
	{"FLAGS", CQEFlags, 4, "wc_flags"},
	{"BYTE_LEN", CQEByteLen, 4, "byte_len"},
	{"IMM", CQEImm, 4, "imm_data in host order, or invalidated_rkey"},
	{"QP_NUM", CQEQPNum, 4, "qp_num"},
	{"SRC_QP", CQESrcQP, 4, "src_qp"},
	{"VENDOR_ERR", CQEVendorErr, 4, "vendor_err"},
	{"PKEY_INDEX", CQEPKeyIndex, 2, "pkey_index"},
	{"SL", CQESL, 1, "sl (RoCE UD: the L3 header type)"},
	{"OWNER", CQEOwner, 4, "the lap the CQE was written at, stored last"},
}

// Sizes of the formats.
const (
	WQEHeaderLen  = 64
	RecvHeaderLen = 16
	SGELen        = 16
	CQELen        = 64
	// MaxSGE bounds the SGEs of a work request in a slot.
	MaxSGE = 32
)

// Sizes lists the formats' sizes, for the C header.
var Sizes = []Field{
	{"WQE_HEADER", 0, WQEHeaderLen, "a send WQE's header"},
	{"RECV_HEADER", 0, RecvHeaderLen, "a receive WQE's header"},
	{"SGE_LEN", 0, SGELen, "an SGE"},
	{"CQE_LEN", 0, CQELen, "a CQE"},
	{"MAX_SGE", 0, MaxSGE, "SGEs a WQE may carry"},
}

// The doorbell page: one page of words the program and the NIC share,
// word 0 the NIC's state, which a program reads after storing a producer
// index to learn whether the NIC needs waking; the objects' words (the
// producer and consumer indices of their queues, a CQ's arm word)
// follow, where the NIC's replies place them.
const (
	DoorbellPageSize = 4096
	DoorbellState    = 0

	NICRunning = 0 // the NIC polls: a doorbell needs nothing more
	NICAsleep  = 1 // it sleeps: the program that swaps in NICWaking writes the wake-up eventfd
	NICWaking  = 2 // a wake-up is on its way: the programs' other doorbells need none
	// NICAsleepSends: it sleeps, and none of the program's QPs is in the
	// error state, so a receive doorbell needs nothing more (the NIC
	// takes a receive WQE from the ring when a message needs one); a send
	// doorbell wakes it as in NICAsleep. A program of a NIC that sleeps
	// with a QP in error sees NICAsleep: a receive posted there must be
	// flushed.
	NICAsleepSends = 3
)

// DoorbellFields lists the doorbell page's constants, for the C header.
var DoorbellFields = []Field{
	{"PAGE_SIZE", 0, DoorbellPageSize, "the doorbell page's size"},
	{"STATE", DoorbellState, 0, "the offset of the NIC's state word"},
	{"NIC_RUNNING", 0, NICRunning, "state: the NIC polls"},
	{"NIC_ASLEEP", 0, NICAsleep, "state: the NIC sleeps; swap in NIC_WAKING and write the eventfd"},
	{"NIC_WAKING", 0, NICWaking, "state: a wake-up is on its way"},
	{"NIC_ASLEEP_SENDS", 0, NICAsleepSends, "state: the NIC sleeps; a send doorbell wakes it as in NIC_ASLEEP, a receive doorbell needs nothing more"},
}

// ErrMalformed is wrapped by the errors of a slot that does not hold a
// well-formed entry.
var ErrMalformed = errors.New("queue: malformed entry")

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
	Inline                []byte // aliases the slot it was decoded from
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

var le = binary.LittleEndian

// DecodeSend decodes slot into w, reading each field once, and checks
// its counts against the slot: a malformed WQE is an error, never a read
// outside the slot. w.Inline aliases slot.
func DecodeSend(slot []byte, w *SendWQE) error {
	if len(slot) < WQEHeaderLen {
		return fmt.Errorf("%w: %d-byte WQE slot", ErrMalformed, len(slot))
	}
	w.WRID = le.Uint64(slot[WQEWRID:])
	w.Opcode, w.Flags, w.NumSGE = slot[WQEOpcode], slot[WQEFlags], slot[WQENumSGE]
	w.Imm = le.Uint32(slot[WQEImm:])
	w.RemoteAddr, w.RKey, w.InlineLen = le.Uint64(slot[WQERemoteAddr:]), le.Uint32(slot[WQERKey:]), le.Uint32(slot[WQEInlineLen:])
	w.CompareAdd, w.Swap = le.Uint64(slot[WQECompareAdd:]), le.Uint64(slot[WQESwap:])
	w.RemoteQPN, w.RemoteQKey, w.AH = le.Uint32(slot[WQERemoteQPN:]), le.Uint32(slot[WQERemoteQKey:]), le.Uint32(slot[WQEAH:])
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
		w.SGL[i] = getSGE(body[i*SGELen:])
	}
	return nil
}

func getSGE(s []byte) SGE {
	return SGE{Addr: le.Uint64(s[SGEAddr:]), Length: le.Uint32(s[SGELength:]), LKey: le.Uint32(s[SGELKey:])}
}

func putSGE(b []byte, s SGE) {
	le.PutUint64(b[SGEAddr:], s.Addr)
	le.PutUint32(b[SGELength:], s.Length)
	le.PutUint32(b[SGELKey:], s.LKey)
}

// EncodeSend writes w into slot (the program's side).
func EncodeSend(slot []byte, w *SendWQE) error {
	n := int(w.NumSGE) * SGELen
	if len(w.Inline) > 0 {
		n = len(w.Inline)
	}
	if len(slot) < WQEHeaderLen+n || int(w.NumSGE) > MaxSGE || len(w.Inline) > 0 && w.NumSGE != 0 {
		return fmt.Errorf("queue: a WQE of %d SGEs and %d inline bytes does not fit a %d-byte slot", w.NumSGE, len(w.Inline), len(slot))
	}
	clear(slot[:WQEHeaderLen])
	le.PutUint64(slot[WQEWRID:], w.WRID)
	slot[WQEOpcode], slot[WQEFlags], slot[WQENumSGE] = w.Opcode, w.Flags, w.NumSGE
	le.PutUint32(slot[WQEImm:], w.Imm)
	le.PutUint64(slot[WQERemoteAddr:], w.RemoteAddr)
	le.PutUint32(slot[WQERKey:], w.RKey)
	le.PutUint32(slot[WQEInlineLen:], uint32(len(w.Inline)))
	le.PutUint64(slot[WQECompareAdd:], w.CompareAdd)
	le.PutUint64(slot[WQESwap:], w.Swap)
	le.PutUint32(slot[WQERemoteQPN:], w.RemoteQPN)
	le.PutUint32(slot[WQERemoteQKey:], w.RemoteQKey)
	le.PutUint32(slot[WQEAH:], w.AH)
	body := slot[WQEHeaderLen:]
	if len(w.Inline) > 0 {
		copy(body, w.Inline)
		return nil
	}
	for i, s := range w.SGL[:w.NumSGE] {
		putSGE(body[i*SGELen:], s)
	}
	return nil
}

// DecodeRecv decodes a receive slot into w, checking its count.
func DecodeRecv(slot []byte, w *RecvWQE) error {
	if len(slot) < RecvHeaderLen {
		return fmt.Errorf("%w: %d-byte receive slot", ErrMalformed, len(slot))
	}
	w.WRID, w.NumSGE = le.Uint64(slot[RecvWRID:]), slot[RecvNumSGE]
	body := slot[RecvHeaderLen:]
	if int(w.NumSGE) > MaxSGE || int(w.NumSGE)*SGELen > len(body) {
		return fmt.Errorf("%w: %d SGEs in a %d-byte receive slot", ErrMalformed, w.NumSGE, len(slot))
	}
	for i := range int(w.NumSGE) {
		w.SGL[i] = getSGE(body[i*SGELen:])
	}
	return nil
}

// EncodeRecv writes w into a receive slot (the program's side).
func EncodeRecv(slot []byte, w *RecvWQE) error {
	if int(w.NumSGE) > MaxSGE || len(slot) < RecvHeaderLen+int(w.NumSGE)*SGELen {
		return fmt.Errorf("queue: a receive WQE of %d SGEs does not fit a %d-byte slot", w.NumSGE, len(slot))
	}
	clear(slot[:RecvHeaderLen])
	le.PutUint64(slot[RecvWRID:], w.WRID)
	slot[RecvNumSGE] = w.NumSGE
	for i, s := range w.SGL[:w.NumSGE] {
		putSGE(slot[RecvHeaderLen+i*SGELen:], s)
	}
	return nil
}

// PutCQE writes c into slot (CQELen bytes, 4-byte aligned) at lap, the
// owner word last, with a release store: a reader that sees the owner
// sees the rest.
func PutCQE(slot []byte, c *CQE, lap uint32) {
	le.PutUint64(slot[CQEWRID:], c.WRID)
	le.PutUint32(slot[CQEStatus:], c.Status)
	le.PutUint32(slot[CQEOpcode:], c.Opcode)
	le.PutUint32(slot[CQEFlags:], c.Flags)
	le.PutUint32(slot[CQEByteLen:], c.ByteLen)
	le.PutUint32(slot[CQEImm:], c.Imm)
	le.PutUint32(slot[CQEQPNum:], c.QPNum)
	le.PutUint32(slot[CQESrcQP:], c.SrcQP)
	le.PutUint32(slot[CQEVendorErr:], c.VendorErr)
	le.PutUint16(slot[CQEPKeyIndex:], c.PKeyIndex)
	slot[CQESL] = c.SL
	Word(slot, CQEOwner).Store(lap)
}

// GetCQE reads the CQE in slot if its owner word says lap (the reader's
// side), with an acquire load of the owner first.
func GetCQE(slot []byte, lap uint32, c *CQE) bool {
	if Word(slot, CQEOwner).Load() != lap {
		return false
	}
	c.WRID = le.Uint64(slot[CQEWRID:])
	c.Status, c.Opcode, c.Flags = le.Uint32(slot[CQEStatus:]), le.Uint32(slot[CQEOpcode:]), le.Uint32(slot[CQEFlags:])
	c.ByteLen, c.Imm, c.QPNum = le.Uint32(slot[CQEByteLen:]), le.Uint32(slot[CQEImm:]), le.Uint32(slot[CQEQPNum:])
	c.SrcQP, c.VendorErr = le.Uint32(slot[CQESrcQP:]), le.Uint32(slot[CQEVendorErr:])
	c.PKeyIndex, c.SL = le.Uint16(slot[CQEPKeyIndex:]), slot[CQESL]
	return true
}

// Lap is the owner value of ring index i in a ring of depth slots.
func Lap(i uint32, depth uint32) uint32 { return i/depth + 1 }

// Word returns the 4-byte-aligned word at off of shared memory m, for
// atomic loads and stores (doorbell records, the NIC's state, owner
// words). It panics if off is not aligned or out of m: offsets come from
// the NIC's own layout, never from the program.
func Word(m []byte, off int) *atomic.Uint32 {
	if off%4 != 0 || off < 0 || off+4 > len(m) {
		panic(fmt.Sprintf("queue: word at %d of %d bytes", off, len(m)))
	}
	return (*atomic.Uint32)(unsafe.Pointer(&m[off]))
}
