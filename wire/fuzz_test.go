package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rnic/rnic/wire"
)

// FuzzParse feeds arbitrary frames to Parse, CheckICRC and CheckUDPChecksum.
// None may panic. When Parse accepts a frame, re-encoding its parsed fields
// through the public encoding API must give back the frame exactly, except
// for what Parse normalizes (see canonical), and the result must parse to
// the same fields with a valid ICRC.
// fuzzICRCCache keeps its entries across the fuzzer's inputs: frames
// that hit an entry another input filled.
var fuzzICRCCache wire.ICRCCache

func FuzzParse(f *testing.F) {
	for _, c := range readCaptures(f) {
		f.Add(c.frame)
	}
	for i := range 256 {
		op := wire.Opcode(i)
		if op.Valid() {
			f.Add(build(opSpec(false, op, 5)))
			f.Add(build(opSpec(true, op, 64)))
		}
	}
	for _, frame := range icrcFrames(f) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		copied := bytes.Clone(data)
		err := wire.CheckICRC(data)
		if owned := wire.CheckICRCOwned(data); !errors.Is(owned, err) && owned != err {
			t.Fatalf("CheckICRCOwned = %v, CheckICRC = %v", owned, err)
		}
		if !bytes.Equal(data, copied) {
			t.Fatalf("CheckICRCOwned changed the frame\n got %x\nwant %x", data, copied)
		}
		if cached := fuzzICRCCache.Check(data); !errors.Is(cached, err) && cached != err {
			t.Fatalf("ICRCCache.Check = %v, CheckICRC = %v", cached, err)
		}
		_ = wire.CheckUDPChecksum(data)
		var p wire.Packet
		if err := p.Parse(data); err != nil {
			return
		}
		want := canonical(data, &p)
		got := reencode(&p)
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encoding differs from the canonical frame\n got %x\nwant %x\n  in %x", got, want, data)
		}
		r := p.Route()
		if len(want) != wire.FrameLen(&r, p.Op, len(p.Payload)) {
			t.Fatalf("frame length %d, FrameLen %d", len(want), wire.FrameLen(&r, p.Op, len(p.Payload)))
		}
		var q wire.Packet
		if err := q.Parse(got); err != nil {
			t.Fatalf("re-encoded frame does not parse: %v", err)
		}
		if err := wire.CheckICRC(got); err != nil {
			t.Fatalf("re-encoded frame: %v", err)
		}
		if !bytes.Equal(reencode(&q), got) {
			t.Fatal("second re-encoding differs")
		}
	})
}

// canonical returns the frame that re-encoding a parsed frame produces: the
// same bytes, but with what Parse does not keep rewritten as an encoder
// writes it:
//   - IPv4 options are dropped (Route writes 20-byte headers);
//   - a TTL or hop limit of 0 becomes 64, and a UDP source port of 0
//     becomes 4791 (Route's zero values mean "default");
//   - reserved bits are zero: BTH resv6 (byte 4, below FECN/BECN), BTH
//     resv7 (byte 8, below AckReq), the DETH's reserved byte, and a CNP's
//     16 reserved bytes;
//   - pad bytes are zero;
//   - the IPv4 header checksum, the ICRC and a non-zero UDP checksum are
//     recomputed (Parse verified the IPv4 checksum but not the others; a
//     valid IPv4 checksum may also be written 0xFFFF or 0x0000).
func canonical(frame []byte, p *wire.Packet) []byte {
	var out []byte
	hl := wire.IPv6HeaderSize
	if p.IPv6 {
		out = append(out, frame...)
		if ip := wire.IPv6(out); ip.HopLimit() == 0 {
			ip.SetHopLimit(wire.DefaultHopLimit)
		}
	} else {
		hl = wire.IPv4HeaderSize
		out = append(append(out, frame[:hl]...), frame[wire.IPv4(frame).HeaderLen():]...)
		ip := wire.IPv4(out)
		ip.SetIHL(5)
		ip.SetTotalLength(uint16(len(out)))
		if ip.TTL() == 0 {
			ip.SetTTL(wire.DefaultHopLimit)
		}
		ip.SetChecksum(ip.ComputeChecksum())
	}
	if udp := wire.UDP(out[hl:]); udp.SrcPort() == 0 {
		udp.SetSrcPort(wire.UDPPort)
	}
	t := out[hl+wire.UDPHeaderSize:]
	t[4] &= 0xC0 // FECN, BECN
	t[8] &= 0x80 // AckReq
	if off := p.Info.Offset(wire.HdrDETH); off >= 0 {
		t[off+4] = 0
	}
	if p.Op == wire.OpCNP {
		clear(t[wire.BTHSize:p.Info.HdrLen])
	}
	clear(t[p.Info.HdrLen+len(p.Payload) : len(t)-wire.ICRCSize])
	wire.SetICRC(out)
	if p.UDPChecksum != 0 {
		wire.SetUDPChecksum(out)
	}
	return out
}
