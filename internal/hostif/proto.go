// Package hostif is the NIC's host interface to other processes: the
// control protocol a program's verbs library (the provider) speaks to a
// NIC over a local socket, in the role the uverbs command interface plays
// for a kernel driver. Each message is one datagram of a SOCK_SEQPACKET
// Unix socket: a 16-byte header and an operation's fixed little-endian
// fields. A request's reply carries the same sequence number and an
// errno (0: done), the way a uverbs command returns one.
//
//	program ── request (op, seq, fields) ──▶ NIC: checks, runs the verb
//	program ◀── reply (seq, errno, fields) ── NIC
//
// The data path does not cross this socket: memory is reached through
// the DMA bus (internal/hw/bus, process_vm_readv/writev), and queues will
// be rings in shared memory.
package hostif

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the protocol version a Hello carries; a NIC refuses others.
const Version = 5 // 5: the doorbell page's state NICAsleepSends

// ProbeWord is what the 8 bytes at a Hello's probe address hold
// ("rnic-ok" in little-endian bytes): reading them, the NIC checks that
// the kernel lets it reach the program's memory (Yama, another uid, a
// program that is not dumpable) before the program relies on it.
const ProbeWord uint64 = 0x006b6f2d63696e72

// Magic begins every message ("RN").
const Magic = 0x4e52

// HeaderLen is the length of a message's header.
const HeaderLen = 16

// MaxMsg bounds a message, header included.
const MaxMsg = 4096

// Op is an operation.
type Op uint16

// The operations. A reply has the request's Op.
const (
	OpHello       Op = 1 // u32 version, u64 probe address → u32 version, name (string), u32 access (0, or the errno REG_MR will fail with)
	OpQueryDevice Op = 2 // → DeviceAttr fields
	OpQueryPort   Op = 3 // u8 port → u8 active_mtu, u64 max_msg_sz, u32 gid_tbl_len, u8 active_speed, u8 active_width
	OpQueryGID    Op = 4 // u8 port, u32 index → 16-byte GID, u32 type
	OpAllocPD     Op = 5 // → u32 pd
	OpDeallocPD   Op = 6 // u32 pd
	OpRegMR       Op = 7 // u32 pd, u64 addr, u64 length, u64 iova, u32 access → u32 handle, u32 lkey, u32 rkey
	OpDeregMR     Op = 8 // u32 handle
	// A CQ: its ring (fd), depth CQEs of CQELen, and the word of the
	// doorbell page where the program stores its consumer index.
	OpCreateCQ  Op = 9  // u32 cqe, u32 channel (0: none), u64 cookie → u32 handle, u32 depth, u32 ci word, u32 arm word; fd ring
	OpDestroyCQ Op = 10 // u32 handle
	// A QP: its send and receive rings (fds), slots of WQESize and
	// RecvWQESize, the doorbell words of their producer indices, and two
	// words the NIC writes: its SQ consumer index (the program may reuse
	// a slot the NIC has taken) and the number of receive WQEs retired
	// (their CQEs written; at most max_recv_wr are outstanding).
	OpCreateQP  Op = 11 // u32 pd, u8 type, u32 send cq, u32 recv cq, u32 max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline, u8 sq_sig_all, u32 srq (0: none), u64 cookie → u32 handle, u32 qpn, u32 sq depth, u32 sq slot, u32 sq word, u32 rq depth, u32 rq slot, u32 rq word, u32 sq ci word, u32 rq done word; fds sq, rq
	OpModifyQP  Op = 12 // u32 handle, u32 attr mask (IBV_QP_*), the attributes (ModifyQP)
	OpDestroyQP Op = 13 // u32 handle
	// A completion channel: a SOCK_SEQPACKET socket on which the NIC
	// sends, for each armed CQ that gets a completion, the CQ's cookie
	// (u64, what CREATE_CQ gave). A program arms a CQ by storing 1 (any
	// completion) or 2 (solicited; rnic wakes at any) into its arm word;
	// the NIC clears the word when it sends.
	OpCreateCompChannel  Op = 14 // → u32 handle; fd the program's end
	OpDestroyCompChannel Op = 15 // u32 handle
	// An address handle (UD): a send WQE names it by handle (offset 56).
	OpCreateAH  Op = 16 // u32 pd, 16-byte dgid, u8 sgid_index, u32 flow_label, u8 hop_limit, u8 traffic_class, u8 sl → u32 handle
	OpDestroyAH Op = 17 // u32 handle
	// A shared receive queue: its ring (receive WQEs) and the doorbell
	// word of its producer index. A QP on it names it at CREATE_QP.
	OpCreateSRQ  Op = 18 // u32 pd, u32 max_wr, u32 max_sge, u32 limit, u64 cookie → u32 handle, u32 depth, u32 slot, u32 word, u32 ci word; fd ring
	OpDestroySRQ Op = 19 // u32 handle
	OpArmSRQ     Op = 20 // u32 handle, u32 limit (ibv_modify_srq's srq_limit)
	// QUERY_QP's reply is MODIFY_QP's attributes (ModifyQP) as the NIC
	// holds them, then u8 sq_draining and the capabilities (QueryQPCap).
	OpQueryQP  Op = 21 // u32 handle → ModifyQP fields, u8 sq_draining, u32 max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline
	OpQuerySRQ Op = 22 // u32 handle → u32 max_wr, u32 max_sge, u32 limit
	// RESIZE_CQ gives the CQ a new ring: the CQEs the program had not
	// consumed (from its consumer index, which the request carries) are
	// moved to the new ring's first slots, and the program's consumer
	// index starts again at 0.
	OpResizeCQ Op = 23 // u32 handle, u32 cqe, u32 consumer index → u32 depth; fd ring
	// A memory window: a BIND_MW send WQE names it by its rkey.
	OpAllocMW   Op = 24 // u32 pd, u8 type (1, 2) → u32 handle, u32 rkey
	OpDeallocMW Op = 25 // u32 handle
	// REREG_MR changes a region in place with what the flags
	// (IBV_REREG_MR_CHANGE_*) change; its keys stay.
	OpReregMR Op = 26 // u32 handle, u32 flags, u32 pd, u64 addr, u64 length, u64 iova, u32 access → u32 lkey, u32 rkey
)

