package mad

import "testing"

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
		n := MAD(make([]byte, Size))
		same := func(ok bool) {
			if !ok {
				t.Fatalf("%v: fields changed through Encode", m.Attr())
			}
		}
		switch m.Attr() {
		case AttrREQ:
			r := m.REQ()
			n.SetREQ(&r)
			same(n.REQ() == r)
			if _, err := DecodeCMAHeader(r.PrivateData[:], r.ServiceID); err == nil {
				var p [REQPrivateLen]byte
				h, _ := DecodeCMAHeader(r.PrivateData[:], r.ServiceID)
				h.Encode(p[:])
				g, err := DecodeCMAHeader(p[:], r.ServiceID)
				same(err == nil && g == h)
			}
		case AttrMRA:
			r := m.MRA()
			n.SetMRA(&r)
			same(n.MRA() == r)
		case AttrREJ:
			r := m.REJ()
			n.SetREJ(&r)
			same(n.REJ() == r)
		case AttrREP:
			r := m.REP()
			n.SetREP(&r)
			same(n.REP() == r)
		case AttrRTU:
			r := m.RTU()
			n.SetRTU(&r)
			same(n.RTU() == r)
		case AttrDREQ:
			r := m.DREQ()
			n.SetDREQ(&r)
			same(n.DREQ() == r)
		case AttrDREP:
			r := m.DREP()
			n.SetDREP(&r)
			same(n.DREP() == r)
		case AttrSIDRREQ:
			r := m.SIDRREQ()
			n.SetSIDRREQ(&r)
			same(n.SIDRREQ() == r)
		case AttrSIDRREP:
			r := m.SIDRREP()
			n.SetSIDRREP(&r)
			same(n.SIDRREP() == r)
		}
	})
}
