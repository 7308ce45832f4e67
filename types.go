package rnic

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/wire"
)

// The data types of the verbs. Their fields, constant values and names are
// those of libibverbs (struct ibv_sge, ibv_send_wr, ibv_recv_wr, ibv_wc,
// enum ibv_wr_opcode, ibv_wc_status, …), so that a program written against
// libibverbs' documentation reads the same here. The NIC's protocol engine
// has its own copies of them; the conversion happens once per work request
// or completion, at the API boundary, and never allocates (see convert.go).

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at
// virtual address Addr of the memory region whose local key is LKey.
// MR.SGE builds one from an offset into a region.
type SGE struct {
	// Addr is the virtual address of the first byte, in the region's
	// address space: MR.Addr()+offset (offset alone for a zero-based
	// region).
	Addr uint64
	// Length is the number of bytes; a zero-length SGE moves nothing.
	Length uint32
	// LKey is the region's local key (MR.LKey()).
	LKey uint32
}

// SendWR is a send work request (struct ibv_send_wr). A list of work
// requests is a slice passed to QP.PostSend instead of a linked list.
// Which fields an opcode reads:
//
//	WRRDMAWrite, WRRDMAWriteWithImm     SGL, RemoteAddr, RKey (+ ImmData)
//	WRSend, WRSendWithImm, WRSendWithInv SGL (+ ImmData / InvalidateRKey); UD: AH, RemoteQPN, RemoteQKey
//	WRRDMARead                          SGL (the destination), RemoteAddr, RKey
//	WRAtomicCmpAndSwp                   one 8-byte SGE, RemoteAddr, RKey, CompareAdd (compare), Swap
//	WRAtomicFetchAndAdd                 one 8-byte SGE, RemoteAddr, RKey, CompareAdd (the addend)
//	WRLocalInv                          InvalidateRKey
//	WRBindMW                            Bind
//	WRAtomicWrite                       RemoteAddr (8-byte aligned), RKey, CompareAdd (the 8 bytes)
//	WRFlush                             RemoteAddr, RKey, Flush
type SendWR struct {
	// WRID is returned in the work request's completion (wr_id).
	WRID uint64
	// Opcode is the operation.
	Opcode WROpcode
	// Flags are IBV_SEND_* flags.
	Flags SendFlags
	// SGL is the local memory: gathered for WRITE and SEND, scattered
	// into for READ and for an atomic's original value (sg_list).
	SGL []SGE

	// ImmData is the immediate data of the *_WITH_IMM opcodes, as a
	// host-order value (libibverbs' imm_data is big-endian: this is
	// ntohl of it); the peer's completion carries it in WC.ImmData.
	ImmData uint32
	// InvalidateRKey is the rkey that WRSendWithInv invalidates at the
	// peer, or WRLocalInv invalidates locally (invalidate_rkey).
	InvalidateRKey uint32

	// RemoteAddr is the peer's virtual address of RDMA and atomic
	// operations (wr.rdma.remote_addr, wr.atomic.remote_addr); atomics
	// need it 8-byte aligned.
	RemoteAddr uint64
	// RKey is the peer's remote key for RemoteAddr.
	RKey uint32
	// CompareAdd is the compare value of WRAtomicCmpAndSwp and the
	// addend of WRAtomicFetchAndAdd (wr.atomic.compare_add), and the 8
	// bytes WRAtomicWrite stores (ibv_wr_atomic_write's atomic_wr: the
	// word's bytes in host order, binary.NativeEndian of them). An atomic
	// treats the 8 bytes at RemoteAddr as a uint64 in the responder's
	// host byte order and writes their original value into the SGE in
	// the requester's host byte order (binary.NativeEndian), as Linux
	// Soft-RoCE does; only the wire is big-endian. ConnectX hardware
	// returns the original value big-endian instead (see Example_atomics).
	CompareAdd uint64
	// Swap is the value WRAtomicCmpAndSwp writes when the compare matches
	// (wr.atomic.swap).
	Swap uint64

	// AH is a UD send's address handle (wr.ud.ah).
	AH *AH
	// RemoteQPN is a UD send's destination QP (wr.ud.remote_qpn).
	RemoteQPN uint32
	// RemoteQKey is a UD send's Q_Key (wr.ud.remote_qkey); with the high
	// bit set (0x80000000) the QP's own Q_Key is sent instead. 0 is a
	// Q_Key like any other, not a default: a peer connected with
	// ConnParams' default Q_Key 0x11111111 drops datagrams carrying 0 and
	// counts them (rx_bad_qkey).
	RemoteQKey uint32

	// Bind describes a WRBindMW request (bind_mw).
	Bind MWBindInfo

	// Flush describes a WRFlush request (ibv_wr_flush's len, type and
	// level).
	Flush FlushInfo
}