// REREG_MR's flags (enum ibv_rereg_mr_flags).
const (
	ReregChangeTranslation = 1 << 0
	ReregChangePD          = 1 << 1
	ReregChangeAccess      = 1 << 2
	ReregMRFlags           = ReregChangeTranslation | ReregChangePD | ReregChangeAccess
)

// The HELLO reply carries three descriptors: the doorbell page (4096
// bytes: word 0 the NIC's state, 0 running, 1 asleep; the objects' words
// after it), the eventfd the program writes 1 to when, having stored a
// producer index, it finds the NIC asleep, and the program's end of the
// async event socket (SOCK_SEQPACKET), on which the NIC sends each
// asynchronous event (ibv_get_async_event) as one AsyncEventLen message.
// The socket closing (the NIC gone) is the device's fatal event.

// AsyncEventLen is the length of an async event message: u32 type (enum
// ibv_event_type), u32 the handle and u64 the cookie (what its CREATE
// gave) of the QP, CQ or SRQ it concerns. The program drops an event
// whose object it has destroyed.
const AsyncEventLen = 16

// PutAsyncEvent writes an async event message into b (AsyncEventLen bytes).
func PutAsyncEvent(b []byte, typ, handle uint32, cookie uint64) {
	binary.LittleEndian.PutUint32(b, typ)
	binary.LittleEndian.PutUint32(b[4:], handle)
	binary.LittleEndian.PutUint64(b[8:], cookie)
}

