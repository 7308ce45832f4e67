package transport

import (
	"errors"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// WROpcode is a send work request's operation; values of enum ibv_wr_opcode.
type WROpcode uint8

const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	// 10-13 (TSO, driver opcodes) are not implemented.
	WRFlush       WROpcode = 14 // IBV_WR_FLUSH (rdma-core 45)
	WRAtomicWrite WROpcode = 15 // IBV_WR_ATOMIC_WRITE
	numWROpcodes           = 16
)

var wrOpcodeNames = [numWROpcodes]string{
	"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW", "SEND_WITH_INV",
	14: "FLUSH", 15: "ATOMIC_WRITE",
}

func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) && wrOpcodeNames[o] != "" {
		return wrOpcodeNames[o]
	}
	return "WR_OPCODE?"
}

// wrInfo is the WR-opcode table: which QP types may post it, and what it
// does on the wire (rxe's rxe_wr_opcode_info).
type wrInfo struct {
	qpTypes   uint8 // bit per QPType
	wc        WCOpcode
	readAtom  bool // READ or atomic: needs a responder resource, limited by max_rd_atomic
	atomic    bool
	local     bool // executed by the NIC itself, nothing on the wire
	payload   bool // carries the SGL's bytes to the peer
	imm       bool
	inv       bool
	needsRKey bool
	// nonPosted: FLUSH and ATOMIC WRITE (IBTA 1.5), one PSN each, no
	// SGL, answered by a zero-length READ response (or covered by a later
	// ACK, as rxe accepts) and counted against max_rd_atomic.
	nonPosted bool
}

const (
	rcBit = 1 << RC
	ucBit = 1 << UC
	udBit = 1 << UD
)

// wrInfos has an entry for every value a WQE's opcode byte can hold: a
// refused WQE (an opcode a program made up) keeps its opcode, and the
// table's zero entries (no QP type takes them) make every use of it safe.
var wrInfos = [256]wrInfo{
	WRRDMAWrite:         {qpTypes: rcBit | ucBit, wc: WCRDMAWrite, payload: true, needsRKey: true},
	WRRDMAWriteWithImm:  {qpTypes: rcBit | ucBit, wc: WCRDMAWrite, payload: true, imm: true, needsRKey: true},
	WRSend:              {qpTypes: rcBit | ucBit | udBit, wc: WCSend, payload: true},
	WRSendWithImm:       {qpTypes: rcBit | ucBit | udBit, wc: WCSend, payload: true, imm: true},
	WRRDMARead:          {qpTypes: rcBit, wc: WCRDMARead, readAtom: true, needsRKey: true},
	WRAtomicCmpAndSwp:   {qpTypes: rcBit, wc: WCCompSwap, readAtom: true, atomic: true, needsRKey: true},
	WRAtomicFetchAndAdd: {qpTypes: rcBit, wc: WCFetchAdd, readAtom: true, atomic: true, needsRKey: true},
	WRLocalInv:          {qpTypes: rcBit | ucBit, wc: WCLocalInv, local: true},
	WRBindMW:            {qpTypes: rcBit | ucBit, wc: WCBindMW, local: true},
	WRSendWithInv:       {qpTypes: rcBit | ucBit, wc: WCSend, payload: true, inv: true},
	WRFlush:             {qpTypes: rcBit, wc: WCFlush, readAtom: true, nonPosted: true, needsRKey: true},
	WRAtomicWrite:       {qpTypes: rcBit, wc: WCAtomicWrite, readAtom: true, nonPosted: true, needsRKey: true},
}

// SendFlags are a send work request's flags; values of enum ibv_send_flags.
type SendFlags uint8

const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// SGE is a scatter/gather element: Length bytes at Addr of the region
// with local key LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// AH is an address handle: how to reach a UD destination. Num is its
// number in the NIC's AH table (AHTable.New), which a UD WQE carries.
type AH struct {
	Route wire.Route
	PD    uint32
	Num   uint32

	table   *AHTable
	destroy func() error
}

// Destroy frees the address handle (ibv_destroy_ah). Work requests posted
// with it must have completed.
func (a *AH) Destroy() error {
	if a.table == nil {
		return errors.New("rnic: address handle not created by CreateAH, or already destroyed")
	}
	a.table.release(a)
	a.table = nil
	var err error
	if a.destroy != nil {
		err = a.destroy()
	}
	return err
}

// MWBindInfo describes a BIND_MW work request.
type MWBindInfo struct {
	MW     uint32 // the window's current rkey
	NewKey uint32 // its rkey after the bind
	MR     uint32 // lkey of the region
	Addr   uint64
	Length uint64
	Access atu.Access
}

// FlushInfo describes a FLUSH work request (ibv_wr_flush).
type FlushInfo struct {
	Length    uint32 // bytes from RemoteAddr (level FlushRange)
	Placement uint8  // wire.FlushGlobal and/or wire.FlushPersistent
	Level     uint8  // wire.FlushRange or wire.FlushMR
}

// SendWR is a send work request (struct ibv_send_wr, without the list link:
// post a slice instead).
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE

	ImmData        uint32 // host-order immediate data
	InvalidateRKey uint32 // SEND_WITH_INV, LOCAL_INV

	RemoteAddr uint64 // RDMA and atomics
	RKey       uint32
	CompareAdd uint64 // compare for CAS, addend for FAA
	Swap       uint64

	AH         *AH // UD
	RemoteQPN  uint32
	RemoteQKey uint32

	Bind MWBindInfo // BIND_MW

	// FLUSH: what to make durable, RemoteAddr/RKey naming the range.
	Flush FlushInfo
	// ATOMIC WRITE: the 8 bytes to store at RemoteAddr, the word's
	// little-endian bytes (its memory on this host), in CompareAdd.

	// Inline, with SendInline and no SGL, is the payload itself: the
	// host interface's WQEs carry it in the ring, where the program wrote
	// it, so there is no memory of the program to read it from.
	Inline []byte
}

// RecvWR is a receive work request.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}

// sendWQE is a send queue slot: the work request as the NIC reads it from
// the ring, plus the requester's progress through it.
type sendWQE struct {
	wrid   uint64
	raddr  uint64
	cmpAdd uint64
	swap   uint64
	ah     *AH
	length uint32
	imm    uint32
	invKey uint32
	rkey   uint32
	rqpn   uint32
	rqkey  uint32
	nsge   uint16
	op     WROpcode
	flags  SendFlags
	inline bool
	bad    bool // the fetch refused it: it completes with a local QP operation error
	// A BIND_MW request keeps its MWBindInfo in the fields above (see
	// writeSendWQE): raddr/cmpAdd = Addr/Length, rkey = MR, invKey = MW,
	// imm = NewKey, rqkey = Access. Binds are rare; the ring stays small.
	// A FLUSH keeps its length in length and placement | level<<8 in
	// rqkey; an ATOMIC WRITE its 8 bytes in cmpAdd, length 8.

	// Requester progress (engine-owned).
	state    wqeState
	status   WCStatus
	firstPSN wire.PSN
	lastPSN  wire.PSN
	rdRes    uint32 // a pending READ's response PSNs taken from the read budget
	rdWaited bool   // the READ waited for the read budget (counted once)
}

type wqeState uint8

const (
	wqePosted  wqeState = iota // not yet started
	wqePending                 // all or part sent, waiting for acknowledgement
	wqeDone                    // acknowledged (or completed locally), waiting to retire
)

// recvWQE is a receive queue slot.
type recvWQE struct {
	wrid   uint64
	nsge   uint16
	length uint64
}
