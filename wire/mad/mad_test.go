package mad

import (
	"errors"
	"testing"
)

// TestField: fields are counted from the most significant bit of their
// first byte, big-endian, and writing one leaves its neighbours alone.
func TestField(t *testing.T) {
	tests := []struct {
		f    field
		b    []byte
		want uint64
	}{
		{field{0, 0, 8}, []byte{0xa5}, 0xa5},
		{field{0, 0, 5}, []byte{0b10100_111}, 0b10100},
		{field{0, 5, 3}, []byte{0b10100_111}, 0b111},
		{field{0, 0, 20}, []byte{0x1d, 0xef, 0x90, 0x00}, 0x1def9},
		{field{3, 2, 6}, []byte{0, 0, 0, 0b11_011101}, 0b011101},
		{field{1, 0, 24}, []byte{0xff, 0x12, 0x34, 0x56}, 0x123456},
		{field{0, 0, 64}, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 0x0102030405060708},
		{field{0, 4, 1}, []byte{0b0000_1000}, 1},
	}
	for _, tc := range tests {
		if got := tc.f.get(tc.b); got != tc.want {
			t.Errorf("%+v of %x = %#x, want %#x", tc.f, tc.b, got, tc.want)
		}
		b := make([]byte, len(tc.b))
		for i := range b {
			b[i] = 0xff
		}
		tc.f.put(b, tc.want)
		if got := tc.f.get(b); got != tc.want {
			t.Errorf("%+v: put %#x, read back %#x", tc.f, tc.want, got)
		}
		// Every bit outside the field stays one.
		tc.f.put(b, 0)
		for i := range b {
			for j := range 8 {
				pos := i*8 + j
				in := pos >= int(tc.f.off)*8+int(tc.f.bit) && pos < int(tc.f.off)*8+int(tc.f.bit)+int(tc.f.width)
				if set := b[i]>>(7-j)&1 == 1; set == in {
					t.Errorf("%+v: bit %d after put 0: %v", tc.f, pos, set)
				}
			}
		}
	}
}

// TestParse: a MAD is 256 bytes of base version 1; the CM class at
// version 2 only.
func TestParse(t *testing.T) {
	good := make([]byte, Size)
	h := CMHeader(AttrREQ, 7)
	MAD(good).SetHeader(&h)
	if m, err := Parse(good); err != nil || m.Attr() != AttrREQ || m.TID() != 7 || m.Class() != ClassCM {
		t.Fatalf("Parse of a REQ: %v %v", m, err)
	}
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"short", func(b []byte) []byte { return b[:Size-1] }, ErrShort},
		{"base version 2", func(b []byte) []byte { b[0] = 2; return b }, ErrBaseVersion},
		{"CM class version 1", func(b []byte) []byte { b[2] = 1; return b }, ErrClassVersion},
	} {
		b := tc.edit(append([]byte(nil), good...))
		if _, err := Parse(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestEncodeClearsReserved: Encode writes the reserved bits zero
// whatever the MAD held, and what it writes decodes to what it was given.
func TestEncodeClearsReserved(t *testing.T) {
	m := MAD(make([]byte, Size))
	for i := range m {
		m[i] = 0xff
	}
	r := REQ{LocalCommID: 1, ServiceID: ServiceID(PortSpaceTCP, 18515), LocalQPN: 0x123456, StartingPSN: 0xabcdef,
		PathMTU: 3, RetryCount: 7, Primary: Path{FlowLabel: 0xfffff, PacketRate: 0x3f, SL: 0xf, SubnetLocal: true, LocalAckTimeout: 0x1f}}
	h := CMHeader(AttrREQ, 1)
	m.SetHeader(&h)
	m.SetMessage(&r)
	if got, err := m.Message(); err != nil || *got.(*REQ) != r {
		t.Errorf("REQ round trip:\n got %+v\nwant %+v", got, r)
	}
	// Byte 4 (between the communication ID and the vendor ID) and bytes
	// 24-27 (after the CA GUID) are reserved.
	for _, off := range []int{HeaderSize + 4, HeaderSize + 24, HeaderSize + 27} {
		if m[off] != 0 {
			t.Errorf("reserved byte %d is %#x", off, m[off])
		}
	}
}

// TestServiceID: rdma_cm's service IDs.
func TestServiceID(t *testing.T) {
	if got := ServiceID(PortSpaceTCP, 7174); got != 0x0000000001061c06 {
		t.Errorf("ServiceID(TCP, 7174) = %#x", got)
	}
	if ps, port, ok := SplitServiceID(0x0000000001111c06); !ok || ps != PortSpaceUDP || port != 7174 {
		t.Errorf("SplitServiceID: %v %v %v", ps, port, ok)
	}
	if _, _, ok := SplitServiceID(0x1000000000000001); ok {
		t.Error("SplitServiceID took a service ID that is not rdma_cm's")
	}
}
