package hostif

import (
	"bytes"
	"testing"
)

// FuzzParse: any datagram parses or is refused as ErrMalformed, and the
// fields of one that parses read without panicking, past their end too.
func FuzzParse(f *testing.F) {
	m := NewMsg(nil, Header{Op: OpRegMR, Seq: 7})
	m.U32(1).U64(0x1000).U64(4096).U64(0x1000).U32(7)
	b, _ := m.Done()
	f.Add(b)
	h, _ := NewMsg(nil, Header{Op: OpHello, Seq: 1}).U32(Version).Bytes([]byte("rnic0")).Done()
	f.Add(h)
	f.Add([]byte{0x52, 0x4e})
	f.Fuzz(func(t *testing.T, b []byte) {
		hdr, r, err := Parse(b)
		if err != nil {
			return
		}
		_ = hdr.Op.String()
		_, _, _ = r.U32(), r.Bytes(), r.U64()
		r.Fixed(16)
		r.End()
	})
}

// TestRoundTrip: fields come out as they went in, in order; a message
// with bytes left over or too few is malformed.
func TestRoundTrip(t *testing.T) {
	b, err := NewMsg(nil, Header{Op: OpQueryGID, Seq: 9, Errno: -3}).U8(1).U16(2).U32(3).U64(4).Bytes([]byte("gid")).Fixed([]byte{5, 6}).Done()
	if err != nil {
		t.Fatal(err)
	}
	h, r, err := Parse(b)
	if err != nil || h != (Header{Op: OpQueryGID, Seq: 9, Errno: -3}) {
		t.Fatalf("Parse = %+v, %v", h, err)
	}
	if a, b2, c, d, e, f := r.U8(), r.U16(), r.U32(), r.U64(), r.Bytes(), r.Fixed(2); a != 1 || b2 != 2 || c != 3 || d != 4 || string(e) != "gid" || !bytes.Equal(f, []byte{5, 6}) || r.End() != nil {
		t.Fatalf("fields %d %d %d %d %q %v, err %v", a, b2, c, d, e, f, r.Err)
	}
	_, r, _ = Parse(b)
	r.U8()
	if r.End() == nil {
		t.Error("unread fields were not reported")
	}
	_, r, _ = Parse(b)
	r.Fixed(100)
	if r.Err == nil || r.U64() != 0 {
		t.Error("a read past the end was not reported")
	}
	if _, _, err := Parse(b[:len(b)-1]); err == nil {
		t.Error("a truncated message parsed")
	}
	big := NewMsg(nil, Header{Op: OpHello})
	big.Fixed(make([]byte, MaxMsg))
	if _, err := big.Done(); err == nil {
		t.Error("a message over MaxMsg was built")
	}
}
