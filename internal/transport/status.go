package transport

// WCStatus is a completion's status; the values are those of libibverbs'
// enum ibv_wc_status.
type WCStatus uint8

const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCLocRDDViolErr  WCStatus = 14
	WCRemInvRDReqErr WCStatus = 15
	WCRemAbortErr    WCStatus = 16
	WCInvEECNErr     WCStatus = 17
	WCInvEECStateErr WCStatus = 18
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
	numWCStatus               = 22
)

var wcStatusNames = [numWCStatus]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory bind operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
	"aborted error", "invalid EE context number", "invalid EE context state",
	"fatal error", "response timeout error", "general error",
}

// String returns the same text as ibv_wc_status_str.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// WCOpcode says what a completion completed; values of enum ibv_wc_opcode.
type WCOpcode uint8

const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCFlush           WCOpcode = 8 // IBV_WC_FLUSH
	WCAtomicWrite     WCOpcode = 9 // IBV_WC_ATOMIC_WRITE
	WCRecv            WCOpcode = 1 << 7
	WCRecvRDMAWithImm WCOpcode = 1<<7 + 1
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCFlush:
		return "FLUSH"
	case WCAtomicWrite:
		return "ATOMIC_WRITE"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "UNKNOWN"
}

// WCFlags qualify a completion; values of enum ibv_wc_flags.
type WCFlags uint8

const (
	WCWithGRH WCFlags = 1 << 0 // the first 40 bytes of a UD receive buffer hold the GRH
	WCWithImm WCFlags = 1 << 1 // ImmData is valid
	WCWithInv WCFlags = 1 << 3 // InvalidatedRKey is valid
)

// WC is a work completion, the fields of struct ibv_wc.
type WC struct {
	WRID            uint64
	Status          WCStatus
	Opcode          WCOpcode
	Flags           WCFlags
	VendorErr       uint32
	ByteLen         uint32
	ImmData         uint32 // host-order value of the immediate data
	InvalidatedRKey uint32
	QPNum           uint32
	SrcQP           uint32 // UD: sender's QPN
	PKeyIndex       uint16
	SL              uint8
}
