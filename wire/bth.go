package wire

import "encoding/binary"

// BTH is a view of a Base Transport Header (IBTA Vol. 1 §9.2), the
// header every RoCEv2 packet starts with after UDP. In RoCEv2 the first two
// bits of the byte IBA calls resv8a carry FECN and BECN (annex A17.3.4).
//
// Accessors do not check the length beyond Go's own bounds checks: check
// len(b) >= BTHSize (Packet.Parse does) before calling them.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad| TVer  |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|  resv6    |             Destination QP                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   resv7     |        Packet Sequence Number (PSN)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type BTH []byte

const (
	bthOpcode = 0
	bthFlags  = 1 // S, M, PadCnt, TVer
	bthPKey   = 2
	bthResv8a = 4 // F, B, resv6: masked to ones in the ICRC
	bthDestQP = 4 // read as a 32-bit word, low 24 bits
	bthAckReq = 8
	bthPSN    = 8 // read as a 32-bit word, low 24 bits

	bthSEBit     = 0x80
	bthMigReqBit = 0x40
	bthPadMask   = 0x30
	bthPadShift  = 4
	bthTVerMask  = 0x0F
	bthFECNBit   = 0x80
	bthBECNBit   = 0x40
	bthAckReqBit = 0x80
)

// BTHFields holds every field of a BTH, for Encode.
type BTHFields struct {
	Opcode   Opcode
	SE       bool  // solicited event
	MigReq   bool  // migration state
	PadCount uint8 // 0..3
	TVer     uint8 // transport header version, 0
	PKey     uint16
	FECN     bool // RoCEv2: forward ECN
	BECN     bool // RoCEv2: backward ECN
	DestQP   uint32
	AckReq   bool
	PSN      PSN
}

// Encode writes all 12 bytes of the BTH from f, zeroing reserved bits.
func (b BTH) Encode(f *BTHFields) {
	_ = b[BTHSize-1]
	b[bthOpcode] = byte(f.Opcode)
	b[bthFlags] = boolBit(f.SE, bthSEBit) | boolBit(f.MigReq, bthMigReqBit) |
		f.PadCount<<bthPadShift&bthPadMask | f.TVer&bthTVerMask
	binary.BigEndian.PutUint16(b[bthPKey:], f.PKey)
	binary.BigEndian.PutUint32(b[bthDestQP:], f.DestQP&QPNMask|
		uint32(boolBit(f.FECN, bthFECNBit)|boolBit(f.BECN, bthBECNBit))<<24)
	binary.BigEndian.PutUint32(b[bthPSN:], uint32(f.PSN)&PSNMask|
		uint32(boolBit(f.AckReq, bthAckReqBit))<<24)
}

// Opcode returns the "OpCode" field of the BTH.
func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }

// SE returns the "solicited event" bit of the BTH.
func (b BTH) SE() bool { return b[bthFlags]&bthSEBit != 0 }

// MigReq returns the "MigReq" (migration state) bit of the BTH.
func (b BTH) MigReq() bool { return b[bthFlags]&bthMigReqBit != 0 }

// PadCount returns the "PadCnt" field of the BTH: the number of pad bytes
// between the payload and the ICRC.
func (b BTH) PadCount() int { return int(b[bthFlags]&bthPadMask) >> bthPadShift }

// TVer returns the "transport header version" field of the BTH.
func (b BTH) TVer() uint8 { return b[bthFlags] & bthTVerMask }

// PKey returns the "partition key" field of the BTH.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[bthPKey:]) }

// FECN returns the RoCEv2 "forward explicit congestion notification" bit.
func (b BTH) FECN() bool { return b[bthResv8a]&bthFECNBit != 0 }

// BECN returns the RoCEv2 "backward explicit congestion notification" bit.
func (b BTH) BECN() bool { return b[bthResv8a]&bthBECNBit != 0 }

// DestQP returns the "destination QP" field of the BTH.
func (b BTH) DestQP() uint32 { return binary.BigEndian.Uint32(b[bthDestQP:]) & QPNMask }

// AckReq returns the "acknowledge request" bit of the BTH.
func (b BTH) AckReq() bool { return b[bthAckReq]&bthAckReqBit != 0 }

// PSN returns the "packet sequence number" field of the BTH.
func (b BTH) PSN() PSN { return PSN(binary.BigEndian.Uint32(b[bthPSN:]) & PSNMask) }

// SetOpcode sets the "OpCode" field of the BTH.
func (b BTH) SetOpcode(op Opcode) { b[bthOpcode] = byte(op) }

// SetSE sets the "solicited event" bit of the BTH.
func (b BTH) SetSE(v bool) { setBit(&b[bthFlags], bthSEBit, v) }

// SetMigReq sets the "MigReq" bit of the BTH.
func (b BTH) SetMigReq(v bool) { setBit(&b[bthFlags], bthMigReqBit, v) }

// SetPadCount sets the "PadCnt" field of the BTH to n (0..3; higher bits
// are dropped).
func (b BTH) SetPadCount(n int) {
	b[bthFlags] = b[bthFlags]&^bthPadMask | byte(n<<bthPadShift)&bthPadMask
}

// SetTVer sets the "transport header version" field of the BTH.
func (b BTH) SetTVer(v uint8) { b[bthFlags] = b[bthFlags]&^bthTVerMask | v&bthTVerMask }

// SetPKey sets the "partition key" field of the BTH.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[bthPKey:], k) }

// SetFECN sets the RoCEv2 FECN bit of the BTH.
func (b BTH) SetFECN(v bool) { setBit(&b[bthResv8a], bthFECNBit, v) }

// SetBECN sets the RoCEv2 BECN bit of the BTH.
func (b BTH) SetBECN(v bool) { setBit(&b[bthResv8a], bthBECNBit, v) }

// SetDestQP sets the "destination QP" field of the BTH to the low 24 bits
// of qpn.
func (b BTH) SetDestQP(qpn uint32) { put24(b[bthDestQP+1:], qpn) }

// SetAckReq sets the "acknowledge request" bit of the BTH.
func (b BTH) SetAckReq(v bool) { setBit(&b[bthAckReq], bthAckReqBit, v) }

// SetPSN sets the "packet sequence number" field of the BTH.
func (b BTH) SetPSN(p PSN) { put24(b[bthPSN+1:], uint32(p)) }

func boolBit(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}

func setBit(p *byte, bit byte, v bool) {
	if v {
		*p |= bit
	} else {
		*p &^= bit
	}
}

// put24 writes the low 24 bits of v big-endian into b[0:3].
func put24(b []byte, v uint32) {
	_ = b[2]
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}
