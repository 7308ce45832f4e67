package wire_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/rnic/rnic/wire"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// filled returns n bytes of v, so that tests see which bytes a write leaves
// alone.
func filled(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

func TestBTHEncode(t *testing.T) {
	tests := []struct {
		name string
		f    wire.BTHFields
		want string // the 12 bytes
		back wire.BTHFields
	}{
		{
			// rc_read request from host_read.pcap #20.
			name: "captured READ request",
			f:    wire.BTHFields{Opcode: wire.OpRCReadRequest, PKey: 0xFFFF, DestQP: 0x1E, AckReq: true, PSN: 9119258},
			want: "0c00ffff0000001e808b261a",
		},
		{
			name: "every bit set",
			f: wire.BTHFields{Opcode: wire.OpCNP, SE: true, MigReq: true, PadCount: 3, TVer: 0xF, PKey: 0x1234,
				FECN: true, BECN: true, DestQP: 0xABCDEF, AckReq: true, PSN: 0xFEDCBA},
			want: "81ff1234c0abcdef80fedcba",
		},
		{
			name: "out-of-range values are masked",
			f:    wire.BTHFields{Opcode: wire.OpRCSendOnly, PadCount: 7, TVer: 0x1F, DestQP: 0xFF123456, PSN: 0x1000001},
			want: "043f00000012345600000001",
			back: wire.BTHFields{Opcode: wire.OpRCSendOnly, PadCount: 3, TVer: 0xF, DestQP: 0x123456, PSN: 1},
		},
		{
			name: "BECN alone",
			f:    wire.BTHFields{Opcode: wire.OpRCAck, BECN: true},
			want: "110000004000000000000000",
		},
	}
	for _, tt := range tests {
		b := wire.BTH(filled(wire.BTHSize, 0x5A)) // reserved bits must come out zero
		b.Encode(&tt.f)
		if got := hex.EncodeToString(b); got != tt.want {
			t.Errorf("%s: Encode = %s, want %s", tt.name, got, tt.want)
		}
		back := tt.back
		if back == (wire.BTHFields{}) {
			back = tt.f
		}
		got := wire.BTHFields{
			Opcode: b.Opcode(), SE: b.SE(), MigReq: b.MigReq(), PadCount: uint8(b.PadCount()), TVer: b.TVer(),
			PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(), DestQP: b.DestQP(), AckReq: b.AckReq(), PSN: b.PSN(),
		}
		if got != back {
			t.Errorf("%s: getters = %+v, want %+v", tt.name, got, back)
		}
	}
}

// TestBTHSetters checks that each setter writes its own bits and no
// others, from all-zero and all-one headers.
func TestBTHSetters(t *testing.T) {
	tests := []struct {
		name     string
		set      func(wire.BTH, bool) // true: set the field to ones, false: to zero
		fromZero string               // header after set(ones) on zeros
	}{
		{"Opcode", func(b wire.BTH, on bool) { b.SetOpcode(wire.Opcode(ones8(on))) }, "ff0000000000000000000000"},
		{"SE", func(b wire.BTH, on bool) { b.SetSE(on) }, "008000000000000000000000"},
		{"MigReq", func(b wire.BTH, on bool) { b.SetMigReq(on) }, "004000000000000000000000"},
		{"PadCount", func(b wire.BTH, on bool) { b.SetPadCount(int(ones8(on))) }, "003000000000000000000000"},
		{"TVer", func(b wire.BTH, on bool) { b.SetTVer(ones8(on)) }, "000f00000000000000000000"},
		{"PKey", func(b wire.BTH, on bool) { b.SetPKey(uint16(ones32(on))) }, "0000ffff0000000000000000"},
		{"FECN", func(b wire.BTH, on bool) { b.SetFECN(on) }, "000000008000000000000000"},
		{"BECN", func(b wire.BTH, on bool) { b.SetBECN(on) }, "000000004000000000000000"},
		{"DestQP", func(b wire.BTH, on bool) { b.SetDestQP(ones32(on)) }, "0000000000ffffff00000000"},
		{"AckReq", func(b wire.BTH, on bool) { b.SetAckReq(on) }, "000000000000000080000000"},
		{"PSN", func(b wire.BTH, on bool) { b.SetPSN(wire.PSN(ones32(on))) }, "000000000000000000ffffff"},
	}
	for _, tt := range tests {
		b := wire.BTH(make([]byte, wire.BTHSize))
		tt.set(b, true)
		if got := hex.EncodeToString(b); got != tt.fromZero {
			t.Errorf("Set%s on zeros = %s, want %s", tt.name, got, tt.fromZero)
		}
		b = wire.BTH(filled(wire.BTHSize, 0xFF))
		tt.set(b, false)
		want := unhex(t, tt.fromZero)
		for i := range want {
			want[i] = ^want[i]
		}
		if !bytes.Equal(b, want) {
			t.Errorf("Set%s(0) on ones = %x, want %x", tt.name, []byte(b), want)
		}
	}
}

func ones8(on bool) uint8 {
	if on {
		return 0xFF
	}
	return 0
}

func ones32(on bool) uint32 {
	if on {
		return 0xFFFFFFFF
	}
	return 0
}

// TestExtensionHeaders encodes each extension header, reads it back, and
// checks its bytes against the layout of IBTA §9.3.
func TestExtensionHeaders(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		encode func([]byte)
		want   string
		check  func([]byte) bool
	}{
		{
			name:   "RETH",
			size:   wire.RETHSize,
			encode: func(b []byte) { wire.RETH(b).Encode(0x0102030405060708, 0x0A0B0C0D, 0x11121314) },
			want:   "0102030405060708" + "0a0b0c0d" + "11121314",
			check: func(b []byte) bool {
				r := wire.RETH(b)
				return r.VA() == 0x0102030405060708 && r.RKey() == 0x0A0B0C0D && r.DMALen() == 0x11121314
			},
		},
		{
			name: "RETH setters",
			size: wire.RETHSize,
			encode: func(b []byte) {
				r := wire.RETH(b)
				r.SetVA(0x55DEECCDF000)
				r.SetRKey(0x112F)
				r.SetDMALen(64)
			},
			want: "000055deeccdf000" + "0000112f" + "00000040",
		},
		{
			name:   "AETH",
			size:   wire.AETHSize,
			encode: func(b []byte) { wire.AETH(b).Encode(wire.SyndromeACK(wire.CreditsInvalid), 0x01ABCDEF) },
			want:   "1fabcdef", // MSN is 24 bits
			check: func(b []byte) bool {
				a := wire.AETH(b)
				return a.Syndrome() == 0x1F && a.MSN() == 0xABCDEF
			},
		},
		{
			name: "AETH setters",
			size: wire.AETHSize,
			encode: func(b []byte) {
				a := wire.AETH(b)
				a.SetMSN(0xFF000102)
				a.SetSyndrome(wire.SyndromeNAK(wire.NAKPSNSeqErr))
			},
			want: "60000102",
		},
		{
			name: "AtomicETH",
			size: wire.AtomicETHSize,
			encode: func(b []byte) {
				wire.AtomicETH(b).Encode(0x55CBC9ADC000, 0x991, 0x1111111111111111, 0x2222222222222222)
			},
			want: "000055cbc9adc000" + "00000991" + "1111111111111111" + "2222222222222222",
			check: func(b []byte) bool {
				a := wire.AtomicETH(b)
				return a.VA() == 0x55CBC9ADC000 && a.RKey() == 0x991 && a.SwapAdd() == 0x1111111111111111 && a.Compare() == 0x2222222222222222
			},
		},
		{
			name: "AtomicETH setters",
			size: wire.AtomicETHSize,
			encode: func(b []byte) {
				a := wire.AtomicETH(b)
				a.SetVA(1)
				a.SetRKey(2)
				a.SetSwapAdd(3)
				a.SetCompare(4)
			},
			want: "0000000000000001" + "00000002" + "0000000000000003" + "0000000000000004",
		},
		{
			name:   "AtomicAckETH",
			size:   wire.AtomicAckETHSize,
			encode: func(b []byte) { wire.AtomicAckETH(b).SetOrigData(0x981537A39044032C) },
			want:   "981537a39044032c",
			check:  func(b []byte) bool { return wire.AtomicAckETH(b).OrigData() == 0x981537A39044032C },
		},
		{
			name:   "ImmDt",
			size:   wire.ImmDtSize,
			encode: func(b []byte) { wire.ImmDt(b).SetImm(0xDEADBEEF) },
			want:   "deadbeef",
			check:  func(b []byte) bool { return wire.ImmDt(b).Imm() == 0xDEADBEEF },
		},
		{
			name:   "IETH",
			size:   wire.IETHSize,
			encode: func(b []byte) { wire.IETH(b).SetRKey(0x00C0FFEE) },
			want:   "00c0ffee",
			check:  func(b []byte) bool { return wire.IETH(b).RKey() == 0x00C0FFEE },
		},
		{
			name:   "DETH",
			size:   wire.DETHSize,
			encode: func(b []byte) { wire.DETH(b).Encode(0x11111111, 0xFF000011) },
			want:   "11111111" + "00000011", // reserved byte zeroed, QPN 24 bits
			check: func(b []byte) bool {
				d := wire.DETH(b)
				return d.QKey() == 0x11111111 && d.SrcQP() == 0x11
			},
		},
		{
			name: "DETH setters keep the reserved byte",
			size: wire.DETHSize,
			encode: func(b []byte) {
				d := wire.DETH(b)
				d.SetQKey(0x80010000)
				d.SetSrcQP(0xABCDEF01)
			},
			want: "80010000" + "5acdef01",
		},
	}
	for _, tt := range tests {
		b := filled(tt.size+4, 0x5A) // 4 guard bytes must survive
		tt.encode(b[:tt.size])
		if got := hex.EncodeToString(b); got != tt.want+"5a5a5a5a" {
			t.Errorf("%s: bytes = %s, want %s", tt.name, got, tt.want)
		}
		if tt.check != nil && !tt.check(b) {
			t.Errorf("%s: getters disagree with the encoded values", tt.name)
		}
	}
}