// FlushInfo describes an RDMA FLUSH (IBTA 1.5): what the responder makes
// durable. rnic as the responder honours FlushGlobal (its placements are
// globally visible once made) and refuses FlushPersistent (it cannot make
// a program's memory persistent) with a remote access error.
type FlushInfo struct {
	// Length is the range from RemoteAddr (FlushRange).
	Length uint32
	// Placement is FlushGlobal, FlushPersistent or both (type).
	Placement uint8
	// Level is FlushRange (RemoteAddr, Length) or FlushMR (the whole
	// region RKey names).
	Level uint8
}

// FLUSH placement types and selectivity levels (rdma-core 45's
// IBV_FLUSH_*).
const (
	FlushGlobal     = wire.FlushGlobal
	FlushPersistent = wire.FlushPersistent
	FlushRange      = wire.FlushRange
	FlushMR         = wire.FlushMR
)

// RecvWR is a receive work request (struct ibv_recv_wr), posted with
// QP.PostRecv or SRQ.PostRecv.
type RecvWR struct {
	// WRID is returned in the completion (wr_id).
	WRID uint64
	// SGL is where an incoming SEND's payload is scattered (sg_list).
	// On a UD QP the first 40 bytes receive the GRH (WCWithGRH).
	SGL []SGE
}

// WC is a work completion (struct ibv_wc), filled by CQ.Poll and CQ.Wait.
// A failed completion (Status != WCSuccess) has only WRID, Status, QPNum
// and VendorErr valid, as in libibverbs.
type WC struct {
	// WRID is the completed work request's WRID (wr_id).
	WRID uint64
	// Status is the outcome.
	Status WCStatus
	// Opcode says what completed; valid when Status is WCSuccess.
	Opcode WCOpcode
	// Flags qualify the completion (wc_flags).
	Flags WCFlags
	// VendorErr is a vendor-specific error syndrome (vendor_err); rnic
	// leaves it zero.
	VendorErr uint32
	// ByteLen is the number of bytes transferred: received for receive
	// completions (the GRH included on UD), read for READ and 8 for
	// atomics (byte_len).
	ByteLen uint32
	// ImmData is the host-order immediate data when Flags has WCWithImm
	// (libibverbs' imm_data is big-endian: this is ntohl of it).
	ImmData uint32
	// InvalidatedRKey is the rkey a SEND_WITH_INV invalidated when Flags
	// has WCWithInv (invalidated_rkey).
	InvalidatedRKey uint32
	// QPNum is the number of the local QP the work request belonged to
	// (qp_num).
	QPNum uint32
	// SrcQP is a UD receive's sender QPN (src_qp).
	SrcQP uint32
	// PKeyIndex is the P_Key index of a UD receive (pkey_index).
	PKeyIndex uint16
	// SL is the sl field of a UD receive. RoCE carries no service level,
	// and rnic reports there what ConnectX does: the L3 header type of
	// the packet (2 IPv4, 1 IPv6), which says where the GRH area holds
	// the addresses (UCX's UD transport depends on it).
	SL uint8
}

// MWBindInfo describes a BIND_MW work request (struct ibv_mw_bind, with
// its struct ibv_mw_bind_info).
type MWBindInfo struct {
	// MW is the window's current rkey (MW.RKey()).
	MW uint32
	// NewKey is the window's rkey after the bind: its key with a new
	// 8-bit variant (MW.NextRKey(), ibv_inc_rkey).
	NewKey uint32
	// MR is the lkey of the region the window opens onto (mr).
	MR uint32
	// Addr and Length are the window, in the region's address space
	// (addr, length). A zero Length unbinds a type 1 window.
	Addr   uint64
	Length uint64
	// Access are the remote rights the window grants (mw_access_flags):
	// AccessRemoteRead, AccessRemoteWrite, AccessRemoteAtomic,
	// AccessZeroBased.
	Access Access
}

