package wire_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rnic/rnic/wire"
)

var allHeaders = []wire.Header{
	wire.HdrDETH, wire.HdrFETH, wire.HdrRETH, wire.HdrAtomicETH, wire.HdrAETH,
	wire.HdrAtomicAckETH, wire.HdrImmDt, wire.HdrIETH,
}

// TestOpcodeTableWalk checks invariants over all 256 entries (Reference:
// IBTA Vol. 1 §9.2, Table 38; §9.3 for header order).
func TestOpcodeTableWalk(t *testing.T) {
	valid := 0
	for i := range 256 {
		op := wire.Opcode(i)
		info := op.Info()
		if info == nil {
			t.Fatalf("%#x: Info() is nil", i)
		}
		if !op.Valid() {
			if info.Flags != 0 || info.Name != "" || info.HdrLen != 0 {
				t.Errorf("%#x: invalid opcode has a row: %+v", i, *info)
			}
			if want := fmt.Sprintf("OPCODE(%#x)", i); op.String() != want {
				t.Errorf("%#x: String() = %q, want %q", i, op.String(), want)
			}
			for _, h := range allHeaders {
				if off := info.Offset(h); off != -1 {
					t.Errorf("%v: invalid opcode has %v at %d", op, h, off)
				}
			}
			continue
		}
		valid++
		name := op.String()
		if name != info.Name {
			t.Errorf("%#x: String() = %q, Name = %q", i, name, info.Name)
		}
		if int(info.Transport) != i>>5 {
			t.Errorf("%v: Transport = %v, want the opcode's top bits %d", op, info.Transport, i>>5)
		}
		if !strings.HasPrefix(name, info.Transport.String()) {
			t.Errorf("%v: name does not start with transport %v", op, info.Transport)
		}
		fl := info.Flags

		// Headers: offsets increase in IBTA order, without gaps, and
		// HdrLen is BTH plus the present headers (plus a CNP's reserved
		// bytes).
		next := wire.BTHSize
		for _, h := range allHeaders {
			off := info.Offset(h)
			if has := fl.Has(h.Flag()); has != (off >= 0) {
				t.Errorf("%v: flag %v = %v but Offset = %d", op, h, has, off)
			}
			if off < 0 {
				continue
			}
			if off != next {
				t.Errorf("%v: %v at %d, want %d", op, h, off, next)
			}
			next = off + h.Size()
		}
		if op == wire.OpCNP {
			next += wire.CNPReservedSize
		}
		if info.HdrLen != next {
			t.Errorf("%v: HdrLen = %d, want %d", op, info.HdrLen, next)
		}

		// First/Last follow the name; single-packet operations are both.
		first, last := fl.Has(wire.FlagFirst), fl.Has(wire.FlagLast)
		switch {
		case strings.Contains(name, "_FIRST"):
			if !first || last {
				t.Errorf("%v: First=%v Last=%v, want a FIRST", op, first, last)
			}
		case strings.Contains(name, "_MIDDLE"):
			if first || last {
				t.Errorf("%v: First=%v Last=%v, want a MIDDLE", op, first, last)
			}
		case strings.Contains(name, "_LAST"):
			if first || !last {
				t.Errorf("%v: First=%v Last=%v, want a LAST", op, first, last)
			}
		default: // ONLY, READ request, atomics, ACKs, CNP
			if !first || !last {
				t.Errorf("%v: First=%v Last=%v, want a single-packet message", op, first, last)
			}
		}

		// Meaning bits agree with the name and with each other.
		kinds := map[wire.OpFlags]string{
			wire.FlagSend: "_SEND_", wire.FlagWrite: "_RDMA_WRITE_", wire.FlagReadReq: "_RDMA_READ_REQUEST",
			wire.FlagReadResp: "_RDMA_READ_RESP_", wire.FlagAtomic: "", wire.FlagAck: "ACK",
			wire.FlagFlush: "_FLUSH", wire.FlagAtomicWrite: "_ATOMIC_WRITE",
		}
		nkinds := 0
		for f, sub := range kinds {
			if fl.Has(f) {
				nkinds++
				if sub != "" && !strings.Contains(name, sub) {
					t.Errorf("%v: has %v but name lacks %q", op, f, sub)
				}
			}
		}
		if want := map[bool]int{true: 0, false: 1}[op == wire.OpCNP]; nkinds != want {
			t.Errorf("%v: %d operation kinds in %v, want %d", op, nkinds, fl, want)
		}
		if fl.Has(wire.FlagAtomic) != (strings.HasSuffix(name, "CMP_SWAP") || strings.HasSuffix(name, "FETCH_ADD")) {
			t.Errorf("%v: FlagAtomic = %v", op, fl.Has(wire.FlagAtomic))
		}
		if fl.Has(wire.FlagRequest) == fl.Has(wire.FlagResponse) && op != wire.OpCNP {
			t.Errorf("%v: must be exactly one of request and response: %v", op, fl)
		}
		if fl.Has(wire.FlagRequest) != (fl.Has(wire.FlagSend) || fl.Has(wire.FlagWrite) || fl.Has(wire.FlagReadReq) || fl.Has(wire.FlagAtomic) ||
			fl.Has(wire.FlagFlush) || fl.Has(wire.FlagAtomicWrite)) {
			t.Errorf("%v: FlagRequest disagrees with the operation: %v", op, fl)
		}
		if fl.Has(wire.FlagPayload) != (fl.Has(wire.FlagSend) || fl.Has(wire.FlagWrite) || fl.Has(wire.FlagReadResp) || fl.Has(wire.FlagAtomicWrite)) {
			t.Errorf("%v: FlagPayload disagrees with the operation: %v", op, fl)
		}
		if fl.Has(wire.FlagImm) != fl.Has(wire.FlagImmDt) || fl.Has(wire.FlagImm) != strings.HasSuffix(name, "_IMM") {
			t.Errorf("%v: Imm/ImmDt disagree with the name: %v", op, fl)
		}
		if fl.Has(wire.FlagInv) != fl.Has(wire.FlagIETH) || fl.Has(wire.FlagInv) != strings.HasSuffix(name, "_INV") {
			t.Errorf("%v: Inv/IETH disagree with the name: %v", op, fl)
		}
		if fl.Has(wire.FlagDETH) != (info.Transport == wire.TransportUD) {
			t.Errorf("%v: DETH must be on exactly the UD opcodes", op)
		}
		if fl.Has(wire.FlagRETH) != (fl.Has(wire.FlagReadReq) || fl.Has(wire.FlagWrite) && first || fl.Has(wire.FlagFlush) || fl.Has(wire.FlagAtomicWrite)) {
			t.Errorf("%v: RETH must be on READ requests, the first WRITE packet, FLUSH and ATOMIC WRITE", op)
		}
		if fl.Has(wire.FlagFETH) != fl.Has(wire.FlagFlush) {
			t.Errorf("%v: FETH must be on exactly FLUSH", op)
		}
		if fl.Has(wire.FlagAETH) != (fl.Has(wire.FlagAck) || fl.Has(wire.FlagReadResp) && (first || last)) {
			t.Errorf("%v: AETH must be on ACKs and non-middle READ responses", op)
		}
		completes := last && (fl.Has(wire.FlagSend) || fl.Has(wire.FlagWrite) && fl.Has(wire.FlagImm))
		if fl.Has(wire.FlagCompletes) != completes {
			t.Errorf("%v: FlagCompletes = %v, want %v", op, fl.Has(wire.FlagCompletes), completes)
		}
		consumes := fl.Has(wire.FlagSend) || fl.Has(wire.FlagWrite) && fl.Has(wire.FlagImm)
		if fl.Has(wire.FlagConsumesRecvWQE) != consumes {
			t.Errorf("%v: FlagConsumesRecvWQE = %v, want %v", op, fl.Has(wire.FlagConsumesRecvWQE), consumes)
		}
	}
	if want := 25 + 12 + 2 + 1; valid != want {
		t.Errorf("%d valid opcodes, want %d (RC 25, UC 12, UD 2, CNP 1)", valid, want)
	}
}

