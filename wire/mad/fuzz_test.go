package mad

import (
	"bytes"
	"testing"
)

// FuzzMAD: any bytes are refused or parsed without a panic, and a parsed
// CM message decodes to fields that encode and decode to the same fields.
func FuzzMAD(f *testing.F) {
	for _, a := range []Attr{AttrREQ, AttrMRA, AttrREJ, AttrREP, AttrRTU, AttrDREQ, AttrDREP, AttrSIDRREQ, AttrSIDRREP, 0xffff} {
		b := make([]byte, Size)
		h := CMHeader(a, 1)
		MAD(b).SetHeader(&h)
		for i := HeaderSize; i < Size; i++ {
			b[i] = byte(i * 37)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 7, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		msg, err := m.Message()
		if err != nil {
			return
		}
		// Encoding is a function of the fields: the fields decoded
		// from an encoding encode the same.
		n, n2 := MAD(make([]byte, Size)), MAD(make([]byte, Size))
		h := m.Header()
		n.SetHeader(&h)
		n2.SetHeader(&h)
		n.SetMessage(msg)
		again, err := n.Message()
		if err != nil {
			t.Fatal(err)
		}
		n2.SetMessage(again)
		if !bytes.Equal(n, n2) {
			t.Fatalf("%v: fields changed through Encode", m.Attr())
		}
		if r, ok := msg.(*REQ); ok {
			if h, err := DecodeCMAHeader(r.PrivateData[:], r.ServiceID); err == nil {
				var p [REQPrivateLen]byte
				h.Encode(p[:])
				if g, err := DecodeCMAHeader(p[:], r.ServiceID); err != nil || g != h {
					t.Fatalf("rdma_cm header %+v re-encoded as %+v (%v)", h, g, err)
				}
			}
		}
	})
}
