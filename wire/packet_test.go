package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/rnic/rnic/wire"
)

var payloadSizes = []int{0, 1, 2, 3, 4, 5, 255, 256, 1024, 4093, 4096}

// TestRoundTrip builds every valid opcode over IPv4 and IPv6 with several
// payload sizes, parses it, checks each field against what was encoded,
// and re-encodes it from the parsed fields.
func TestRoundTrip(t *testing.T) {
	var p wire.Packet
	for i := range 256 {
		op := wire.Opcode(i)
		if !op.Valid() {
			continue
		}
		for _, v6 := range []bool{false, true} {
			for _, n := range payloadSizes {
				s := opSpec(v6, op, n)
				if n > 0 && len(s.payload) == 0 {
					continue // op carries no payload; n=0 covers it
				}
				frame := build(s)
				if err := p.Parse(frame); err != nil {
					t.Errorf("%v v6=%v n=%d: Parse: %v", op, v6, n, err)
					continue
				}
				if err := wire.CheckICRC(p.Frame); err != nil {
					t.Errorf("%v v6=%v n=%d: CheckICRC: %v", op, v6, n, err)
				}
				if len(frame) != wire.FrameLen(&s.route, op, len(s.payload)) {
					t.Errorf("%v: frame length %d != FrameLen", op, len(frame))
				}
				got := specOf(&p)
				if p.Op != op || p.Info != op.Info() || p.IPv6 != v6 || p.Pad != wire.PadLen(len(s.payload)) {
					t.Errorf("%v v6=%v n=%d: Op %v Info ok %v IPv6 %v Pad %d", op, v6, n, p.Op, p.Info == op.Info(), p.IPv6, p.Pad)
				}
				if want := expectedSpec(s); !reflect.DeepEqual(got, want) {
					t.Errorf("%v v6=%v n=%d: parsed fields\n got %+v\nwant %+v", op, v6, n, got, want)
				}
				if re := reencode(&p); !bytes.Equal(re, frame) {
					t.Errorf("%v v6=%v n=%d: re-encoding differs", op, v6, n)
				}
				checkViews(t, &p)
			}
		}
	}
}

// expectedSpec is what parsing build(s) must give back: the route with its
// defaults filled in, and only the fields of headers the opcode carries.
func expectedSpec(s *spec) *spec {
	fl := s.bth.Opcode.Info().Flags
	w := &spec{route: s.route, bth: s.bth, payload: s.payload}
	if w.route.HopLimit == 0 {
		w.route.HopLimit = wire.DefaultHopLimit
	}
	if w.route.SrcPort == 0 {
		w.route.SrcPort = wire.UDPPort
	}
	if fl.Has(wire.FlagDETH) {
		w.qkey, w.srcQP = s.qkey, s.srcQP
	}
	if fl.Has(wire.FlagRETH) {
		w.va, w.rkey, w.dmaLen = s.va, s.rkey, s.dmaLen
	}
	if fl.Has(wire.FlagAtomicETH) {
		w.va, w.rkey, w.swapAdd, w.cmp = s.va, s.rkey, s.swapAdd, s.cmp
	}
	if fl.Has(wire.FlagAETH) {
		w.syndrome, w.msn = s.syndrome, s.msn
	}
	if fl.Has(wire.FlagAtomicAckETH) {
		w.orig = s.orig
	}
	if fl.Has(wire.FlagImmDt) {
		w.imm = s.imm
	}
	if fl.Has(wire.FlagIETH) {
		w.invRKey = s.invRKey
	}
	if fl.Has(wire.FlagFETH) {
		w.plt, w.sel = s.plt, s.sel
	}
	return w
}