// TestOpcodeTableRows spells out some rows as rxe_opcode.c and the IBTA
// spec give them, independently of how the table is built.
func TestOpcodeTableRows(t *testing.T) {
	tests := []struct {
		op     wire.Opcode
		value  uint8
		name   string
		hdrLen int
		offs   map[wire.Header]int
	}{
		{wire.OpRCSendFirst, 0x00, "RC_SEND_FIRST", 12, nil},
		{wire.OpRCSendLastImm, 0x03, "RC_SEND_LAST_IMM", 16, map[wire.Header]int{wire.HdrImmDt: 12}},
		{wire.OpRCWriteFirst, 0x06, "RC_RDMA_WRITE_FIRST", 28, map[wire.Header]int{wire.HdrRETH: 12}},
		{wire.OpRCWriteMiddle, 0x07, "RC_RDMA_WRITE_MIDDLE", 12, nil},
		{wire.OpRCWriteOnly, 0x0A, "RC_RDMA_WRITE_ONLY", 28, map[wire.Header]int{wire.HdrRETH: 12}},
		{wire.OpRCWriteOnlyImm, 0x0B, "RC_RDMA_WRITE_ONLY_IMM", 32, map[wire.Header]int{wire.HdrRETH: 12, wire.HdrImmDt: 28}},
		{wire.OpRCReadRequest, 0x0C, "RC_RDMA_READ_REQUEST", 28, map[wire.Header]int{wire.HdrRETH: 12}},
		{wire.OpRCReadRespFirst, 0x0D, "RC_RDMA_READ_RESP_FIRST", 16, map[wire.Header]int{wire.HdrAETH: 12}},
		{wire.OpRCReadRespMiddle, 0x0E, "RC_RDMA_READ_RESP_MIDDLE", 12, nil},
		{wire.OpRCReadRespLast, 0x0F, "RC_RDMA_READ_RESP_LAST", 16, map[wire.Header]int{wire.HdrAETH: 12}},
		{wire.OpRCReadRespOnly, 0x10, "RC_RDMA_READ_RESP_ONLY", 16, map[wire.Header]int{wire.HdrAETH: 12}},
		{wire.OpRCAck, 0x11, "RC_ACK", 16, map[wire.Header]int{wire.HdrAETH: 12}},
		{wire.OpRCAtomicAck, 0x12, "RC_ATOMIC_ACK", 24, map[wire.Header]int{wire.HdrAETH: 12, wire.HdrAtomicAckETH: 16}},
		{wire.OpRCCompareSwap, 0x13, "RC_CMP_SWAP", 40, map[wire.Header]int{wire.HdrAtomicETH: 12}},
		{wire.OpRCFetchAdd, 0x14, "RC_FETCH_ADD", 40, map[wire.Header]int{wire.HdrAtomicETH: 12}},
		{wire.OpRCSendLastInv, 0x16, "RC_SEND_LAST_INV", 16, map[wire.Header]int{wire.HdrIETH: 12}},
		{wire.OpRCSendOnlyInv, 0x17, "RC_SEND_ONLY_INV", 16, map[wire.Header]int{wire.HdrIETH: 12}},
		// rxe_opcode.c (Linux 6.2+): FLUSH is BTH, FETH, RETH; ATOMIC
		// WRITE is BTH, RETH and an 8-byte payload.
		{wire.OpRCFlush, 0x1C, "RC_FLUSH", 32, map[wire.Header]int{wire.HdrFETH: 12, wire.HdrRETH: 16}},
		{wire.OpRCAtomicWrite, 0x1D, "RC_ATOMIC_WRITE", 28, map[wire.Header]int{wire.HdrRETH: 12}},
		{wire.OpUCSendFirst, 0x20, "UC_SEND_FIRST", 12, nil},
		{wire.OpUCSendOnlyImm, 0x25, "UC_SEND_ONLY_IMM", 16, map[wire.Header]int{wire.HdrImmDt: 12}},
		{wire.OpUCWriteFirst, 0x26, "UC_RDMA_WRITE_FIRST", 28, map[wire.Header]int{wire.HdrRETH: 12}},
		{wire.OpUCWriteLastImm, 0x29, "UC_RDMA_WRITE_LAST_IMM", 16, map[wire.Header]int{wire.HdrImmDt: 12}},
		{wire.OpUCWriteOnlyImm, 0x2B, "UC_RDMA_WRITE_ONLY_IMM", 32, map[wire.Header]int{wire.HdrRETH: 12, wire.HdrImmDt: 28}},
		{wire.OpUDSendOnly, 0x64, "UD_SEND_ONLY", 20, map[wire.Header]int{wire.HdrDETH: 12}},
		{wire.OpUDSendOnlyImm, 0x65, "UD_SEND_ONLY_IMM", 24, map[wire.Header]int{wire.HdrDETH: 12, wire.HdrImmDt: 20}},
		{wire.OpCNP, 0x81, "CNP", 28, nil},
	}
	for _, tt := range tests {
		info := tt.op.Info()
		if uint8(tt.op) != tt.value || tt.op.String() != tt.name || info.HdrLen != tt.hdrLen {
			t.Errorf("%#x %v: HdrLen %d; want %#x %s HdrLen %d", uint8(tt.op), tt.op, info.HdrLen, tt.value, tt.name, tt.hdrLen)
		}
		for _, h := range allHeaders {
			want, ok := tt.offs[h]
			if !ok {
				want = -1
			}
			if got := info.Offset(h); got != want {
				t.Errorf("%v: Offset(%v) = %d, want %d", tt.op, h, got, want)
			}
		}
	}
	for _, op := range []wire.Opcode{0x15, 0x18, 0x1F, 0x2C, 0x36, 0x40, 0x60, 0x63, 0x66, 0x80, 0x82, 0xA0, 0xFF} {
		if op.Valid() {
			t.Errorf("%#x: Valid() = true, want false", uint8(op))
		}
	}
	if got := wire.Opcode(0x15).String(); got != "OPCODE(0x15)" {
		t.Errorf("Opcode(0x15).String() = %q", got)
	}
	if got := wire.OpRCAck.Info().Offset(wire.Header(200)); got != -1 {
		t.Errorf("Offset(unknown header) = %d, want -1", got)
	}
}