// AH is an address handle (struct ibv_ah): how UD sends reach one
// destination. PD.CreateAH creates it; SendWR.AH names it.
type AH struct {
	pd   *PD
	ah   *transport.AH
	attr AHAttr
	dead atomic.Bool
}

// Attr returns the address vector the handle was created with.
func (ah *AH) Attr() AHAttr { return ah.attr }

// PD returns the handle's protection domain.
func (ah *AH) PD() *PD { return ah.pd }

// Destroy frees the address handle (ibv_destroy_ah). Work requests posted
// with it must have completed. Destroying it again, or after its device
// closed, returns an error wrapping ErrClosed.
func (ah *AH) Destroy() error {
	if err := ah.pd.dev.usable(); err != nil {
		return fmt.Errorf("rnic: Destroy AH: %w", err)
	}
	if ah.dead.Swap(true) {
		return fmt.Errorf("rnic: Destroy AH: %w: address handle was destroyed", ErrClosed)
	}
	ah.ah.Destroy()
	ah.pd.put()
	return nil
}

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode uint8

const (
	WRRDMAWrite         WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm  WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend              WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm       WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRDMARead          WROpcode = 4 // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp   WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv          WROpcode = 7 // IBV_WR_LOCAL_INV
	WRBindMW            WROpcode = 8 // IBV_WR_BIND_MW
	WRSendWithInv       WROpcode = 9 // IBV_WR_SEND_WITH_INV
	// IBTA 1.5 (RC): answered by the responder with a zero-length READ
	// response, counted against max_rd_atomic like a READ.
	WRFlush       WROpcode = 14 // IBV_WR_FLUSH (rdma-core 45)
	WRAtomicWrite WROpcode = 15 // IBV_WR_ATOMIC_WRITE: an 8-byte store, single-copy atomic at the responder
)

var wrOpcodeNames = [...]string{
	"rdma-write", "rdma-write-with-imm", "send", "send-with-imm", "rdma-read",
	"atomic-cmp-and-swp", "atomic-fetch-and-add", "local-inv", "bind-mw", "send-with-inv",
	14: "flush", 15: "atomic-write",
}

// String returns the text of ibv_wr_opcode_str ("rdma-write", …), or
// "unknown".
func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) && wrOpcodeNames[o] != "" {
		return wrOpcodeNames[o]
	}
	return "unknown"
}

// SendFlags are a send work request's flags (enum ibv_send_flags).
type SendFlags uint8

const (
	// SendFence waits for the QP's earlier READs and atomics to complete
	// before this request starts (IBV_SEND_FENCE).
	SendFence SendFlags = 1 << 0
	// SendSignaled asks for a completion even when the QP was not created
	// with SigAll (IBV_SEND_SIGNALED). Unsignaled requests complete
	// silently, unless they fail.
	SendSignaled SendFlags = 1 << 1
	// SendSolicited sets the solicited event bit: the peer's CQ armed
	// with ReqNotify(true) fires (IBV_SEND_SOLICITED).
	SendSolicited SendFlags = 1 << 2
	// SendInline copies the payload into the work request at post time,
	// so its buffers may be reused as soon as PostSend returns
	// (IBV_SEND_INLINE), up to QPCap.MaxInlineData bytes. Unlike most
	// libibverbs providers, which ignore the lkey of inline SGEs, rnic
	// copies through the region: the SGEs must name registered memory.
	SendInline SendFlags = 1 << 3
)

// String returns the set flags' names joined by "|" ("signaled|inline"),
// or "none".
func (f SendFlags) String() string {
	return flagString(uint64(f), []string{"fence", "signaled", "solicited", "inline"})
}

// WCStatus is a completion's status (enum ibv_wc_status).
type WCStatus uint8

