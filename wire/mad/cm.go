package mad

import (
	"errors"
	"fmt"
)

// The CM class's messages (IBTA Vol. 1 §12.6, Tables 106-120): each a
// struct of every field, decoded from and encoded into a MAD's data.
// Offsets are the spec's, from the start of the message's data. The
// reserved bits are not fields: Encode writes them zero, as the spec
// asks of a sender, and a receiver ignores them.

// Private data lengths (§12.6): what each message carries for the
// consumer (rdma_cm puts its own header in the first 36 bytes of a REQ's).
const (
	REQPrivateLen     = 92
	MRAPrivateLen     = 222
	REJPrivateLen     = 148
	REJARILen         = 72
	REPPrivateLen     = 196
	RTUPrivateLen     = 224
	DREQPrivateLen    = 220
	DREPPrivateLen    = 224
	SIDRREQPrivateLen = 216
	SIDRREPPrivateLen = 136
	SIDRREPInfoLen    = 72
)

// Path is a REQ's primary or alternate path (§12.6.5).
type Path struct {
	LocalLID, RemoteLID uint16
	LocalGID, RemoteGID [16]byte
	FlowLabel           uint32 // 20 bits
	PacketRate          uint8  // 6 bits
	TrafficClass        uint8
	HopLimit            uint8
	SL                  uint8 // 4 bits
	SubnetLocal         bool
	LocalAckTimeout     uint8 // 5 bits
}

// fields lists a path whose first byte is at offset o of the REQ's data.
func (p *Path) fields(c *coder, o uint16) {
	c.u16(at(o, 0, 16), &p.LocalLID)
	c.u16(at(o+2, 0, 16), &p.RemoteLID)
	c.bytes(o+4, p.LocalGID[:])
	c.bytes(o+20, p.RemoteGID[:])
	c.u32(at(o+36, 0, 20), &p.FlowLabel)
	c.u8(at(o+39, 2, 6), &p.PacketRate)
	c.u8(at(o+40, 0, 8), &p.TrafficClass)
	c.u8(at(o+41, 0, 8), &p.HopLimit)
	c.u8(at(o+42, 0, 4), &p.SL)
	c.flag(at(o+42, 4, 1), &p.SubnetLocal)
	c.u8(at(o+43, 0, 5), &p.LocalAckTimeout)
}

// REQ is the request for communication (Table 106).
type REQ struct {
	LocalCommID             uint32
	VendorID                uint32 // 24 bits
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits: 4.096 µs × 2^n
	TransportServiceType    uint8  // 2 bits: 0 RC, 1 UC, 3 XRC (with ExtendedTransportType)
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits, as IBV_MTU_*
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransportType   uint8 // 3 bits
	Primary, Alternate      Path
	SAPSupported            bool
	PrivateData             [REQPrivateLen]byte
}

func (r *REQ) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(5, 0, 24), &r.VendorID)
	c.u64(at(8, 0, 64), &r.ServiceID)
	c.u64(at(16, 0, 64), &r.LocalCAGUID)
	c.u32(at(28, 0, 32), &r.LocalQKey)
	c.u32(at(32, 0, 24), &r.LocalQPN)
	c.u8(at(35, 0, 8), &r.ResponderResources)
	c.u32(at(36, 0, 24), &r.LocalEECN)
	c.u8(at(39, 0, 8), &r.InitiatorDepth)
	c.u32(at(40, 0, 24), &r.RemoteEECN)
	c.u8(at(43, 0, 5), &r.RemoteCMResponseTimeout)
	c.u8(at(43, 5, 2), &r.TransportServiceType)
	c.flag(at(43, 7, 1), &r.EndToEndFlowControl)
	c.u32(at(44, 0, 24), &r.StartingPSN)
	c.u8(at(47, 0, 5), &r.LocalCMResponseTimeout)
	c.u8(at(47, 5, 3), &r.RetryCount)
	c.u16(at(48, 0, 16), &r.PKey)
	c.u8(at(50, 0, 4), &r.PathMTU)
	c.flag(at(50, 4, 1), &r.RDCExists)
	c.u8(at(50, 5, 3), &r.RNRRetryCount)
	c.u8(at(51, 0, 4), &r.MaxCMRetries)
	c.flag(at(51, 4, 1), &r.SRQ)
	c.u8(at(51, 5, 3), &r.ExtendedTransportType)
	r.Primary.fields(c, 52)
	r.Alternate.fields(c, 96)
	c.flag(at(139, 5, 1), &r.SAPSupported)
	c.bytes(140, r.PrivateData[:])
}

