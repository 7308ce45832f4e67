package wire_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
)

// spec holds every field a frame can carry, for build. Fields of headers
// the opcode does not carry are ignored.
type spec struct {
	route   wire.Route
	bth     wire.BTHFields
	payload []byte

	va           uint64 // RETH or AtomicETH
	rkey         uint32 // RETH or AtomicETH
	dmaLen       uint32
	syndrome     wire.Syndrome
	msn          uint32
	swapAdd, cmp uint64
	orig         uint64
	imm, invRKey uint32
	qkey, srcQP  uint32
	plt, sel     uint8 // FETH
}

// build encodes s into a new frame through the public API only: FrameLen,
// the header views' Encode methods and setters, and Route.Finish.
func build(s *spec) []byte {
	op := s.bth.Opcode
	info := op.Info()
	frame := make([]byte, wire.FrameLen(&s.route, op, len(s.payload)))
	t := frame[s.route.HeaderLen():]
	wire.BTH(t).Encode(&s.bth)
	if off := info.Offset(wire.HdrDETH); off >= 0 {
		wire.DETH(t[off:]).Encode(s.qkey, s.srcQP)
	}
	if off := info.Offset(wire.HdrFETH); off >= 0 {
		wire.FETH(t[off:]).Encode(s.plt, s.sel)
	}
	if off := info.Offset(wire.HdrRETH); off >= 0 {
		wire.RETH(t[off:]).Encode(s.va, s.rkey, s.dmaLen)
	}
	if off := info.Offset(wire.HdrAtomicETH); off >= 0 {
		wire.AtomicETH(t[off:]).Encode(s.va, s.rkey, s.swapAdd, s.cmp)
	}
	if off := info.Offset(wire.HdrAETH); off >= 0 {
		wire.AETH(t[off:]).Encode(s.syndrome, s.msn)
	}
	if off := info.Offset(wire.HdrAtomicAckETH); off >= 0 {
		wire.AtomicAckETH(t[off:]).SetOrigData(s.orig)
	}
	if off := info.Offset(wire.HdrImmDt); off >= 0 {
		wire.ImmDt(t[off:]).SetImm(s.imm)
	}
	if off := info.Offset(wire.HdrIETH); off >= 0 {
		wire.IETH(t[off:]).SetRKey(s.invRKey)
	}
	copy(t[info.HdrLen:], s.payload) // pad and CNP reserved bytes stay zero
	s.route.Finish(frame)
	return frame
}

// specOf collects every field of a parsed packet through the getters.
func specOf(p *wire.Packet) *spec {
	s := &spec{
		route: p.Route(),
		bth: wire.BTHFields{
			Opcode:   p.BTH.Opcode(),
			SE:       p.BTH.SE(),
			MigReq:   p.BTH.MigReq(),
			PadCount: uint8(p.BTH.PadCount()),
			TVer:     p.BTH.TVer(),
			PKey:     p.BTH.PKey(),
			FECN:     p.BTH.FECN(),
			BECN:     p.BTH.BECN(),
			DestQP:   p.BTH.DestQP(),
			AckReq:   p.BTH.AckReq(),
			PSN:      p.BTH.PSN(),
		},
		payload: p.Payload,
	}
	if p.DETH != nil {
		s.qkey, s.srcQP = p.DETH.QKey(), p.DETH.SrcQP()
	}
	if p.FETH != nil {
		s.plt, s.sel = p.FETH.Placement(), p.FETH.Level()
	}
	if p.RETH != nil {
		s.va, s.rkey, s.dmaLen = p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen()
	}
	if p.AtomicETH != nil {
		s.va, s.rkey = p.AtomicETH.VA(), p.AtomicETH.RKey()
		s.swapAdd, s.cmp = p.AtomicETH.SwapAdd(), p.AtomicETH.Compare()
	}
	if p.AETH != nil {
		s.syndrome, s.msn = p.AETH.Syndrome(), p.AETH.MSN()
	}
	if p.AtomicAckETH != nil {
		s.orig = p.AtomicAckETH.OrigData()
	}
	if p.ImmDt != nil {
		s.imm = p.ImmDt.Imm()
	}
	if p.IETH != nil {
		s.invRKey = p.IETH.RKey()
	}
	return s
}