// TestNonPostedLayout: FLUSH and ATOMIC WRITE as Linux 6.2+ rxe lays them
// out (rxe_opcode.c, rxe_hdr.h): FLUSH is BTH, FETH (placement type in
// bits 3..0, selectivity level in bits 5..4), RETH; ATOMIC WRITE is BTH,
// RETH (length 8) and the 8 bytes.
func TestNonPostedLayout(t *testing.T) {
	s := opSpec(false, wire.OpRCFlush, 0)
	s.plt, s.sel, s.dmaLen = wire.FlushGlobal, wire.FlushRange, 4096
	frame := build(s)
	tr := frame[s.route.HeaderLen():]
	if got, want := tr[12:16], []byte{0, 0, 0, 0x01}; string(got) != string(want) {
		t.Errorf("FETH of a global range FLUSH: % x, want % x", got, want)
	}
	if got := len(tr); got != 12+4+16+4 {
		t.Errorf("FLUSH is %d bytes from the BTH, want 36", got)
	}
	var p wire.Packet
	if err := p.Parse(frame); err != nil {
		t.Fatal(err)
	}
	if p.FETH.Placement() != wire.FlushGlobal || p.FETH.Level() != wire.FlushRange || p.RETH.DMALen() != 4096 || p.FETH.Reserved() != 0 {
		t.Errorf("parsed FETH %x RETH length %d", []byte(p.FETH), p.RETH.DMALen())
	}
	f := wire.FETH(make([]byte, 4))
	f.Encode(wire.FlushPersistent|wire.FlushGlobal, wire.FlushMR)
	if string(f) != string([]byte{0, 0, 0, 0x13}) || f.Placement() != 3 || f.Level() != 1 {
		t.Errorf("FETH persistent|global, MR level: % x", []byte(f))
	}

	s = opSpec(false, wire.OpRCAtomicWrite, 8)
	s.dmaLen = 8
	frame = build(s)
	if err := p.Parse(frame); err != nil {
		t.Fatal(err)
	}
	if len(p.Payload) != 8 || p.RETH.DMALen() != 8 || p.Info.HdrLen != 28 {
		t.Errorf("ATOMIC WRITE: %d payload bytes, RETH length %d, headers %d", len(p.Payload), p.RETH.DMALen(), p.Info.HdrLen)
	}
}