// MRA is the message receipt acknowledgement (Table 107).
type MRA struct {
	LocalCommID, RemoteCommID uint32
	MessageMRAed              uint8 // 2 bits: 0 REQ, 1 REP, 2 LAP
	ServiceTimeout            uint8 // 5 bits
	PrivateData               [MRAPrivateLen]byte
}

func (r *MRA) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(4, 0, 32), &r.RemoteCommID)
	c.u8(at(8, 0, 2), &r.MessageMRAed)
	c.u8(at(9, 0, 5), &r.ServiceTimeout)
	c.bytes(10, r.PrivateData[:])
}

// REJ is the reject (Table 108).
type REJ struct {
	LocalCommID, RemoteCommID uint32
	MessageRejected           uint8 // 2 bits: 0 REQ, 1 REP, 2 no message
	RejectedInfoLength        uint8 // 7 bits
	Reason                    uint16
	ARI                       [REJARILen]byte // additional rejection information
	PrivateData               [REJPrivateLen]byte
}

func (r *REJ) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(4, 0, 32), &r.RemoteCommID)
	c.u8(at(8, 0, 2), &r.MessageRejected)
	c.u8(at(9, 0, 7), &r.RejectedInfoLength)
	c.u16(at(10, 0, 16), &r.Reason)
	c.bytes(12, r.ARI[:])
	c.bytes(84, r.PrivateData[:])
}

// REP is the reply to a REQ (Table 110).
type REP struct {
	LocalCommID, RemoteCommID uint32
	LocalQKey                 uint32
	LocalQPN                  uint32 // 24 bits
	LocalEECN                 uint32 // 24 bits
	StartingPSN               uint32 // 24 bits
	VendorID                  uint32 // 24 bits, in three bytes (15, 19, 23)
	ResponderResources        uint8
	InitiatorDepth            uint8
	TargetACKDelay            uint8 // 5 bits
	FailoverAccepted          uint8 // 2 bits
	EndToEndFlowControl       bool
	RNRRetryCount             uint8 // 3 bits
	SRQ                       bool
	LocalCAGUID               uint64
	PrivateData               [REPPrivateLen]byte
}

func (r *REP) fields(c *coder) {
	var vh, vm, vl uint8
	if c.enc {
		vh, vm, vl = uint8(r.VendorID>>16), uint8(r.VendorID>>8), uint8(r.VendorID)
	}
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(4, 0, 32), &r.RemoteCommID)
	c.u32(at(8, 0, 32), &r.LocalQKey)
	c.u32(at(12, 0, 24), &r.LocalQPN)
	c.u8(at(15, 0, 8), &vh)
	c.u32(at(16, 0, 24), &r.LocalEECN)
	c.u8(at(19, 0, 8), &vm)
	c.u32(at(20, 0, 24), &r.StartingPSN)
	c.u8(at(23, 0, 8), &vl)
	c.u8(at(24, 0, 8), &r.ResponderResources)
	c.u8(at(25, 0, 8), &r.InitiatorDepth)
	c.u8(at(26, 0, 5), &r.TargetACKDelay)
	c.u8(at(26, 5, 2), &r.FailoverAccepted)
	c.flag(at(26, 7, 1), &r.EndToEndFlowControl)
	c.u8(at(27, 0, 3), &r.RNRRetryCount)
	c.flag(at(27, 3, 1), &r.SRQ)
	c.u64(at(28, 0, 64), &r.LocalCAGUID)
	c.bytes(36, r.PrivateData[:])
	if !c.enc {
		r.VendorID = uint32(vh)<<16 | uint32(vm)<<8 | uint32(vl)
	}
}

// RTU is ready to use (Table 111).
type RTU struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               [RTUPrivateLen]byte
}

func (r *RTU) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(4, 0, 32), &r.RemoteCommID)
	c.bytes(8, r.PrivateData[:])
}

// DREQ is the request for communication release (Table 112).
type DREQ struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32 // 24 bits: the QPN (or EECN) of the receiver
	PrivateData               [DREQPrivateLen]byte
}

func (r *DREQ) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(4, 0, 32), &r.RemoteCommID)
	c.u32(at(8, 0, 24), &r.RemoteQPN)
	c.bytes(12, r.PrivateData[:])
}