const (
	WCSuccess        WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr      WCStatus = 1  // IBV_WC_LOC_LEN_ERR: a message did not fit the receive buffers
	WCLocQPOpErr     WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR: the work request could not be executed
	WCLocEECOpErr    WCStatus = 3  // IBV_WC_LOC_EEC_OP_ERR (RD only; not produced)
	WCLocProtErr     WCStatus = 4  // IBV_WC_LOC_PROT_ERR: an SGE outside its region or of another PD
	WCWRFlushErr     WCStatus = 5  // IBV_WC_WR_FLUSH_ERR: flushed when the QP entered the error state
	WCMWBindErr      WCStatus = 6  // IBV_WC_MW_BIND_ERR: a memory window bind failed
	WCBadRespErr     WCStatus = 7  // IBV_WC_BAD_RESP_ERR: an unexpected response
	WCLocAccessErr   WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR: a local region lacks a right (e.g. LOCAL_WRITE)
	WCRemInvReqErr   WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR: the peer refused the request as invalid
	WCRemAccessErr   WCStatus = 10 // IBV_WC_REM_ACCESS_ERR: the peer's rkey, bounds or rights refused it
	WCRemOpErr       WCStatus = 11 // IBV_WC_REM_OP_ERR: the peer could not complete it
	WCRetryExcErr    WCStatus = 12 // IBV_WC_RETRY_EXC_ERR: no answer within retry_cnt retransmissions
	WCRNRRetryExcErr WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR: the peer had no receive posted, rnr_retry times
	WCLocRDDViolErr  WCStatus = 14 // IBV_WC_LOC_RDD_VIOL_ERR (RD only; not produced)
	WCRemInvRDReqErr WCStatus = 15 // IBV_WC_REM_INV_RD_REQ_ERR (RD only; not produced)
	WCRemAbortErr    WCStatus = 16 // IBV_WC_REM_ABORT_ERR: the peer aborted the operation
	WCInvEECNErr     WCStatus = 17 // IBV_WC_INV_EECN_ERR (RD only; not produced)
	WCInvEECStateErr WCStatus = 18 // IBV_WC_INV_EEC_STATE_ERR (RD only; not produced)
	WCFatalErr       WCStatus = 19 // IBV_WC_FATAL_ERR
	WCRespTimeoutErr WCStatus = 20 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr     WCStatus = 21 // IBV_WC_GENERAL_ERR
)

var wcStatusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
	"aborted error", "invalid EE context number", "invalid EE context state",
	"fatal error", "response timeout error", "general error",
}

// String returns the text of ibv_wc_status_str ("remote access error",
// …), or "unknown".
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// WCOpcode says what a completion completed (enum ibv_wc_opcode).
// Receive completions have the WCRecv bit (IBV_WC_RECV) set.
type WCOpcode uint8

const (
	WCSend            WCOpcode = 0        // IBV_WC_SEND: a SEND (any kind) completed
	WCRDMAWrite       WCOpcode = 1        // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2        // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3        // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4        // IBV_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5        // IBV_WC_BIND_MW
	WCLocalInv        WCOpcode = 6        // IBV_WC_LOCAL_INV
	WCFlush           WCOpcode = 8        // IBV_WC_FLUSH
	WCAtomicWrite     WCOpcode = 9        // IBV_WC_ATOMIC_WRITE
	WCRecv            WCOpcode = 1 << 7   // IBV_WC_RECV: a SEND arrived
	WCRecvRDMAWithImm WCOpcode = 1<<7 + 1 // IBV_WC_RECV_RDMA_WITH_IMM: an RDMA WRITE with immediate arrived
)

// String returns the opcode's name in the style of ibv_wr_opcode_str
// ("rdma-write", "recv", …; libibverbs has no function for completion
// opcodes), or "unknown".
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "send"
	case WCRDMAWrite:
		return "rdma-write"
	case WCRDMARead:
		return "rdma-read"
	case WCCompSwap:
		return "comp-swap"
	case WCFetchAdd:
		return "fetch-add"
	case WCBindMW:
		return "bind-mw"
	case WCLocalInv:
		return "local-inv"
	case WCFlush:
		return "flush"
	case WCAtomicWrite:
		return "atomic-write"
	case WCRecv:
		return "recv"
	case WCRecvRDMAWithImm:
		return "recv-rdma-with-imm"
	}
	return "unknown"
}

// WCFlags qualify a completion (enum ibv_wc_flags).
type WCFlags uint8

const (
	WCWithGRH WCFlags = 1 << 0 // IBV_WC_GRH: the first 40 bytes of a UD receive buffer hold the GRH
	WCWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM: ImmData is valid
	WCWithInv WCFlags = 1 << 3 // IBV_WC_WITH_INV: InvalidatedRKey is valid
)

// String returns the set flags' names joined by "|" ("grh|imm"), or
// "none".
func (f WCFlags) String() string {
	return flagString(uint64(f), []string{"grh", "imm", "", "inv"})
}

// QPType is a QP's transport service (enum ibv_qp_type).
type QPType uint8

