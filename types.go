package rnic

import (
	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/wire"
)

// The data types of the verbs, shared with the NIC's protocol engine so
// that posting and polling copy nothing twice. Their fields and constant
// values are those of libibverbs (struct ibv_send_wr, ibv_wc, …).

// SGE is a scatter/gather element: Length bytes at Addr of the memory
// region whose local key is LKey.
type SGE = transport.SGE

// SendWR is a send work request (struct ibv_send_wr).
type SendWR = transport.SendWR

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR = transport.RecvWR

// WC is a work completion (struct ibv_wc).
type WC = transport.WC

// MWBindInfo describes a BIND_MW work request (struct ibv_mw_bind_info).
type MWBindInfo = transport.MWBindInfo

// AH is an address handle for UD sends (ibv_create_ah).
type AH = transport.AH

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode = transport.WROpcode

const (
	WRRDMAWrite         = transport.WRRDMAWrite
	WRRDMAWriteWithImm  = transport.WRRDMAWriteWithImm
	WRSend              = transport.WRSend
	WRSendWithImm       = transport.WRSendWithImm
	WRRDMARead          = transport.WRRDMARead
	WRAtomicCmpAndSwp   = transport.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = transport.WRAtomicFetchAndAdd
	WRLocalInv          = transport.WRLocalInv
	WRBindMW            = transport.WRBindMW
	WRSendWithInv       = transport.WRSendWithInv
)

// SendFlags are a send work request's flags (enum ibv_send_flags).
type SendFlags = transport.SendFlags

const (
	SendFence     = transport.SendFence
	SendSignaled  = transport.SendSignaled
	SendSolicited = transport.SendSolicited
	SendInline    = transport.SendInline
)

// WCStatus is a completion's status (enum ibv_wc_status).
type WCStatus = transport.WCStatus

const (
	WCSuccess        = transport.WCSuccess
	WCLocLenErr      = transport.WCLocLenErr
	WCLocQPOpErr     = transport.WCLocQPOpErr
	WCLocProtErr     = transport.WCLocProtErr
	WCWRFlushErr     = transport.WCWRFlushErr
	WCMWBindErr      = transport.WCMWBindErr
	WCBadRespErr     = transport.WCBadRespErr
	WCLocAccessErr   = transport.WCLocAccessErr
	WCRemInvReqErr   = transport.WCRemInvReqErr
	WCRemAccessErr   = transport.WCRemAccessErr
	WCRemOpErr       = transport.WCRemOpErr
	WCRetryExcErr    = transport.WCRetryExcErr
	WCRNRRetryExcErr = transport.WCRNRRetryExcErr
	WCRemInvRDReqErr = transport.WCRemInvRDReqErr
	WCRemAbortErr    = transport.WCRemAbortErr
	WCFatalErr       = transport.WCFatalErr
	WCGeneralErr     = transport.WCGeneralErr
)

// WCOpcode says what a completion completed (enum ibv_wc_opcode).
type WCOpcode = transport.WCOpcode

const (
	WCSend            = transport.WCSend
	WCRDMAWrite       = transport.WCRDMAWrite
	WCRDMARead        = transport.WCRDMARead
	WCCompSwap        = transport.WCCompSwap
	WCFetchAdd        = transport.WCFetchAdd
	WCBindMW          = transport.WCBindMW
	WCLocalInv        = transport.WCLocalInv
	WCRecv            = transport.WCRecv
	WCRecvRDMAWithImm = transport.WCRecvRDMAWithImm
)

// WCFlags qualify a completion (enum ibv_wc_flags).
type WCFlags = transport.WCFlags

const (
	WCWithGRH = transport.WCWithGRH
	WCWithImm = transport.WCWithImm
	WCWithInv = transport.WCWithInv
)

// QPType is a QP's transport service (enum ibv_qp_type).
type QPType = transport.QPType

const (
	RC = transport.RC
	UC = transport.UC
	UD = transport.UD
)

// QPState is a QP's state (enum ibv_qp_state).
type QPState = transport.QPState

const (
	QPSReset = transport.QPSReset
	QPSInit  = transport.QPSInit
	QPSRTR   = transport.QPSRTR
	QPSRTS   = transport.QPSRTS
	QPSSQD   = transport.QPSSQD
	QPSSQE   = transport.QPSSQE
	QPSErr   = transport.QPSErr
)

// QPAttrMask says which QPAttr fields Modify sets (enum ibv_qp_attr_mask).
type QPAttrMask = transport.AttrMask

const (
	QPAttrState            = transport.AttrState
	QPAttrCurState         = transport.AttrCurState
	QPAttrEnSQDAsyncNotify = transport.AttrEnSQDAsyncNotify
	QPAttrAccessFlags      = transport.AttrAccessFlags
	QPAttrPKeyIndex        = transport.AttrPKeyIndex
	QPAttrPort             = transport.AttrPort
	QPAttrQKey             = transport.AttrQKey
	QPAttrAV               = transport.AttrAV
	QPAttrPathMTU          = transport.AttrPathMTU
	QPAttrTimeout          = transport.AttrTimeout
	QPAttrRetryCnt         = transport.AttrRetryCnt
	QPAttrRNRRetry         = transport.AttrRNRRetry
	QPAttrRQPSN            = transport.AttrRQPSN
	QPAttrMaxQPRdAtomic    = transport.AttrMaxQPRdAtomic
	QPAttrAltPath          = transport.AttrAltPath
	QPAttrMinRNRTimer      = transport.AttrMinRNRTimer
	QPAttrSQPSN            = transport.AttrSQPSN
	QPAttrMaxDestRdAtomic  = transport.AttrMaxDestRdAtomic
	QPAttrPathMigState     = transport.AttrPathMigState
	QPAttrCap              = transport.AttrCap
	QPAttrDestQPN          = transport.AttrDestQPN
	QPAttrRateLimit        = transport.AttrRateLimit
)

// QPCap are a QP's queue sizes (struct ibv_qp_cap).
type QPCap = transport.QPCap

// Access is a set of memory access rights (enum ibv_access_flags).
type Access = atu.Access

const (
	AccessLocalWrite   = atu.LocalWrite
	AccessRemoteWrite  = atu.RemoteWrite
	AccessRemoteRead   = atu.RemoteRead
	AccessRemoteAtomic = atu.RemoteAtomic
	AccessMWBind       = atu.MWBind
	AccessZeroBased    = atu.ZeroBased
)

// GID is a port's global identifier: for RoCEv2, its IPv6 address or
// IPv4-mapped IPv4 address.
type GID = wire.GID

// PSN is a 24-bit packet sequence number.
type PSN = wire.PSN

// MTU is a path MTU (enum ibv_mtu).
type MTU = wire.MTU

const (
	MTU256  = wire.MTU256
	MTU512  = wire.MTU512
	MTU1024 = wire.MTU1024
	MTU2048 = wire.MTU2048
	MTU4096 = wire.MTU4096
)

// EventType is an asynchronous event's kind (enum ibv_event_type).
type EventType = transport.EventType

const (
	EventCQErr            = transport.EventCQErr
	EventQPFatal          = transport.EventQPFatal
	EventQPReqErr         = transport.EventQPReqErr
	EventQPAccessErr      = transport.EventQPAccessErr
	EventCommEst          = transport.EventCommEst
	EventSQDrained        = transport.EventSQDrained
	EventSRQLimitReached  = transport.EventSRQLimitReached
	EventQPLastWQEReached = transport.EventQPLastWQEReached
)