// checkViews checks that each view has exactly its header's length and
// capacity (so appending cannot reach into the payload), is present exactly
// when the opcode carries it, and sits at the table's offset.
func checkViews(t *testing.T, p *wire.Packet) {
	t.Helper()
	views := map[wire.Header][]byte{
		wire.HdrDETH: p.DETH, wire.HdrRETH: p.RETH, wire.HdrAtomicETH: p.AtomicETH, wire.HdrAETH: p.AETH,
		wire.HdrAtomicAckETH: p.AtomicAckETH, wire.HdrImmDt: p.ImmDt, wire.HdrIETH: p.IETH, wire.HdrFETH: p.FETH,
	}
	r := p.Route()
	bth := p.Frame[r.HeaderLen():]
	if &bth[0] != &p.BTH[0] {
		t.Errorf("%v: BTH view not at the end of the outer headers", p.Op)
	}
	for h, v := range views {
		off := p.Info.Offset(h)
		if (v != nil) != (off >= 0) {
			t.Errorf("%v: view %v present=%v, Offset %d", p.Op, h, v != nil, off)
			continue
		}
		if v == nil {
			continue
		}
		if len(v) != h.Size() || cap(v) != h.Size() || &v[0] != &bth[off] {
			t.Errorf("%v: view %v len %d cap %d, or not at offset %d", p.Op, h, len(v), cap(v), off)
		}
	}
	if len(p.BTH) != wire.BTHSize || cap(p.BTH) != wire.BTHSize || cap(p.Payload) != len(p.Payload) {
		t.Errorf("%v: BTH len %d cap %d, payload cap %d", p.Op, len(p.BTH), cap(p.BTH), cap(p.Payload))
	}
}

