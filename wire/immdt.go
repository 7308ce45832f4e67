package wire

import "encoding/binary"

// ImmDt is a view of an Immediate Data header (IBTA §9.3.5): 4 bytes the
// requester hands to the responder's completion. Accessors do not check
// the length: check len(i) >= ImmDtSize first (Packet.Parse does).
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Immediate Data                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type ImmDt []byte

const immDtData = 0

// Imm returns the immediate data as a big-endian number. The verbs API
// passes it through unchanged in network order (ibv_wc.imm_data is __be32),
// so converting back with binary.BigEndian yields the sender's bytes.
func (i ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(i[immDtData:]) }

// SetImm sets the immediate data from a big-endian number.
func (i ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(i[immDtData:], v) }
