// Package wire is the RoCEv2 wire format: header views over []byte, the
// opcode table, the Invariant CRC, and the IPv4/IPv6 + UDP encapsulation.
// It imports only the standard library; the NIC's protocol engine builds
// and parses every packet with it.
//
// # Frames
//
// A frame is one RoCEv2 packet from its IP header to its ICRC; a link adds
// whatever layer 2 framing it needs.
//
//	+----------------+-------+------+-------------+---------+-----+------+
//	| IPv4 (20)      | UDP   | BTH  | extension   | payload | pad | ICRC |
//	|  or IPv6 (40)  | (8)   | (12) | headers     |         | 0-3 | (4)  |
//	+----------------+-------+------+-------------+---------+-----+------+
//	                  dst port       DETH RETH AtomicETH AETH
//	                  4791           AtomicAckETH ImmDt IETH,
//	                                 in that order, as the opcode says
//	                         |<-- HdrLen -------->|
//	                 |<------------------ UDP length ------------------->|
//	|<-------------------------- IP total length ----------------------->|
//	|<----------- covered by the ICRC, some fields masked ------->|
//
// The payload of a packet is at most one path MTU (type MTU); pad rounds it
// up to a multiple of 4 bytes. The ICRC is CRC-32 over the whole packet with
// the fields routers may change masked to ones (see ComputeICRC).
//
// # Headers
//
// Each header is a named []byte (BTH, RETH, AETH, AtomicETH, AtomicAckETH,
// ImmDt, IETH, DETH, IPv4, IPv6, UDP) with getters and setters for its
// fields, as gVisor's netstack writes headers. Accessors do not check
// lengths; Packet.Parse is the single gate that validates a frame before its
// views are used.
//
// # Opcodes
//
// What an opcode means is data, not code (rxe's rxe_opcode table):
// Opcode.Info returns a row with the headers it carries, where each one
// starts, and flags such as FlagRequest, FlagFirst, FlagLast or
// FlagConsumesRecvWQE, so engines test flags instead of switching on
// opcodes.
//
// # Building a frame
//
//	r := wire.Route{Src: src, Dst: dst}
//	frame := buf[:wire.FrameLen(&r, op, len(payload))]
//	t := frame[r.HeaderLen():]                 // BTH onward
//	wire.BTH(t).Encode(&wire.BTHFields{...})
//	wire.RETH(t[op.Info().Offset(wire.HdrRETH):]).Encode(va, rkey, n)
//	copy(t[op.Info().HdrLen:], payload)        // then zero the pad bytes
//	r.Finish(frame)                            // IP/UDP headers, ICRC, UDP checksum
//
// # Receiving a frame
//
//	var p wire.Packet
//	if err := p.Parse(frame); err != nil { /* count err, drop */ }
//	if err := wire.CheckICRC(p.Frame); err != nil { /* count, drop */ }
//	if p.Info.Flags.Has(wire.FlagRequest) { /* responder */ } else { /* completer */ }
//
// No function on these paths allocates.
package wire
