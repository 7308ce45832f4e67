package queue

import (
	"bytes"
	"reflect"
	"testing"
)

func TestWQESize(t *testing.T) {
	for _, tc := range []struct{ sge, inline, want int }{
		{0, 0, 64}, {1, 0, 128}, {4, 0, 128}, {5, 0, 256}, {1, 64, 128}, {1, 220, 512}, {16, 0, 512},
	} {
		if got := WQESize(tc.sge, tc.inline); got != tc.want {
			t.Errorf("WQESize(%d, %d) = %d, want %d", tc.sge, tc.inline, got, tc.want)
		}
	}
	if got := RecvWQESize(1); got != 32 {
		t.Errorf("RecvWQESize(1) = %d", got)
	}
}

// TestSendWQE: a WQE comes out of its slot as it went in; counts that do
// not fit the slot are refused, whatever the program wrote.
func TestSendWQE(t *testing.T) {
	slot := make([]byte, WQESize(4, 0))
	in := SendWQE{WRID: 77, Opcode: 4, Flags: 2, NumSGE: 2, Imm: 0xabcd, RemoteAddr: 1 << 40, RKey: 9, CompareAdd: 5, Swap: 6,
		RemoteQPN: 0x12, RemoteQKey: 0x11111111, AH: 3}
	in.SGL[0], in.SGL[1] = SGE{Addr: 0x1000, Length: 10, LKey: 1}, SGE{Addr: 0x2000, Length: 20, LKey: 2}
	if err := EncodeSend(slot, &in); err != nil {
		t.Fatal(err)
	}
	var out SendWQE
	if err := DecodeSend(slot, &out); err != nil {
		t.Fatal(err)
	}
	out.Inline, in.Inline = nil, nil
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %+v\nwant    %+v", out, in)
	}
	inl := SendWQE{WRID: 1, Inline: []byte("inline payload")}
	EncodeSend(slot, &inl)
	if err := DecodeSend(slot, &out); err != nil || !bytes.Equal(out.Inline, inl.Inline) || out.NumSGE != 0 {
		t.Fatalf("inline: %q, %v", out.Inline, err)
	}
	for name, mod := range map[string]func(b []byte){
		"too many SGEs":    func(b []byte) { b[10] = 5 },
		"over MaxSGE":      func(b []byte) { b[10] = 200 },
		"inline too long":  func(b []byte) { b[10] = 0; b[28] = 0xff; b[29] = 0xff },
		"inline and SGEs":  func(b []byte) { b[10] = 1; b[28] = 4 },
		"inline past 2^31": func(b []byte) { b[10] = 0; b[31] = 0x80 },
	} {
		b := make([]byte, len(slot))
		EncodeSend(b, &in)
		mod(b)
		if err := DecodeSend(b, &out); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if err := DecodeSend(slot[:63], &out); err == nil {
		t.Error("a 63-byte slot decoded")
	}
	big := SendWQE{NumSGE: 5}
	if err := EncodeSend(slot, &big); err == nil {
		t.Error("5 SGEs encoded into a slot of 4")
	}
}

func TestRecvWQE(t *testing.T) {
	slot := make([]byte, RecvWQESize(2))
	in := RecvWQE{WRID: 5, NumSGE: 2}
	in.SGL[0], in.SGL[1] = SGE{Addr: 1, Length: 2, LKey: 3}, SGE{Addr: 4, Length: 5, LKey: 6}
	if err := EncodeRecv(slot, &in); err != nil {
		t.Fatal(err)
	}
	var out RecvWQE
	if err := DecodeRecv(slot, &out); err != nil || out != in {
		t.Fatalf("decoded %+v, %v", out, err)
	}
	slot[8] = 4 // 16 + 4×16 bytes: past the 64-byte slot
	if err := DecodeRecv(slot, &out); err == nil {
		t.Error("4 SGEs decoded from a 64-byte slot")
	}
}

// TestCQE: a CQE is visible at its lap only; the next lap's reader does
// not take the previous lap's entry.
func TestCQE(t *testing.T) {
	ring := make([]byte, 4*CQELen)
	const depth = 4
	var got CQE
	if GetCQE(ring[:CQELen], Lap(0, depth), &got) {
		t.Fatal("an empty slot has a CQE")
	}
	c := CQE{WRID: 9, Status: 0, Opcode: 1, Flags: 2, ByteLen: 3, Imm: 4, QPNum: 0x11, SrcQP: 5, VendorErr: 6, PKeyIndex: 7, SL: 8}
	PutCQE(ring[:CQELen], &c, Lap(0, depth))
	if !GetCQE(ring[:CQELen], Lap(0, depth), &got) || got != c {
		t.Fatalf("got %+v", got)
	}
	if GetCQE(ring[:CQELen], Lap(4, depth), &got) {
		t.Error("lap 1's entry read as lap 2's")
	}
}

// FuzzDecodeWQE: any slot contents decode or are refused; a decoded WQE
// never reaches past its slot.
func FuzzDecodeWQE(f *testing.F) {
	slot := make([]byte, WQESize(2, 0))
	in := SendWQE{WRID: 1, NumSGE: 2}
	EncodeSend(slot, &in)
	f.Add(slot)
	f.Fuzz(func(t *testing.T, b []byte) {
		var w SendWQE
		if DecodeSend(b, &w) == nil {
			if len(w.Inline) > len(b) || int(w.NumSGE)*SGELen > len(b) {
				t.Fatalf("decoded past the slot: %+v", w)
			}
		}
		var r RecvWQE
		if DecodeRecv(b, &r) == nil && int(r.NumSGE)*SGELen > len(b) {
			t.Fatalf("receive decoded past the slot: %+v", r)
		}
	})
}