const (
	// GSI is QP1, the general services interface (the kernel's
	// IB_QPT_GSI): a UD QP numbered 1 that sends and receives management
	// datagrams (MADs) with Q_Key 0x80010000. A device has at most one;
	// the connection manager (package cm) makes it. Programs of the host
	// interface cannot.
	GSI QPType = 1
	RC  QPType = 2 // IBV_QPT_RC: reliable connection
	UC  QPType = 3 // IBV_QPT_UC: unreliable connection
	UD  QPType = 4 // IBV_QPT_UD: unreliable datagram
)

// String returns "RC", "UC" or "UD" (as rdma resource show qp prints
// them), or "QPType(n)".
func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	case GSI:
		return "GSI"
	}
	return "QPType(" + strconv.Itoa(int(t)) + ")"
}

// QPState is a QP's state (enum ibv_qp_state).
//
//	         modify            modify           modify
//	RESET ----------> INIT ----------> RTR ----------> RTS <-----> SQD
//	  ^                                                 |   error
//	  |  any state --modify--> RESET                    v   (UC/UD)
//	  |  any state --modify or fatal error--> ERR      SQE --modify--> RTS
type QPState uint8

const (
	QPSReset QPState = 0 // IBV_QPS_RESET: created, or reset
	QPSInit  QPState = 1 // IBV_QPS_INIT: receives may be posted
	QPSRTR   QPState = 2 // IBV_QPS_RTR: ready to receive
	QPSRTS   QPState = 3 // IBV_QPS_RTS: ready to send
	QPSSQD   QPState = 4 // IBV_QPS_SQD: send queue drained (or draining)
	QPSSQE   QPState = 5 // IBV_QPS_SQE: send queue error (UC, UD)
	QPSErr   QPState = 6 // IBV_QPS_ERR: error; work requests are flushed
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the state's name as rdma resource show qp prints it
// ("RTS"), or "QPState(n)".
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return "QPState(" + strconv.Itoa(int(s)) + ")"
}

// QPAttrMask says which QPAttr fields QP.Modify sets (enum
// ibv_qp_attr_mask).
type QPAttrMask uint32

const (
	QPAttrState            QPAttrMask = 1 << 0  // IBV_QP_STATE: State
	QPAttrCurState         QPAttrMask = 1 << 1  // IBV_QP_CUR_STATE: CurState
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY: EnSQDAsyncNotify
	QPAttrAccessFlags      QPAttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS: AccessFlags
	QPAttrPKeyIndex        QPAttrMask = 1 << 4  // IBV_QP_PKEY_INDEX: PKeyIndex
	QPAttrPort             QPAttrMask = 1 << 5  // IBV_QP_PORT: Port
	QPAttrQKey             QPAttrMask = 1 << 6  // IBV_QP_QKEY: QKey
	QPAttrAV               QPAttrMask = 1 << 7  // IBV_QP_AV: AH
	QPAttrPathMTU          QPAttrMask = 1 << 8  // IBV_QP_PATH_MTU: PathMTU
	QPAttrTimeout          QPAttrMask = 1 << 9  // IBV_QP_TIMEOUT: Timeout
	QPAttrRetryCnt         QPAttrMask = 1 << 10 // IBV_QP_RETRY_CNT: RetryCnt
	QPAttrRNRRetry         QPAttrMask = 1 << 11 // IBV_QP_RNR_RETRY: RNRRetry
	QPAttrRQPSN            QPAttrMask = 1 << 12 // IBV_QP_RQ_PSN: RQPSN
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC: MaxRdAtomic
	QPAttrAltPath          QPAttrMask = 1 << 14 // IBV_QP_ALT_PATH (not supported: refused)
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER: MinRNRTimer
	QPAttrSQPSN            QPAttrMask = 1 << 16 // IBV_QP_SQ_PSN: SQPSN
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC: MaxDestRdAtomic
	QPAttrPathMigState     QPAttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE: the state is MIGRATED (no alternate paths); the library refuses arming it
	QPAttrCap              QPAttrMask = 1 << 19 // IBV_QP_CAP: Cap (resizing is not supported)
	QPAttrDestQPN          QPAttrMask = 1 << 20 // IBV_QP_DEST_QPN: DestQPN
	QPAttrRateLimit        QPAttrMask = 1 << 25 // IBV_QP_RATE_LIMIT (not supported: refused)
)