// reencode builds a new frame from the fields of a parsed packet.
func reencode(p *wire.Packet) []byte { return build(specOf(p)) }

// capturedFrame is one IP packet from the test captures.
type capturedFrame struct {
	file  string
	num   int // 1-based record number, as Wireshark counts
	frame []byte
}

// readCaptures returns every IP packet of every pcap in ../testdata/roce.
func readCaptures(tb testing.TB) []capturedFrame {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "roce", "*.pcap"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		tb.Fatal("no captures in ../testdata/roce")
	}
	var out []capturedFrame
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		r, err := pcap.NewReader(f)
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		for num := 1; ; num++ {
			data, _, err := r.Next()
			if err != nil {
				break
			}
			if ip, ok := pcap.IPPacket(r.LinkType(), data); ok {
				out = append(out, capturedFrame{filepath.Base(path), num, append([]byte(nil), ip...)})
			}
		}
		f.Close()
	}
	return out
}

// isRoCE reports whether an IPv4 packet is UDP to port 4791, judged from
// the raw bytes independently of Parse.
func isRoCE(ip []byte) bool {
	if len(ip) < 28 || ip[0]>>4 != 4 || ip[9] != 17 {
		return false
	}
	hl := int(ip[0]&0xF) * 4
	return len(ip) >= hl+4 && int(ip[hl+2])<<8|int(ip[hl+3]) == 4791
}

var (
	gidV4a = wire.GIDFromAddr(netip.MustParseAddr("198.18.0.12"))
	gidV4b = wire.GIDFromAddr(netip.MustParseAddr("198.18.0.11"))
	gidV6a = wire.GIDFromAddr(netip.MustParseAddr("fd00::12"))
	gidV6b = wire.GIDFromAddr(netip.MustParseAddr("fd00::11"))
)

// testRoute returns a route between two test GIDs.
func testRoute(v6 bool) wire.Route {
	if v6 {
		return wire.Route{Src: gidV6a, Dst: gidV6b, SrcPort: 50051, TrafficClass: 0x68, FlowLabel: 0xBEEF1}
	}
	return wire.Route{Src: gidV4a, Dst: gidV4b, SrcPort: 49593, IPID: 0x284F}
}

// payloadOf returns n bytes of a recognisable pattern.
func payloadOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// sendSpec returns an RC SEND ONLY with n bytes of payload.
func sendSpec(v6 bool, n int) *spec {
	return opSpec(v6, wire.OpRCSendOnly, n)
}

// opSpec returns a spec for op with every header field set to a distinct
// value and n bytes of payload (0 if op carries none).
func opSpec(v6 bool, op wire.Opcode, n int) *spec {
	if !op.Info().Flags.Has(wire.FlagPayload) {
		n = 0
	}
	return &spec{
		route: testRoute(v6),
		bth: wire.BTHFields{Opcode: op, SE: true, PadCount: uint8(wire.PadLen(n)), PKey: wire.DefaultPKey,
			DestQP: 0x000011, AckReq: true, PSN: 0xAA6746},
		payload: payloadOf(n),
		va:      0x0000563ADA716000, rkey: 0x2DD, dmaLen: uint32(n),
		syndrome: wire.SyndromeACK(wire.CreditsInvalid), msn: 7,
		swapAdd: 0x0102030405060708, cmp: 0x1112131415161718, orig: 0x2122232425262728,
		imm: 0xCAFEF00D, invRKey: 0x1234, qkey: 0x11111111, srcQP: 0x1D,
		plt: wire.FlushGlobal | wire.FlushPersistent, sel: wire.FlushMR,
	}
}