func (o Op) String() string {
	switch o {
	case OpHello:
		return "HELLO"
	case OpQueryDevice:
		return "QUERY_DEVICE"
	case OpQueryPort:
		return "QUERY_PORT"
	case OpQueryGID:
		return "QUERY_GID"
	case OpAllocPD:
		return "ALLOC_PD"
	case OpDeallocPD:
		return "DEALLOC_PD"
	case OpRegMR:
		return "REG_MR"
	case OpDeregMR:
		return "DEREG_MR"
	case OpCreateCQ:
		return "CREATE_CQ"
	case OpDestroyCQ:
		return "DESTROY_CQ"
	case OpCreateQP:
		return "CREATE_QP"
	case OpModifyQP:
		return "MODIFY_QP"
	case OpDestroyQP:
		return "DESTROY_QP"
	case OpCreateCompChannel:
		return "CREATE_COMP_CHANNEL"
	case OpDestroyCompChannel:
		return "DESTROY_COMP_CHANNEL"
	case OpCreateAH:
		return "CREATE_AH"
	case OpDestroyAH:
		return "DESTROY_AH"
	case OpCreateSRQ:
		return "CREATE_SRQ"
	case OpDestroySRQ:
		return "DESTROY_SRQ"
	case OpArmSRQ:
		return "ARM_SRQ"
	case OpQueryQP:
		return "QUERY_QP"
	case OpQuerySRQ:
		return "QUERY_SRQ"
	case OpResizeCQ:
		return "RESIZE_CQ"
	case OpAllocMW:
		return "ALLOC_MW"
	case OpDeallocMW:
		return "DEALLOC_MW"
	case OpReregMR:
		return "REREG_MR"
	}
	return fmt.Sprintf("op(%d)", uint16(o))
}

// Header is a message's header.
type Header struct {
	Op    Op
	Seq   uint32
	Errno int32 // replies: 0, or the errno the verb returns
}

// ErrMalformed is the error of a message that does not parse.
var ErrMalformed = errors.New("hostif: malformed message")

// Msg builds a message: the header, then fields appended in order.
type Msg struct{ b []byte }

// NewMsg starts a message with h into buf's storage (reused).
func NewMsg(buf []byte, h Header) *Msg {
	b := append(buf[:0], make([]byte, HeaderLen)...)
	binary.LittleEndian.PutUint16(b[0:], Magic)
	binary.LittleEndian.PutUint16(b[2:], uint16(h.Op))
	binary.LittleEndian.PutUint32(b[4:], h.Seq)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.Errno))
	return &Msg{b: b}
}

func (m *Msg) U8(v uint8) *Msg   { m.b = append(m.b, v); return m }
func (m *Msg) U16(v uint16) *Msg { m.b = binary.LittleEndian.AppendUint16(m.b, v); return m }
func (m *Msg) U32(v uint32) *Msg { m.b = binary.LittleEndian.AppendUint32(m.b, v); return m }
func (m *Msg) U64(v uint64) *Msg { m.b = binary.LittleEndian.AppendUint64(m.b, v); return m }

// Bytes appends b with its length (u16).
func (m *Msg) Bytes(b []byte) *Msg {
	m.U16(uint16(len(b)))
	m.b = append(m.b, b...)
	return m
}

// Fixed appends b as it is (a field of known length, such as a GID).
func (m *Msg) Fixed(b []byte) *Msg { m.b = append(m.b, b...); return m }

// Done returns the message, its payload length in the header. It fails
// if the message would exceed MaxMsg.
func (m *Msg) Done() ([]byte, error) {
	if len(m.b) > MaxMsg {
		return nil, fmt.Errorf("hostif: message of %d bytes exceeds %d", len(m.b), MaxMsg)
	}
	binary.LittleEndian.PutUint32(m.b[12:], uint32(len(m.b)-HeaderLen))
	return m.b, nil
}

// Reader takes a message's fields in order. A read past the end, or a
// length that does not fit, sets Err and returns zeros from then on: a
// handler reads all its fields and checks Err once.
type Reader struct {
	b   []byte
	Err error
}

