package wire

// Opcode is the BTH opcode: the top three bits name the transport (RC, UC,
// RD, UD, CNP, XRC) and the low five bits the operation (IBTA Vol. 1
// §9.2.1, Table 38).
type Opcode uint8

// Reliable Connection opcodes.
const (
	OpRCSendFirst      Opcode = 0x00
	OpRCSendMiddle     Opcode = 0x01
	OpRCSendLast       Opcode = 0x02
	OpRCSendLastImm    Opcode = 0x03
	OpRCSendOnly       Opcode = 0x04
	OpRCSendOnlyImm    Opcode = 0x05
	OpRCWriteFirst     Opcode = 0x06
	OpRCWriteMiddle    Opcode = 0x07
	OpRCWriteLast      Opcode = 0x08
	OpRCWriteLastImm   Opcode = 0x09
	OpRCWriteOnly      Opcode = 0x0A
	OpRCWriteOnlyImm   Opcode = 0x0B
	OpRCReadRequest    Opcode = 0x0C
	OpRCReadRespFirst  Opcode = 0x0D
	OpRCReadRespMiddle Opcode = 0x0E
	OpRCReadRespLast   Opcode = 0x0F
	OpRCReadRespOnly   Opcode = 0x10
	OpRCAck            Opcode = 0x11
	OpRCAtomicAck      Opcode = 0x12
	OpRCCompareSwap    Opcode = 0x13
	OpRCFetchAdd       Opcode = 0x14
	OpRCSendLastInv    Opcode = 0x16
	OpRCSendOnlyInv    Opcode = 0x17
	OpRCFlush          Opcode = 0x1C // IBTA 1.5: answered with a zero-length READ RESPONSE ONLY
	OpRCAtomicWrite    Opcode = 0x1D // IBTA 1.5: answered with a zero-length READ RESPONSE ONLY
)

// Unreliable Connection opcodes: sends and RDMA WRITEs only.
const (
	OpUCSendFirst    Opcode = 0x20
	OpUCSendMiddle   Opcode = 0x21
	OpUCSendLast     Opcode = 0x22
	OpUCSendLastImm  Opcode = 0x23
	OpUCSendOnly     Opcode = 0x24
	OpUCSendOnlyImm  Opcode = 0x25
	OpUCWriteFirst   Opcode = 0x26
	OpUCWriteMiddle  Opcode = 0x27
	OpUCWriteLast    Opcode = 0x28
	OpUCWriteLastImm Opcode = 0x29
	OpUCWriteOnly    Opcode = 0x2A
	OpUCWriteOnlyImm Opcode = 0x2B
)

// Unreliable Datagram opcodes: single-packet sends only.
const (
	OpUDSendOnly    Opcode = 0x64
	OpUDSendOnlyImm Opcode = 0x65
)

// OpCNP is the RoCEv2 Congestion Notification Packet (annex A17.9.3): a BTH
// followed by 16 reserved bytes, sent back to the source of ECN-marked
// traffic. It is neither a request nor a response: it goes to congestion
// control, not to the responder or the completer.
const OpCNP Opcode = 0x81

// Transport is the transport service an opcode belongs to. Its value is the
// opcode's top three bits.
type Transport uint8

// Transports this NIC implements; 2 (RD) and 5 (XRC) are not implemented.
const (
	TransportRC  Transport = 0
	TransportUC  Transport = 1
	TransportUD  Transport = 3
	TransportCNP Transport = 4
)

// String returns the transport's abbreviation.
func (t Transport) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportUD:
		return "UD"
	case TransportCNP:
		return "CNP"
	}
	return "TRANSPORT(" + itoa(uint64(t)) + ")"
}

// OpFlags describe an opcode: which headers follow the BTH, and what the
// packet means to the requester, responder and completer. Engines test
// flags instead of switching on opcodes (rxe's mask).
type OpFlags uint32

// Header-presence bits: set when the opcode carries the header.
const (
	FlagDETH OpFlags = 1 << iota
	FlagRETH
	FlagAtomicETH
	FlagAETH
	FlagAtomicAckETH
	FlagImmDt
	FlagIETH
	FlagFETH
	// FlagPayload: the packet may carry payload (it may also be empty, as
	// a zero-length SEND is).
	FlagPayload

	// FlagRequest: sent by a requester to a responder.
	FlagRequest
	// FlagResponse: sent by a responder to a requester's completer (ACK,
	// atomic ACK, RDMA READ responses).
	FlagResponse

	// FlagSend: part of a SEND message.
	FlagSend
	// FlagWrite: part of an RDMA WRITE message.
	FlagWrite
	// FlagReadReq: an RDMA READ request.
	FlagReadReq
	// FlagReadResp: part of an RDMA READ response.
	FlagReadResp
	// FlagAtomic: an atomic request (CmpSwap or FetchAdd).
	FlagAtomic
	// FlagAck: an ACK or atomic ACK, whose AETH carries an ACK or NAK.
	FlagAck
	// FlagFlush: an RDMA FLUSH request.
	FlagFlush
	// FlagAtomicWrite: an ATOMIC WRITE request (RETH and an 8-byte
	// payload).
	FlagAtomicWrite

	// FlagFirst: the first packet of a message. Single-packet messages
	// (ONLY, READ request, atomics, ACKs, CNP) are both First and Last;
	// MIDDLE packets are neither.
	FlagFirst
	// FlagLast: the last packet of a message.
	FlagLast

	// FlagConsumesRecvWQE: the responder needs a receive WQE for this
	// packet: every packet of a SEND (the WQE is fetched on FIRST or ONLY
	// and kept through MIDDLE and LAST), and the LAST or ONLY packet of an
	// RDMA WRITE with immediate, whose immediate data completes a WQE.
	FlagConsumesRecvWQE
	// FlagCompletes: the responder produces a receive completion for this
	// packet: the LAST or ONLY packet of a SEND or of an RDMA WRITE with
	// immediate.
	FlagCompletes
	// FlagImm: the packet carries immediate data (same headers as
	// FlagImmDt, named for its meaning).
	FlagImm
	// FlagInv: the packet carries an rkey to invalidate (SEND with
	// invalidate; same header as FlagIETH).
	FlagInv

	numFlags = iota
)

