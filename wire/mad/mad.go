package mad

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Size is a MAD's length: every MAD is 256 bytes (§13.4.2).
const Size = 256

// HeaderSize is the common MAD header's length; the class's data follow.
const HeaderSize = 24

// GSIQKey is the Q_Key of the general services interface (QP1,
// §13.4.6.1): a MAD to QP1 carries it in its DETH.
const GSIQKey = 0x80010000

// GSIQPN is the general services interface's QP number.
const GSIQPN = 1

// Management classes and their versions.
const (
	BaseVersion    = 1
	ClassCM        = 0x07 // communication management (§12.6)
	ClassVersionCM = 2
)

// Methods (§13.4.5). CM messages are all sends.
const (
	MethodGet      = 0x01
	MethodSet      = 0x02
	MethodSend     = 0x03
	MethodGetResp  = 0x81
	MethodResponse = 0x80 // the R bit: a response
)

// Attr is an attribute ID: for the CM class, which message a MAD is.
type Attr uint16

// The CM class's attributes (§12.6, Table 104).
const (
	AttrClassPortInfo Attr = 0x0001
	AttrREQ           Attr = 0x0010
	AttrMRA           Attr = 0x0011
	AttrREJ           Attr = 0x0012
	AttrREP           Attr = 0x0013
	AttrRTU           Attr = 0x0014
	AttrDREQ          Attr = 0x0015
	AttrDREP          Attr = 0x0016
	AttrSIDRREQ       Attr = 0x0017
	AttrSIDRREP       Attr = 0x0018
	AttrLAP           Attr = 0x0019
	AttrAPR           Attr = 0x001A
)

func (a Attr) String() string {
	switch a {
	case AttrClassPortInfo:
		return "ClassPortInfo"
	case AttrREQ:
		return "REQ"
	case AttrMRA:
		return "MRA"
	case AttrREJ:
		return "REJ"
	case AttrREP:
		return "REP"
	case AttrRTU:
		return "RTU"
	case AttrDREQ:
		return "DREQ"
	case AttrDREP:
		return "DREP"
	case AttrSIDRREQ:
		return "SIDR_REQ"
	case AttrSIDRREP:
		return "SIDR_REP"
	case AttrLAP:
		return "LAP"
	case AttrAPR:
		return "APR"
	}
	return fmt.Sprintf("Attr(%#04x)", uint16(a))
}

// MAD is a view of a whole MAD: its common header (§13.4.2) and the
// class's data after it.
//
//	 0               1               2               3
//	+---------------+---------------+---------------+---------------+
//	| BaseVersion   | MgmtClass     | ClassVersion  |R| Method      |
//	+---------------+---------------+---------------+---------------+
//	| Status                        | ClassSpecific                 |
//	+---------------+---------------+---------------+---------------+
//	| TransactionID (8 bytes)                                       |
//	+---------------+---------------+---------------+---------------+
//	| AttributeID                   | Reserved                      |
//	+---------------+---------------+---------------+---------------+
//	| AttributeModifier                                             |
//	+---------------+---------------+---------------+---------------+
//	| Data (232 bytes)                                              |
type MAD []byte

// Header is the common MAD header's fields.
type Header struct {
	BaseVersion   uint8
	Class         uint8
	ClassVersion  uint8
	Method        uint8 // with the R bit (MethodResponse)
	Status        uint16
	ClassSpecific uint16
	TID           uint64
	Attr          Attr
	Reserved      uint16
	AttrMod       uint32
}

// Errors of Parse.
var (
	ErrShort        = errors.New("mad: shorter than 256 bytes")
	ErrBaseVersion  = errors.New("mad: base version is not 1")
	ErrClassVersion = errors.New("mad: unsupported class version")
)

// Parse checks that b holds a MAD (256 bytes at least; a RoCEv2 UD
// payload carries exactly that) of base version 1, and, for the CM
// class, class version 2, and returns its view.
func Parse(b []byte) (MAD, error) {
	if len(b) < Size {
		return nil, ErrShort
	}
	m := MAD(b[:Size])
	if m[0] != BaseVersion {
		return nil, ErrBaseVersion
	}
	if m.Class() == ClassCM && m[2] != ClassVersionCM {
		return nil, ErrClassVersion
	}
	return m, nil
}

// Class returns the management class.
func (m MAD) Class() uint8 { return m[1] }

// Method returns the method, with the R bit.
func (m MAD) Method() uint8 { return m[3] }

// TID returns the transaction ID.
func (m MAD) TID() uint64 { return binary.BigEndian.Uint64(m[8:]) }

// Attr returns the attribute ID.
func (m MAD) Attr() Attr { return Attr(binary.BigEndian.Uint16(m[16:])) }

// Data returns the class's data after the header.
func (m MAD) Data() []byte { return m[HeaderSize:Size] }

// Header decodes the common header.
func (m MAD) Header() Header {
	return Header{
		BaseVersion: m[0], Class: m[1], ClassVersion: m[2], Method: m[3],
		Status:        binary.BigEndian.Uint16(m[4:]),
		ClassSpecific: binary.BigEndian.Uint16(m[6:]),
		TID:           binary.BigEndian.Uint64(m[8:]),
		Attr:          Attr(binary.BigEndian.Uint16(m[16:])),
		Reserved:      binary.BigEndian.Uint16(m[18:]),
		AttrMod:       binary.BigEndian.Uint32(m[20:]),
	}
}

// SetHeader writes the common header.
func (m MAD) SetHeader(h *Header) {
	m[0], m[1], m[2], m[3] = h.BaseVersion, h.Class, h.ClassVersion, h.Method
	binary.BigEndian.PutUint16(m[4:], h.Status)
	binary.BigEndian.PutUint16(m[6:], h.ClassSpecific)
	binary.BigEndian.PutUint64(m[8:], h.TID)
	binary.BigEndian.PutUint16(m[16:], uint16(h.Attr))
	binary.BigEndian.PutUint16(m[18:], h.Reserved)
	binary.BigEndian.PutUint32(m[20:], h.AttrMod)
}

// CMHeader is the header of a CM message of attribute a: base version 1,
// the CM class at version 2, method Send.
func CMHeader(a Attr, tid uint64) Header {
	return Header{BaseVersion: BaseVersion, Class: ClassCM, ClassVersion: ClassVersionCM, Method: MethodSend, TID: tid, Attr: a}
}