// DREP is the reply to a DREQ (Table 113).
type DREP struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               [DREPPrivateLen]byte
}

func (r *DREP) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.LocalCommID)
	c.u32(at(4, 0, 32), &r.RemoteCommID)
	c.bytes(8, r.PrivateData[:])
}

// SIDRREQ is the service ID resolution request (Table 119): a UD
// consumer asks for the QPN and Q_Key behind a service ID.
type SIDRREQ struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData [SIDRREQPrivateLen]byte
}

func (r *SIDRREQ) fields(c *coder) {
	c.u32(at(0, 0, 32), &r.RequestID)
	c.u16(at(4, 0, 16), &r.PKey)
	c.u64(at(8, 0, 64), &r.ServiceID)
	c.bytes(16, r.PrivateData[:])
}

// SIDRREP is the reply to a SIDR_REQ (Table 120).
type SIDRREP struct {
	RequestID      uint32
	Status         uint8 // SIDRStatus
	InfoLength     uint8
	VendorID       uint32 // 24 bits, in bytes 6-7 and 11
	QPN            uint32 // 24 bits
	ServiceID      uint64
	QKey           uint32
	AdditionalInfo [SIDRREPInfoLen]byte
	PrivateData    [SIDRREPPrivateLen]byte
}

func (r *SIDRREP) fields(c *coder) {
	var vh uint16
	var vl uint8
	if c.enc {
		vh, vl = uint16(r.VendorID>>8), uint8(r.VendorID)
	}
	c.u32(at(0, 0, 32), &r.RequestID)
	c.u8(at(4, 0, 8), &r.Status)
	c.u8(at(5, 0, 8), &r.InfoLength)
	c.u16(at(6, 0, 16), &vh)
	c.u32(at(8, 0, 24), &r.QPN)
	c.u8(at(11, 0, 8), &vl)
	c.u64(at(12, 0, 64), &r.ServiceID)
	c.u32(at(20, 0, 32), &r.QKey)
	c.bytes(24, r.AdditionalInfo[:])
	c.bytes(96, r.PrivateData[:])
	if !c.enc {
		r.VendorID = uint32(vh)<<8 | uint32(vl)
	}
}

// Message is a CM message: *REQ, *MRA, *REJ, *REP, *RTU, *DREQ, *DREP,
// *SIDRREQ or *SIDRREP.
type Message interface {
	Attr() Attr
	fields(c *coder)
}

func (*REQ) Attr() Attr     { return AttrREQ }
func (*MRA) Attr() Attr     { return AttrMRA }
func (*REJ) Attr() Attr     { return AttrREJ }
func (*REP) Attr() Attr     { return AttrREP }
func (*RTU) Attr() Attr     { return AttrRTU }
func (*DREQ) Attr() Attr    { return AttrDREQ }
func (*DREP) Attr() Attr    { return AttrDREP }
func (*SIDRREQ) Attr() Attr { return AttrSIDRREQ }
func (*SIDRREP) Attr() Attr { return AttrSIDRREP }

// ErrNotCM is Message's error for a MAD that is not a CM message this
// package knows (another class, or LAP, APR, ClassPortInfo).
var ErrNotCM = errors.New("mad: not a CM message")

// Message decodes the CM message m holds (m from Parse).
func (m MAD) Message() (Message, error) {
	if m.Class() != ClassCM {
		return nil, ErrNotCM
	}
	var msg Message
	switch m.Attr() {
	case AttrREQ:
		msg = new(REQ)
	case AttrMRA:
		msg = new(MRA)
	case AttrREJ:
		msg = new(REJ)
	case AttrREP:
		msg = new(REP)
	case AttrRTU:
		msg = new(RTU)
	case AttrDREQ:
		msg = new(DREQ)
	case AttrDREP:
		msg = new(DREP)
	case AttrSIDRREQ:
		msg = new(SIDRREQ)
	case AttrSIDRREP:
		msg = new(SIDRREP)
	default:
		return nil, fmt.Errorf("%w: attribute %v", ErrNotCM, m.Attr())
	}
	decode(m, msg.fields)
	return msg, nil
}

// SetMessage encodes msg into m's data, its reserved bits zero; the
// header is SetHeader's (CMHeader(msg.Attr(), tid)).
func (m MAD) SetMessage(msg Message) { encode(m, msg.fields) }