// Has reports whether all bits of f are set.
func (fl OpFlags) Has(f OpFlags) bool { return fl&f == f }

var flagNames = [numFlags]string{
	"DETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH", "FETH", "Payload",
	"Request", "Response", "Send", "Write", "ReadReq", "ReadResp", "Atomic", "Ack", "Flush", "AtomicWrite",
	"First", "Last", "ConsumesRecvWQE", "Completes", "Imm", "Inv",
}

// String lists the set flags, separated by '|'.
func (fl OpFlags) String() string {
	s := ""
	for i, name := range flagNames {
		if fl&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += name
		}
	}
	if rest := fl &^ (1<<numFlags - 1); rest != 0 {
		if s != "" {
			s += "|"
		}
		s += hexString(uint64(rest))
	}
	if s == "" {
		return "0"
	}
	return s
}

// Header names an extension transport header. The values follow the order
// in which the headers appear after the BTH (IBTA §9.2): DETH, FETH (IBTA
// 1.5: before the RETH of a FLUSH), RETH, AtomicETH, AETH, AtomicAckETH,
// ImmDt, IETH.
type Header uint8

// Extension transport headers, in wire order.
const (
	HdrDETH Header = iota
	HdrFETH
	HdrRETH
	HdrAtomicETH
	HdrAETH
	HdrAtomicAckETH
	HdrImmDt
	HdrIETH

	numHeaders = iota
)

var headerInfo = [numHeaders]struct {
	name string
	size int
	flag OpFlags
}{
	HdrDETH:         {"DETH", DETHSize, FlagDETH},
	HdrFETH:         {"FETH", FETHSize, FlagFETH},
	HdrRETH:         {"RETH", RETHSize, FlagRETH},
	HdrAtomicETH:    {"AtomicETH", AtomicETHSize, FlagAtomicETH},
	HdrAETH:         {"AETH", AETHSize, FlagAETH},
	HdrAtomicAckETH: {"AtomicAckETH", AtomicAckETHSize, FlagAtomicAckETH},
	HdrImmDt:        {"ImmDt", ImmDtSize, FlagImmDt},
	HdrIETH:         {"IETH", IETHSize, FlagIETH},
}

// Size returns the header's size in bytes, or 0 for an unknown header.
func (h Header) Size() int {
	if h >= numHeaders {
		return 0
	}
	return headerInfo[h].size
}

// Flag returns the OpFlags bit that says an opcode carries h.
func (h Header) Flag() OpFlags {
	if h >= numHeaders {
		return 0
	}
	return headerInfo[h].flag
}

// String returns the header's IBTA name.
func (h Header) String() string {
	if h >= numHeaders {
		return "HEADER(" + itoa(uint64(h)) + ")"
	}
	return headerInfo[h].name
}

// OpcodeInfo is one row of the opcode table: everything the engines need to
// know about an opcode without switching on it.
type OpcodeInfo struct {
	// Name is the opcode's name, e.g. "RC_RDMA_WRITE_FIRST"; empty for an
	// opcode this NIC does not implement.
	Name string
	// Transport is the service the opcode belongs to.
	Transport Transport
	// Flags say which headers follow the BTH and what the packet means.
	Flags OpFlags
	// HdrLen is the number of bytes from the start of the BTH to the
	// payload: BTH plus extension headers (plus the 16 reserved bytes of a
	// CNP).
	HdrLen int

	off [numHeaders]int8 // offset of each header from the BTH, -1 if absent
}

// Offset returns the byte offset of extension header h from the start of
// the BTH, or -1 if the opcode does not carry h.
func (info *OpcodeInfo) Offset(h Header) int {
	if h >= numHeaders {
		return -1
	}
	return int(info.off[h])
}

// Info returns the opcode's table row. It is never nil; for an opcode this
// NIC does not implement, Flags is 0 and Name is empty. The row is shared
// and must not be modified.
func (op Opcode) Info() *OpcodeInfo { return &opcodeTable[op] }

// Valid reports whether the opcode is one this NIC implements.
func (op Opcode) Valid() bool { return opcodeTable[op].Name != "" }

// String returns the opcode's name, e.g. "RC_SEND_FIRST", or "OPCODE(0x15)"
// for an opcode this NIC does not implement.
func (op Opcode) String() string {
	if name := opcodeTable[op].Name; name != "" {
		return name
	}
	return "OPCODE(" + hexString(uint64(op)) + ")"
}