// TestParseErrors damages valid frames in one way each and checks the
// error Parse reports. Damage that would trip an earlier check is repaired
// (lengths rewritten by WriteHeaders, IPv4 checksum recomputed), so each
// case reaches the check it targets.
func TestParseErrors(t *testing.T) {
	v4 := func(op wire.Opcode, n int) []byte { return build(opSpec(false, op, n)) }
	v6 := func(op wire.Opcode, n int) []byte { return build(opSpec(true, op, n)) }
	route4, route6 := testRoute(false), testRoute(true)
	fixIPv4 := func(f []byte) []byte {
		ip := wire.IPv4(f)
		ip.SetChecksum(ip.ComputeChecksum())
		return f
	}
	// resize gives the frame n bytes of transport (BTH through ICRC) and
	// rewrites the IP and UDP headers to match.
	resize := func(f []byte, r wire.Route, n int) []byte {
		hl := r.HeaderLen()
		out := make([]byte, hl+n)
		copy(out, f[:min(len(f), hl+n)])
		r.WriteHeaders(out)
		return out
	}
	tests := []struct {
		name  string
		frame []byte
		err   error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"version 5", func() []byte { f := v4(wire.OpRCAck, 0); f[0] = 0x55; return f }(), wire.ErrIPVersion},
		{"version 0", make([]byte, 64), wire.ErrIPVersion},
		{"IPv4 19 bytes", v4(wire.OpRCAck, 0)[:19], wire.ErrTruncated},
		{"IHL 4", func() []byte { f := v4(wire.OpRCAck, 0); f[0] = 0x44; return fixIPv4(f) }(), wire.ErrIPHeader},
		{"IHL beyond frame", func() []byte { f := v4(wire.OpRCAck, 0)[:24]; f[0] = 0x4F; return f }(), wire.ErrTruncated},
		{"total length too long", func() []byte {
			f := v4(wire.OpRCAck, 0)
			wire.IPv4(f).SetTotalLength(uint16(len(f) + 1))
			return fixIPv4(f)
		}(), wire.ErrIPLength},
		{"trailing byte", append(v4(wire.OpRCAck, 0), 0), wire.ErrIPLength},
		{"truncated frame", v4(wire.OpRCSendOnly, 64)[:70], wire.ErrIPLength},
		{"IPv4 checksum", func() []byte { f := v4(wire.OpRCAck, 0); f[10] ^= 1; return f }(), wire.ErrIPChecksum},
		{"IPv4 reserved flag", func() []byte {
			f := v4(wire.OpRCAck, 0)
			wire.IPv4(f).SetFlagsFragmentOffset(wire.IPv4FlagReserved|wire.IPv4FlagDF, 0)
			return fixIPv4(f)
		}(), wire.ErrIPHeader},
		{"IPv4 MF", func() []byte {
			f := v4(wire.OpRCAck, 0)
			wire.IPv4(f).SetFlagsFragmentOffset(wire.IPv4FlagMF, 0)
			return fixIPv4(f)
		}(), wire.ErrFragment},
		{"IPv4 fragment offset", func() []byte {
			f := v4(wire.OpRCAck, 0)
			wire.IPv4(f).SetFlagsFragmentOffset(0, 185)
			return fixIPv4(f)
		}(), wire.ErrFragment},
		{"IPv4 TCP", func() []byte { f := v4(wire.OpRCAck, 0); wire.IPv4(f).SetProtocol(6); return fixIPv4(f) }(), wire.ErrNotUDP},
		{"IPv6 39 bytes", v6(wire.OpRCAck, 0)[:39], wire.ErrTruncated},
		{"IPv6 payload length", func() []byte { f := v6(wire.OpRCAck, 0); wire.IPv6(f).SetPayloadLength(1); return f }(), wire.ErrIPLength},
		{"IPv6 trailing byte", append(v6(wire.OpRCAck, 0), 0), wire.ErrIPLength},
		{"IPv6 hop-by-hop header", func() []byte { f := v6(wire.OpRCAck, 0); wire.IPv6(f).SetNextHeader(0); return f }(), wire.ErrNotUDP},
		{"IPv6 mapped source", func() []byte { f := v6(wire.OpRCAck, 0); wire.IPv6(f).SetSrc(gidV4a); return f }(), wire.ErrIPHeader},
		{"IPv6 mapped destination", func() []byte { f := v6(wire.OpRCAck, 0); wire.IPv6(f).SetDst(gidV4a); return f }(), wire.ErrIPHeader},
		{"UDP truncated", func() []byte {
			f := make([]byte, 24)
			wire.IPv4(f).Encode(&wire.IPv4Fields{TotalLength: 24, TTL: 64, Protocol: wire.IPProtocolUDP})
			return fixIPv4(f)
		}(), wire.ErrTruncated},
		{"UDP port 4790", func() []byte { f := v4(wire.OpRCAck, 0); wire.UDP(f[20:]).SetDstPort(4790); return f }(), wire.ErrNotRoCEPort},
		{"UDP length short", func() []byte { f := v4(wire.OpRCAck, 0); wire.UDP(f[20:]).SetLength(8); return f }(), wire.ErrUDPLength},
		{"UDP length long", func() []byte { f := v6(wire.OpRCAck, 0); wire.UDP(f[40:]).SetLength(uint16(len(f))); return f }(), wire.ErrUDPLength},
		{"BTH truncated", resize(v4(wire.OpRCAck, 0), route4, wire.BTHSize-1), wire.ErrTruncated},
		{"opcode 0x15", func() []byte { f := v4(wire.OpRCAck, 0); f[28] = 0x15; return f }(), wire.ErrOpcode},
		{"opcode 0xff", func() []byte { f := v6(wire.OpRCAck, 0); f[48] = 0xFF; return f }(), wire.ErrOpcode},
		{"TVer 1", func() []byte { f := v4(wire.OpRCAck, 0); wire.BTH(f[28:]).SetTVer(1); return f }(), wire.ErrTVer},
		{"no room for ICRC", resize(v4(wire.OpRCSendOnly, 0), route4, wire.BTHSize), wire.ErrTruncated},
		{"no room for RETH", resize(v4(wire.OpRCWriteFirst, 0), route4, wire.BTHSize+wire.RETHSize), wire.ErrTruncated},
		{"no room for AtomicAckETH", resize(v6(wire.OpRCAtomicAck, 0), route6, 24), wire.ErrTruncated},
		{"ACK with payload", resize(v4(wire.OpRCAck, 0), route4, 16+4+4), wire.ErrLength},
		{"READ request with payload", resize(v4(wire.OpRCReadRequest, 0), route4, 28+4+4), wire.ErrLength},
		{"atomic with payload", resize(v4(wire.OpRCFetchAdd, 0), route4, 40+8+4), wire.ErrLength},
		{"CNP 20 reserved bytes", resize(v4(wire.OpCNP, 0), route4, 12+20+4), wire.ErrLength},
		{"CNP 12 reserved bytes", resize(v4(wire.OpCNP, 0), route4, 12+12+4), wire.ErrTruncated},
		{"pad beyond payload", func() []byte { f := v4(wire.OpRCSendOnly, 0); wire.BTH(f[28:]).SetPadCount(1); return f }(), wire.ErrPad},
		{"payload not aligned", resize(v4(wire.OpRCSendOnly, 0), route4, 12+5+4), wire.ErrPad},
		{"payload+pad not aligned", func() []byte {
			f := v4(wire.OpRCSendOnly, 8)
			wire.BTH(f[28:]).SetPadCount(0)
			return resize(f, route4, 12+7+4)
		}(), wire.ErrPad},
	}
	var p wire.Packet
	for _, tt := range tests {
		if err := p.Parse(tt.frame); err != tt.err {
			t.Errorf("%s: Parse = %v, want %v", tt.name, err, tt.err)
		}
	}
	// Every sentinel is distinct, so each drop reason can be counted.
	errs := []error{wire.ErrTruncated, wire.ErrIPVersion, wire.ErrIPHeader, wire.ErrIPChecksum, wire.ErrIPLength,
		wire.ErrFragment, wire.ErrNotUDP, wire.ErrNotRoCEPort, wire.ErrUDPLength, wire.ErrUDPChecksum, wire.ErrOpcode,
		wire.ErrTVer, wire.ErrPad, wire.ErrLength, wire.ErrICRC, wire.ErrGIDSyntax}
	for i, a := range errs {
		for _, b := range errs[i+1:] {
			if errors.Is(a, b) || a.Error() == b.Error() {
				t.Errorf("%v and %v are not distinct", a, b)
			}
		}
	}
}

