package wire

import "encoding/binary"

// AETH is a view of an ACK Extended Transport Header (IBTA §9.3.5): the
// responder's ACK or NAK and its message sequence number. It follows the
// BTH of ACKs, atomic ACKs and the FIRST, LAST and ONLY READ responses.
// Accessors do not check the length: check len(a) >= AETHSize first
// (Packet.Parse does).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Syndrome    |          Message Sequence Number (MSN)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AETH []byte

const (
	aethSyndrome = 0
	aethMSN      = 0 // read as a 32-bit word, low 24 bits

	msnMask = 0xFFFFFF
)

// Encode writes all 4 bytes of the AETH; msn is truncated to 24 bits.
func (a AETH) Encode(s Syndrome, msn uint32) {
	binary.BigEndian.PutUint32(a[aethMSN:], uint32(s)<<24|msn&msnMask)
}

// Syndrome returns the "syndrome" field of the AETH.
func (a AETH) Syndrome() Syndrome { return Syndrome(a[aethSyndrome]) }

// MSN returns the "message sequence number" field of the AETH.
func (a AETH) MSN() uint32 { return binary.BigEndian.Uint32(a[aethMSN:]) & msnMask }

// SetSyndrome sets the "syndrome" field of the AETH.
func (a AETH) SetSyndrome(s Syndrome) { a[aethSyndrome] = byte(s) }

// SetMSN sets the "message sequence number" field of the AETH.
func (a AETH) SetMSN(msn uint32) { put24(a[aethMSN+1:], msn) }

// Syndrome is the AETH syndrome byte (IBTA §9.7.5.1, Table 42): bit 7 is
// reserved, bits 6..5 say ACK, RNR NAK or NAK, and bits 4..0 hold the
// credit count, RNR timer or NAK code accordingly.
//
//	  7   6 5   4 3 2 1 0
//	+---+-----+-----------+
//	| 0 |kind |   value   |
//	+---+-----+-----------+
type Syndrome uint8

const (
	syndromeKindShift = 5
	syndromeKindMask  = 0x3
	syndromeValueMask = 0x1F
)

// AckKind is the class of an AETH syndrome.
type AckKind uint8

// Syndrome classes (bits 6..5 of the syndrome).
const (
	AckKindACK      AckKind = 0
	AckKindRNRNAK   AckKind = 1
	AckKindReserved AckKind = 2
	AckKindNAK      AckKind = 3
)

// String returns the class name.
func (k AckKind) String() string {
	switch k {
	case AckKindACK:
		return "ACK"
	case AckKindRNRNAK:
		return "RNR_NAK"
	case AckKindNAK:
		return "NAK"
	}
	return "RESERVED"
}

// CreditsInvalid is the credit count that means "no end-to-end flow control
// credits are advertised" (syndrome 0x1F), which rxe sends in every ACK.
const CreditsInvalid = 31

// NAKCode is the reason a responder refuses a request (IBTA Table 43).
type NAKCode uint8

// NAK codes; each maps to a requester completion status.
const (
	// NAKPSNSeqErr: a PSN arrived out of sequence; BTH.PSN holds the
	// expected PSN, and every earlier PSN is implicitly acknowledged.
	NAKPSNSeqErr NAKCode = 0
	// NAKInvalidRequest: unsupported or malformed request.
	NAKInvalidRequest NAKCode = 1
	// NAKRemoteAccessErr: rkey, bounds or access-rights violation.
	NAKRemoteAccessErr NAKCode = 2
	// NAKRemoteOpErr: the responder failed to carry out a valid request.
	NAKRemoteOpErr NAKCode = 3
	// NAKInvalidRDRequest: invalid RD request (RD only).
	NAKInvalidRDRequest NAKCode = 4
)

// String returns the NAK code's name.
func (c NAKCode) String() string {
	switch c {
	case NAKPSNSeqErr:
		return "PSN_SEQ_ERR"
	case NAKInvalidRequest:
		return "INVALID_REQUEST"
	case NAKRemoteAccessErr:
		return "REMOTE_ACCESS_ERR"
	case NAKRemoteOpErr:
		return "REMOTE_OP_ERR"
	case NAKInvalidRDRequest:
		return "INVALID_RD_REQUEST"
	}
	return "NAK_CODE(" + itoa(uint64(c)) + ")"
}

// SyndromeACK returns the syndrome of an ACK advertising credits (use
// CreditsInvalid when not doing end-to-end flow control).
func SyndromeACK(credits uint8) Syndrome {
	return syndrome(AckKindACK, credits)
}

// SyndromeRNR returns the syndrome of an RNR NAK asking the requester to
// wait for the given RNR timer code (see RNRTimerDuration).
func SyndromeRNR(timer uint8) Syndrome { return syndrome(AckKindRNRNAK, timer) }

// SyndromeNAK returns the syndrome of a NAK with code c.
func SyndromeNAK(c NAKCode) Syndrome { return syndrome(AckKindNAK, uint8(c)) }

func syndrome(k AckKind, v uint8) Syndrome {
	return Syndrome(uint8(k)<<syndromeKindShift | v&syndromeValueMask)
}

// Kind returns the syndrome's class.
func (s Syndrome) Kind() AckKind { return AckKind(s>>syndromeKindShift) & syndromeKindMask }

// Credits returns the credit count of an ACK syndrome.
func (s Syndrome) Credits() uint8 { return uint8(s) & syndromeValueMask }

// RNRTimer returns the 5-bit timer code of an RNR NAK syndrome.
func (s Syndrome) RNRTimer() uint8 { return uint8(s) & syndromeValueMask }

// NAKCode returns the code of a NAK syndrome.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s & syndromeValueMask) }

// String describes the syndrome, e.g. "ACK credits=31", "RNR_NAK timer=14"
// or "NAK PSN_SEQ_ERR".
func (s Syndrome) String() string {
	switch s.Kind() {
	case AckKindACK:
		return "ACK credits=" + itoa(uint64(s.Credits()))
	case AckKindRNRNAK:
		return "RNR_NAK timer=" + itoa(uint64(s.RNRTimer()))
	case AckKindNAK:
		return "NAK " + s.NAKCode().String()
	}
	return "RESERVED(" + hexString(uint64(s)) + ")"
}