// Parse checks a message's header and returns it with a Reader over the
// fields.
func Parse(b []byte) (Header, *Reader, error) {
	if len(b) < HeaderLen || len(b) > MaxMsg {
		return Header{}, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if binary.LittleEndian.Uint16(b) != Magic {
		return Header{}, nil, fmt.Errorf("%w: bad magic %#x", ErrMalformed, binary.LittleEndian.Uint16(b))
	}
	n := binary.LittleEndian.Uint32(b[12:])
	if int64(n) != int64(len(b)-HeaderLen) {
		return Header{}, nil, fmt.Errorf("%w: header says %d bytes of fields, the message has %d", ErrMalformed, n, len(b)-HeaderLen)
	}
	h := Header{Op: Op(binary.LittleEndian.Uint16(b[2:])), Seq: binary.LittleEndian.Uint32(b[4:]), Errno: int32(binary.LittleEndian.Uint32(b[8:]))}
	return h, &Reader{b: b[HeaderLen:]}, nil
}

func (r *Reader) take(n int) []byte {
	if r.Err != nil {
		return nil
	}
	if n > len(r.b) {
		r.Err = fmt.Errorf("%w: %d more bytes wanted, %d left", ErrMalformed, n, len(r.b))
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *Reader) U8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *Reader) U16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *Reader) U32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *Reader) U64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Bytes takes a length-prefixed field (Msg.Bytes); the slice aliases the
// message.
func (r *Reader) Bytes() []byte { return r.take(int(r.U16())) }

// Fixed takes n bytes.
func (r *Reader) Fixed(n int) []byte { return r.take(n) }

// End checks that every field was read: a message longer than its
// operation's fields is malformed too.
func (r *Reader) End() error {
	if r.Err == nil && len(r.b) != 0 {
		r.Err = fmt.Errorf("%w: %d bytes after the last field", ErrMalformed, len(r.b))
	}
	return r.Err
}

// ModifyQP are MODIFY_QP's attributes, in this order after the handle and
// the mask (the fields of struct ibv_qp_attr that rnic takes).
type ModifyQP struct {
	State, CurState, PathMTU, Port                 uint8
	QKey, RQPSN, SQPSN, DestQPN, Access            uint32
	PKeyIndex                                      uint16
	EnSQDAsyncNotify, MaxRdAtomic, MaxDestRdAtomic uint8
	MinRNRTimer, Timeout, RetryCnt, RNRRetry       uint8
	DGID                                           [16]byte
	SGIDIndex                                      uint8
	FlowLabel                                      uint32
	HopLimit, TrafficClass, SL                     uint8
}

// Put appends a's fields to m.
func (a *ModifyQP) Put(m *Msg) {
	m.U8(a.State).U8(a.CurState).U8(a.PathMTU).U8(a.Port)
	m.U32(a.QKey).U32(a.RQPSN).U32(a.SQPSN).U32(a.DestQPN).U32(a.Access)
	m.U16(a.PKeyIndex)
	m.U8(a.EnSQDAsyncNotify).U8(a.MaxRdAtomic).U8(a.MaxDestRdAtomic)
	m.U8(a.MinRNRTimer).U8(a.Timeout).U8(a.RetryCnt).U8(a.RNRRetry)
	m.Fixed(a.DGID[:]).U8(a.SGIDIndex).U32(a.FlowLabel).U8(a.HopLimit).U8(a.TrafficClass).U8(a.SL)
}

// Get reads a's fields from r.
func (a *ModifyQP) Get(r *Reader) {
	a.State, a.CurState, a.PathMTU, a.Port = r.U8(), r.U8(), r.U8(), r.U8()
	a.QKey, a.RQPSN, a.SQPSN, a.DestQPN, a.Access = r.U32(), r.U32(), r.U32(), r.U32(), r.U32()
	a.PKeyIndex = r.U16()
	a.EnSQDAsyncNotify, a.MaxRdAtomic, a.MaxDestRdAtomic = r.U8(), r.U8(), r.U8()
	a.MinRNRTimer, a.Timeout, a.RetryCnt, a.RNRRetry = r.U8(), r.U8(), r.U8(), r.U8()
	copy(a.DGID[:], r.Fixed(16))
	a.SGIDIndex, a.FlowLabel, a.HopLimit, a.TrafficClass, a.SL = r.U8(), r.U32(), r.U8(), r.U8(), r.U8()
}