// TestParsePad checks the pad counts Parse accepts: any pad that fits,
// as long as payload plus pad is a multiple of 4.
func TestParsePad(t *testing.T) {
	var p wire.Packet
	for room := 4; room <= 8; room += 4 {
		for pad := range 4 {
			s := sendSpec(false, room)
			s.bth.PadCount = uint8(pad)
			frame := build(s)
			if err := p.Parse(frame); err != nil {
				t.Errorf("room %d pad %d: %v", room, pad, err)
				continue
			}
			if len(p.Payload) != room-pad || p.Pad != pad || p.BTH.PadCount() != pad {
				t.Errorf("room %d pad %d: payload %d Pad %d", room, pad, len(p.Payload), p.Pad)
			}
		}
	}
}

func TestParseTransport(t *testing.T) {
	s := opSpec(true, wire.OpUDSendOnlyImm, 100)
	frame := build(s)
	var p wire.Packet
	if err := p.ParseTransport(frame[s.route.HeaderLen():]); err != nil {
		t.Fatal(err)
	}
	if p.Frame != nil || p.IPv6 || !p.Src.IsZero() || !p.Dst.IsZero() || p.SrcPort != 0 || p.TTL != 0 || p.FlowLabel != 0 {
		t.Errorf("outer fields not zero: %+v", p)
	}
	if p.Op != wire.OpUDSendOnlyImm || p.DETH.QKey() != s.qkey || p.ImmDt.Imm() != s.imm || !bytes.Equal(p.Payload, s.payload) {
		t.Errorf("transport fields: %+v", p)
	}
	if err := p.ParseTransport(frame[s.route.HeaderLen() : len(frame)-1]); err != wire.ErrPad {
		t.Errorf("short datagram: %v, want ErrPad", err)
	}
	// A failed Parse leaves no stale views behind for the next one.
	if err := p.Parse(build(opSpec(false, wire.OpRCAck, 0))); err != nil || p.DETH != nil || p.ImmDt != nil || len(p.Payload) != 0 {
		t.Errorf("reuse: %v %+v", err, p)
	}
}

// TestPacketRoute checks that Route returns the outer headers, defaults
// and all, so that an answer or a re-encoding goes out the same way.
func TestPacketRoute(t *testing.T) {
	tests := []wire.Route{
		{Src: gidV4a, Dst: gidV4b},
		{Src: gidV4a, Dst: gidV4b, SrcPort: 1, TrafficClass: 0xFF, HopLimit: 1, IPID: 0xFFFF, NoDF: true, UDPChecksum: true},
		{Src: gidV6a, Dst: gidV6b},
		{Src: gidV6a, Dst: gidV6b, SrcPort: 65535, TrafficClass: 0x03, HopLimit: 255, FlowLabel: 0xFFFFF, UDPChecksum: true},
	}
	var p wire.Packet
	for _, r := range tests {
		s := sendSpec(r.IPv6(), 9)
		s.route = r
		if err := p.Parse(build(s)); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		want := r
		if want.SrcPort == 0 {
			want.SrcPort = wire.UDPPort
		}
		if want.HopLimit == 0 {
			want.HopLimit = wire.DefaultHopLimit
		}
		if got := p.Route(); got != want {
			t.Errorf("Route() = %+v, want %+v", got, want)
		}
		if p.DF == r.NoDF && !r.IPv6() {
			t.Errorf("%+v: DF = %v", r, p.DF)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	frames := [][]byte{
		build(opSpec(false, wire.OpRCWriteFirst, 4096)),
		build(opSpec(true, wire.OpRCAtomicAck, 0)),
		build(opSpec(false, wire.OpUDSendOnlyImm, 100)),
	}
	var p wire.Packet
	for _, f := range frames {
		if n := testing.AllocsPerRun(100, func() {
			if err := p.Parse(f); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: %v allocations per Parse", p.Op, n)
		}
	}
}
