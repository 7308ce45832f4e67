package sniff

import (
	"net/netip"
	"strconv"

	"github.com/rnic/rnic/wire"
)

// Summary describes a frame (IP header through ICRC) in one line, in the
// spirit of tshark's packet list: addresses, opcode, the BTH fields, the
// payload length and each extension header's fields, e.g.
//
//	10.0.0.1 → 10.0.0.2 RC_RDMA_WRITE_FIRST qp=0x000012 psn=1193046 ack=0 len=4096 RETH va=0x7f3a00000000 rkey=0x101 dlen=1048576
//	10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=1193301 ack=0 len=0 AETH ACK msn=3
//	10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=1193050 ack=0 len=0 AETH NAK PSN_SEQ_ERR msn=0
//
// qp is the destination QP, ack the BTH AckReq bit and len the payload
// length without pad. Flags that are set are appended (se for solicited
// event, fecn, becn, and ce for an IP ECN Congestion Experienced mark).
// A frame that is not a valid RoCEv2 packet is described by what was
// wrong with it (see wire.Packet.Parse). Summary does not check the ICRC.
func Summary(frame []byte) string {
	var p wire.Packet
	var buf [256]byte
	b := buf[:0]
	if err := p.Parse(frame); err != nil {
		if src, dst, ok := addrs(frame); ok {
			b = appendAddrs(b, src, dst)
			b = append(b, ' ')
		}
		b = append(b, "malformed ("...)
		b = append(b, err.Error()...)
		b = append(b, "), "...)
		b = strconv.AppendInt(b, int64(len(frame)), 10)
		b = append(b, " bytes"...)
		return string(b)
	}
	b = appendAddrs(b, p.Src.Addr(), p.Dst.Addr())
	b = append(b, ' ')
	b = appendPacket(b, &p)
	return string(b)
}

// appendPacket appends the transport part of the summary of a parsed
// packet: opcode, BTH fields, extension headers in wire order, flags.
func appendPacket(b []byte, p *wire.Packet) []byte {
	b = append(b, p.Op.String()...)
	b = append(b, " qp=0x"...)
	b = appendHex(b, uint64(p.BTH.DestQP()), 6)
	b = append(b, " psn="...)
	b = strconv.AppendUint(b, uint64(p.BTH.PSN()), 10)
	b = append(b, " ack="...)
	b = appendBool(b, p.BTH.AckReq())
	b = append(b, " len="...)
	b = strconv.AppendInt(b, int64(len(p.Payload)), 10)
	if p.DETH != nil {
		b = append(b, " DETH qkey=0x"...)
		b = appendHex(b, uint64(p.DETH.QKey()), 0)
		b = append(b, " srcqp=0x"...)
		b = appendHex(b, uint64(p.DETH.SrcQP()), 6)
	}
	if p.RETH != nil {
		b = append(b, " RETH"...)
		b = appendVAKey(b, p.RETH.VA(), p.RETH.RKey())
		b = append(b, " dlen="...)
		b = strconv.AppendUint(b, uint64(p.RETH.DMALen()), 10)
	}
	if a := p.AtomicETH; a != nil {
		b = append(b, " AtomicETH"...)
		b = appendVAKey(b, a.VA(), a.RKey())
		if p.Op == wire.OpRCFetchAdd {
			b = append(b, " add="...)
			b = strconv.AppendUint(b, a.SwapAdd(), 10)
		} else {
			b = append(b, " cmp="...)
			b = strconv.AppendUint(b, a.Compare(), 10)
			b = append(b, " swap="...)
			b = strconv.AppendUint(b, a.SwapAdd(), 10)
		}
	}
	if p.AETH != nil {
		b = append(b, " AETH "...)
		b = appendSyndrome(b, p.AETH.Syndrome())
		b = append(b, " msn="...)
		b = strconv.AppendUint(b, uint64(p.AETH.MSN()), 10)
	}
	if p.AtomicAckETH != nil {
		b = append(b, " AtomicAckETH orig="...)
		b = strconv.AppendUint(b, p.AtomicAckETH.OrigData(), 10)
	}
	if p.ImmDt != nil {
		b = append(b, " imm=0x"...)
		b = appendHex(b, uint64(p.ImmDt.Imm()), 8)
	}
	if p.IETH != nil {
		b = append(b, " IETH rkey=0x"...)
		b = appendHex(b, uint64(p.IETH.RKey()), 0)
	}
	if p.BTH.SE() {
		b = append(b, " se"...)
	}
	if p.BTH.FECN() {
		b = append(b, " fecn"...)
	}
	if p.BTH.BECN() {
		b = append(b, " becn"...)
	}
	if p.TrafficClass&3 == 3 {
		b = append(b, " ce"...)
	}
	return b
}

// appendSyndrome appends an AETH syndrome: "ACK" (with the credit count
// unless it is the "no credits" value every RNIC sends), "NAK <code>" or
// "RNR_NAK timer=<n>".
func appendSyndrome(b []byte, s wire.Syndrome) []byte {
	if s.Kind() == wire.AckKindACK && s.Credits() == wire.CreditsInvalid {
		return append(b, "ACK"...)
	}
	return append(b, s.String()...)
}

func appendVAKey(b []byte, va uint64, rkey uint32) []byte {
	b = append(b, " va=0x"...)
	b = appendHex(b, va, 0)
	b = append(b, " rkey=0x"...)
	return appendHex(b, uint64(rkey), 0)
}

// appendHex appends v in lower-case hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	var d [16]byte
	h := strconv.AppendUint(d[:0], v, 16)
	for i := len(h); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, h...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

func appendAddrs(b []byte, src, dst netip.Addr) []byte {
	b = src.AppendTo(b)
	b = append(b, " → "...)
	return dst.AppendTo(b)
}

// addrs returns the IP addresses of a frame Parse rejected, if its IP
// header is long enough to hold them.
func addrs(frame []byte) (src, dst netip.Addr, ok bool) {
	switch {
	case len(frame) >= wire.IPv4HeaderSize && frame[0]>>4 == 4:
		ip := wire.IPv4(frame)
		return netip.AddrFrom4(ip.Src()), netip.AddrFrom4(ip.Dst()), true
	case len(frame) >= wire.IPv6HeaderSize && frame[0]>>4 == 6:
		ip := wire.IPv6(frame)
		return netip.AddrFrom16(ip.Src()), netip.AddrFrom16(ip.Dst()), true
	}
	return netip.Addr{}, netip.Addr{}, false
}