func TestOpFlagsString(t *testing.T) {
	tests := []struct {
		f    wire.OpFlags
		want string
	}{
		{0, "0"},
		{wire.FlagRETH | wire.FlagFirst, "RETH|First"},
		{wire.FlagInv, "Inv"},
		{1 << 31, "0x80000000"},
		{wire.FlagAck | 1<<30, "Ack|0x40000000"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("OpFlags(%#x).String() = %q, want %q", uint32(tt.f), got, tt.want)
		}
	}
	if !(wire.FlagRETH | wire.FlagAETH).Has(wire.FlagRETH) || wire.FlagRETH.Has(wire.FlagRETH|wire.FlagAETH) {
		t.Error("Has is not 'all bits set'")
	}
}

func TestHeaderAndTransportString(t *testing.T) {
	for h, want := range map[wire.Header]string{
		wire.HdrDETH: "DETH", wire.HdrRETH: "RETH", wire.HdrAtomicETH: "AtomicETH", wire.HdrAETH: "AETH",
		wire.HdrAtomicAckETH: "AtomicAckETH", wire.HdrImmDt: "ImmDt", wire.HdrIETH: "IETH", 9: "HEADER(9)",
	} {
		if got := h.String(); got != want {
			t.Errorf("Header(%d).String() = %q, want %q", h, got, want)
		}
	}
	if h := wire.Header(99); h.Size() != 0 || h.Flag() != 0 {
		t.Errorf("unknown header: Size %d Flag %v", h.Size(), h.Flag())
	}
	for tr, want := range map[wire.Transport]string{
		wire.TransportRC: "RC", wire.TransportUC: "UC", wire.TransportUD: "UD", wire.TransportCNP: "CNP", 2: "TRANSPORT(2)",
	} {
		if got := tr.String(); got != want {
			t.Errorf("Transport(%d).String() = %q, want %q", tr, got, want)
		}
	}
}