// String returns the set attributes' names joined by "|"
// ("STATE|PKEY_INDEX|PORT|ACCESS_FLAGS"), or "none".
func (m QPAttrMask) String() string { return transport.AttrMask(m).String() }

// QPCap are a QP's queue sizes (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     uint32 // max_send_wr: send work requests outstanding
	MaxRecvWR     uint32 // max_recv_wr: receive work requests outstanding (ignored with an SRQ)
	MaxSendSGE    uint32 // max_send_sge: SGEs per send work request
	MaxRecvSGE    uint32 // max_recv_sge: SGEs per receive work request
	MaxInlineData uint32 // max_inline_data: bytes a SendInline request may carry
}

// Access is a set of memory access rights (enum ibv_access_flags). The
// zero value grants local read only: a region registered with 0 can be
// the source of sends and WRITEs and nothing else, and a QP connected with
// 0 grants its peer no remote rights.
type Access uint32

const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE: the NIC may write the region (receives, READ responses, atomics' results)
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE (needs AccessLocalWrite on a region)
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC (needs AccessLocalWrite on a region)
	AccessMWBind       Access = 1 << 4 // IBV_ACCESS_MW_BIND: memory windows may be bound to the region
	AccessZeroBased    Access = 1 << 5 // IBV_ACCESS_ZERO_BASED: the region's addresses start at 0
	// FLUSH rights (rdma-core 45's IBV_ACCESS_FLUSH_*): of a region, and
	// of a QP (qp_access_flags) that takes FLUSH requests.
	AccessFlushGlobal     Access = 1 << 8 // IBV_ACCESS_FLUSH_GLOBAL
	AccessFlushPersistent Access = 1 << 9 // IBV_ACCESS_FLUSH_PERSISTENT
)

// Has reports whether every right in want is in a.
func (a Access) Has(want Access) bool { return a&want == want }

// String returns the rights' names joined by "|"
// ("local_write|remote_write"), or "none".
func (a Access) String() string {
	return flagString(uint64(a), []string{"local_write", "remote_write", "remote_read", "remote_atomic", "mw_bind", "zero_based", "", "", "flush_global", "flush_persistent"})
}

// GID is a port's 128-bit global identifier (union ibv_gid). In RoCEv2 a
// GID is an IP address: an IPv6 address, or an IPv4 address in its
// IPv4-mapped form ::ffff:a.b.c.d, which is how rxe and hardware RNICs
// derive GIDs from IPv4 addresses. Bytes are in network order.
type GID [16]byte

// GIDFromAddr returns the GID of an IP address; an IPv4 address becomes
// IPv4-mapped. The zero Addr gives the zero GID.
func GIDFromAddr(a netip.Addr) GID { return GID(wire.GIDFromAddr(a)) }

// ParseGID parses a GID: an IP address ("::ffff:10.0.0.1", "10.0.0.1",
// "fe80::1"), or 32 hex digits optionally separated by ':' as
// ibv_devinfo, perftest and rc_pingpong print GIDs
// ("0000:0000:0000:0000:0000:ffff:0a00:0001").
func ParseGID(s string) (GID, error) {
	g, err := wire.ParseGID(s)
	if err != nil {
		return GID{}, fmt.Errorf("rnic: %w", err)
	}
	return GID(g), nil
}

// Addr returns the GID as an IP address; an IPv4-mapped GID becomes an
// IPv4 address.
func (g GID) Addr() netip.Addr { return wire.GID(g).Addr() }

// IsIPv4 reports whether g is IPv4-mapped, so that RoCEv2 carries it in
// IPv4.
func (g GID) IsIPv4() bool { return wire.GID(g).IsIPv4() }

// IsZero reports whether g is all zeros (no GID).
func (g GID) IsZero() bool { return g == GID{} }

// String returns the GID in IPv6 text form, as rdma link and show_gids
// print it: "::ffff:10.0.0.1" for an IPv4-mapped GID, "fe80::1" for an
// IPv6 one. ParseGID accepts it.
func (g GID) String() string { return wire.GID(g).String() }

