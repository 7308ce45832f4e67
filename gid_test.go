package rnic_test

import (
	"strings"
	"testing"

	"github.com/rnic/rnic"
)

// TestGIDTable checks that the GID table is laid out as Linux lays out
// rxe's, so that rxe's scripts find the address at -x 1: index 0 the
// link-local GID (fe80::/64 and the modified EUI-64 of a MAC, here the
// locally administered 02:00:0a:00:00:01 a port without one gets), index 1
// the IPv4-mapped address, both RoCE v2.
func TestGIDTable(t *testing.T) {
	p := newPair(t, pairOpts{})
	want := []rnic.GIDEntry{
		{Index: 0, GID: must(rnic.ParseGID("fe80::0000:0aff:fe00:0001")), Type: rnic.GIDTypeRoCEv2},
		{Index: 1, GID: must(rnic.ParseGID("::ffff:10.0.0.1")), Type: rnic.GIDTypeRoCEv2},
	}
	got := p.a.GIDTable()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("GID table %v, want %v", got, want)
	}
	if n := p.a.Attr().GIDTableLen; n != 16 {
		t.Errorf("gid_tbl_len %d, want 16 (2 valid entries, 14 empty)", n)
	}
	if g, err := p.a.GID(5); err == nil || g != (rnic.GID{}) {
		t.Errorf("GID(5) = %v, %v: want an empty entry's error", g, err)
	}
	if _, err := p.a.GIDType(5); err == nil {
		t.Error("GIDType(5) of an empty entry succeeded")
	}
	if _, err := p.a.GID(16); err == nil {
		t.Error("GID(16) beyond gid_tbl_len succeeded")
	}
	for _, e := range want {
		if g := must(p.a.GID(e.Index)); g != e.GID {
			t.Errorf("GID(%d) = %v, want %v", e.Index, g, e.GID)
		}
		if ty := must(p.a.GIDType(e.Index)); ty != rnic.GIDTypeRoCEv2 || ty.String() != "RoCE v2" {
			t.Errorf("GIDType(%d) = %v", e.Index, ty)
		}
	}
	if p.b.GIDTable()[0].GID == want[0].GID {
		t.Error("two ports have the same link-local GID")
	}
	// The link-local GID is listed but not a source: the link carries only
	// frames of the port's address. The error says what to use.
	qp := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa,
		Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	cp := rnic.ConnParams{SGIDIndex: -1}
	err := qp.Connect(p.qpb.Endpoint(rnic.ConnParams{}), cp)
	if err == nil || !strings.Contains(err.Error(), "link-local") || !strings.Contains(err.Error(), "GID index 1") {
		t.Errorf("Connect from GID index 0: %v", err)
	}
	if e := qp.Endpoint(rnic.ConnParams{}); e.GID != want[1].GID {
		t.Errorf("Endpoint GID %v, want the address %v", e.GID, want[1].GID)
	}
}
