package atu

import (
	"bytes"
	"testing"
)

// TestBestPageSize: with Config.BestPageSize a region registered without
// a page size gets the smallest page that covers it in at most two MTT
// entries (4 KiB at least, 1 GiB at most); one registered with a page
// size keeps it; and every byte of the region still reads as the
// buffer's, across the page boundary.
func TestBestPageSize(t *testing.T) {
	u, err := New(Config{MaxMR: 8, PageShift: 12, MPTCache: shapeNamed(t, "nic").mpt, MTTCache: shapeNamed(t, "nic").mtt,
		UTLB: true, BestPageSize: true})
	if err != nil {
		t.Fatal(err)
	}
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31 + i>>12)
		}
		return b
	}
	for _, tc := range []struct {
		n     int
		iova  uint64
		shift uint8 // asked (0: best)
		want  uint8
	}{
		{100, 0x1000, 0, 12},
		{1 << 20, 0x10_0000, 0, 20},
		{1<<20 + 1, 0x123_4567, 0, 21},
		{3 << 20, 0x7000, 0, 22},
		{1 << 20, 0x10_0000, 12, 12}, // asked: kept
	} {
		buf := fill(tc.n)
		k := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: tc.iova, Access: LocalWrite | RemoteRead, PageShift: tc.shift})
		e, _ := u.Lookup(k)
		if e.PageShift != tc.want || (tc.shift == 0 && pageCount(&e) > 2) {
			t.Errorf("%d bytes at %#x (asked %d): page shift %d, %d MTT entries; want shift %d", tc.n, tc.iova, tc.shift, e.PageShift, pageCount(&e), tc.want)
		}
		got := make([]byte, tc.n)
		if f := u.Read(1, k, tc.iova, got); f != OK || !bytes.Equal(got, buf) {
			t.Errorf("%d bytes at %#x: read back %v, equal %v", tc.n, tc.iova, f, bytes.Equal(got, buf))
		}
		if err := u.DeregMR(k); err != nil {
			t.Fatal(err)
		}
	}
}