// MarshalText implements encoding.TextMarshaler with String's form.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseGID.
func (g *GID) UnmarshalText(b []byte) error {
	v, err := ParseGID(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

// PSN is a 24-bit packet sequence number. Arithmetic on it wraps at
// 2^24.
type PSN uint32

// PSNMask is the largest PSN; a PSN wraps to 0 after it.
const PSNMask PSN = 1<<24 - 1

// Add returns p+n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return PSN(wire.PSN(p).Add(n)) }

// String returns the PSN in hexadecimal, as perftest prints it
// ("0x123456").
func (p PSN) String() string { return "0x" + strconv.FormatUint(uint64(p), 16) }

// MTU is a path MTU (enum ibv_mtu): the largest payload one packet
// carries, headers not counted. The zero value is not a valid MTU (in
// Options and ConnParams it selects the default).
type MTU uint8

const (
	MTU256  MTU = 1 // IBV_MTU_256
	MTU512  MTU = 2 // IBV_MTU_512
	MTU1024 MTU = 3 // IBV_MTU_1024
	MTU2048 MTU = 4 // IBV_MTU_2048
	MTU4096 MTU = 5 // IBV_MTU_4096
)

// Bytes returns the MTU in bytes, or 0 if m is not a valid MTU.
func (m MTU) Bytes() int { return wire.MTU(m).Bytes() }

// MTUFromBytes returns the MTU of exactly n bytes; ok is false unless n is
// one of 256, 512, 1024, 2048 or 4096.
func MTUFromBytes(n int) (m MTU, ok bool) {
	w, ok := wire.MTUFromBytes(n)
	return MTU(w), ok
}

// String returns the MTU in bytes ("4096"), or "MTU(n)" for an invalid
// value.
func (m MTU) String() string { return wire.MTU(m).String() }

// EventType is an asynchronous event's kind (enum ibv_event_type).
type EventType uint8

const (
	EventCQErr            EventType = 0  // IBV_EVENT_CQ_ERR: a CQ overran
	EventQPFatal          EventType = 1  // IBV_EVENT_QP_FATAL
	EventQPReqErr         EventType = 2  // IBV_EVENT_QP_REQ_ERR: the peer's request was invalid (the QP is in error)
	EventQPAccessErr      EventType = 3  // IBV_EVENT_QP_ACCESS_ERR: the peer's request violated access rights
	EventCommEst          EventType = 4  // IBV_EVENT_COMM_EST: the first packet arrived in RTR
	EventSQDrained        EventType = 5  // IBV_EVENT_SQ_DRAINED: SQD reached with EnSQDAsyncNotify
	EventPathMig          EventType = 6  // IBV_EVENT_PATH_MIG (not produced)
	EventPathMigErr       EventType = 7  // IBV_EVENT_PATH_MIG_ERR (not produced)
	EventDeviceFatal      EventType = 8  // IBV_EVENT_DEVICE_FATAL (not produced)
	EventPortActive       EventType = 9  // IBV_EVENT_PORT_ACTIVE (not produced)
	EventPortErr          EventType = 10 // IBV_EVENT_PORT_ERR (not produced)
	EventLIDChange        EventType = 11 // IBV_EVENT_LID_CHANGE (not produced)
	EventPKeyChange       EventType = 12 // IBV_EVENT_PKEY_CHANGE (not produced)
	EventSMChange         EventType = 13 // IBV_EVENT_SM_CHANGE (not produced)
	EventSRQErr           EventType = 14 // IBV_EVENT_SRQ_ERR (not produced)
	EventSRQLimitReached  EventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED: fewer WQEs than the armed limit remain
	EventQPLastWQEReached EventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED: a QP on an SRQ entered the error state
	EventClientReregister EventType = 17 // IBV_EVENT_CLIENT_REREGISTER (not produced)
	EventGIDChange        EventType = 18 // IBV_EVENT_GID_CHANGE (not produced)
)

var eventNames = [...]string{
	"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained",
	"path migrated", "path migration request error", "local catastrophic error", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
	"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change",
}

// String returns the text of ibv_event_type_str ("CQ error", …), or
// "unknown".
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "unknown"
}

// flagString names the set bits of v ("a|b"), "none" for 0, and hex for
// bits without a name.
func flagString(v uint64, names []string) string {
	if v == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; v != 0; i++ {
		bit := uint64(1) << i
		if v&bit == 0 {
			continue
		}
		v &^= bit
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		if i < len(names) && names[i] != "" {
			b.WriteString(names[i])
		} else {
			b.WriteString("0x" + strconv.FormatUint(bit, 16))
		}
	}
	return b.String()
}
