package rnic_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// The two IBTA 1.5 operations end to end: ATOMIC WRITE stores 8 bytes at
// the responder, FLUSH makes a range (or a region) globally visible; both
// are answered by a zero-length READ response and complete with their
// own opcodes, and each refusal is the NAK rxe sends.

func flushPair(t *testing.T, f mem.Faults) *pair {
	return newPair(t, pairOpts{fa: f, fb: f, conn: rnic.ConnParams{
		Access: rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic | rnic.AccessFlushGlobal | rnic.AccessFlushPersistent,
	}})
}

func TestAtomicWriteAndFlush(t *testing.T) {
	p := flushPair(t, mem.Faults{})
	buf := make([]byte, 4096)
	mr := must(p.pdb.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessFlushGlobal))

	// ATOMIC WRITE: the 8 bytes land as the requester's memory held them.
	const v = 0x1122334455667788
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRAtomicWrite, Flags: rnic.SendSignaled,
		RemoteAddr: mr.Addr() + 64, RKey: mr.RKey(), CompareAdd: v}))
	wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
	if wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCAtomicWrite || wc.ByteLen != 8 || wc.WRID != 1 {
		t.Fatalf("ATOMIC WRITE completion %+v", wc)
	}
	var want [8]byte
	binary.NativeEndian.PutUint64(want[:], v)
	got := make([]byte, 8)
	mr.ReadAt(got, 64)
	if string(got) != string(want[:]) {
		t.Fatalf("memory holds %x, want %x", got, want)
	}

	// FLUSH to global visibility, of a range and of the whole region.
	for i, fl := range []rnic.FlushInfo{{Length: 4096, Placement: rnic.FlushGlobal, Level: rnic.FlushRange},
		{Placement: rnic.FlushGlobal, Level: rnic.FlushMR}} {
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(10 + i), Opcode: rnic.WRFlush, Flags: rnic.SendSignaled,
			RemoteAddr: mr.Addr(), RKey: mr.RKey(), Flush: fl}))
		wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
		if wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCFlush || wc.ByteLen != fl.Length {
			t.Fatalf("FLUSH %+v: completion %+v", fl, wc)
		}
	}

	// Work requests refused at post time: an SGL, no placement type.
	for _, wr := range []rnic.SendWR{
		{Opcode: rnic.WRAtomicWrite, SGL: []rnic.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}, RemoteAddr: mr.Addr(), RKey: mr.RKey()},
		{Opcode: rnic.WRFlush, RemoteAddr: mr.Addr(), RKey: mr.RKey(), Flush: rnic.FlushInfo{Length: 8}},
		{Opcode: rnic.WRFlush, RemoteAddr: mr.Addr(), RKey: mr.RKey(), Flush: rnic.FlushInfo{Length: 8, Placement: 4}},
	} {
		if err := p.qpa.PostSend(wr); err == nil {
			t.Errorf("%+v was posted", wr)
		}
	}
}

// TestNonPostedRefusals: each request the responder refuses completes at
// the requester with the status of the NAK rxe sends for it.
func TestNonPostedRefusals(t *testing.T) {
	tests := []struct {
		name string
		wr   func(mr, noFlush *rnic.MR) rnic.SendWR
		want rnic.WCStatus
	}{
		{"atomic write unaligned", func(mr, _ *rnic.MR) rnic.SendWR {
			return rnic.SendWR{Opcode: rnic.WRAtomicWrite, RemoteAddr: mr.Addr() + 4, RKey: mr.RKey()}
		}, rnic.WCRemInvReqErr},
		{"atomic write beyond the region", func(mr, _ *rnic.MR) rnic.SendWR {
			return rnic.SendWR{Opcode: rnic.WRAtomicWrite, RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey()}
		}, rnic.WCRemAccessErr},
		{"flush persistent (rnic cannot)", func(mr, _ *rnic.MR) rnic.SendWR {
			return rnic.SendWR{Opcode: rnic.WRFlush, RemoteAddr: mr.Addr(), RKey: mr.RKey(),
				Flush: rnic.FlushInfo{Length: 64, Placement: rnic.FlushPersistent}}
		}, rnic.WCRemAccessErr},
		{"flush of a region without the flush right", func(_, nf *rnic.MR) rnic.SendWR {
			return rnic.SendWR{Opcode: rnic.WRFlush, RemoteAddr: nf.Addr(), RKey: nf.RKey(),
				Flush: rnic.FlushInfo{Length: 64, Placement: rnic.FlushGlobal}}
		}, rnic.WCRemAccessErr},
		{"flush of a whole region without the flush right", func(_, nf *rnic.MR) rnic.SendWR {
			return rnic.SendWR{Opcode: rnic.WRFlush, RemoteAddr: nf.Addr(), RKey: nf.RKey(),
				Flush: rnic.FlushInfo{Placement: rnic.FlushGlobal, Level: rnic.FlushMR}}
		}, rnic.WCRemAccessErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := flushPair(t, mem.Faults{})
			mr := must(p.pdb.RegMR(make([]byte, 4096), rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessFlushGlobal))
			nf := must(p.pdb.RegMR(make([]byte, 4096), rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
			wr := tt.wr(mr, nf)
			wr.Flags |= rnic.SendSignaled
			must0(t, p.qpa.PostSend(wr))
			if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != tt.want {
				t.Fatalf("completion %+v, want status %v", wc, tt.want)
			}
		})
	}
	// A QP that did not grant FLUSH: invalid request (rxe's NAK 0x61).
	p := newPair(t, pairOpts{conn: rnic.ConnParams{Access: rnic.AccessRemoteWrite}})
	mr := must(p.pdb.RegMR(make([]byte, 64), rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessFlushGlobal))
	must0(t, p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRFlush, Flags: rnic.SendSignaled, RemoteAddr: mr.Addr(), RKey: mr.RKey(),
		Flush: rnic.FlushInfo{Length: 8, Placement: rnic.FlushGlobal}}))
	if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCRemInvReqErr {
		t.Fatalf("FLUSH to a QP without the right: %+v", wc)
	}
}

// TestNonPostedUnderLoss: with frames lost and duplicated both ways, a
// run of ATOMIC WRITEs and FLUSHes completes in order (each answered
// again from its responder resource when its response is lost, never
// executed twice), and memory holds the last store of each word.
func TestNonPostedUnderLoss(t *testing.T) {
	p := flushPair(t, mem.Faults{Seed: 7, Loss: 0.1, Duplicate: 0.05})
	buf := make([]byte, 128)
	mr := must(p.pdb.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessFlushGlobal))
	const n = 200
	want := make([]uint64, 16)
	wrs := make([]rnic.SendWR, n)
	for i := range wrs {
		wrs[i] = rnic.SendWR{WRID: uint64(i), Flags: rnic.SendSignaled, RemoteAddr: mr.Addr() + 8*uint64(i%16), RKey: mr.RKey(),
			Opcode: rnic.WRAtomicWrite, CompareAdd: uint64(i + 1)}
		if i%3 == 2 {
			wrs[i].Opcode, wrs[i].Flush, wrs[i].RemoteAddr = rnic.WRFlush, rnic.FlushInfo{Length: 128, Placement: rnic.FlushGlobal}, mr.Addr()
		} else {
			want[i%16] = uint64(i + 1)
		}
	}
	must0(t, p.qpa.PostSend(wrs...))
	for i, wc := range waitWC(t, p.cqa, n, 60*time.Second) {
		if wc.Status != rnic.WCSuccess {
			if p.linkExhausted(t, wc) {
				return
			}
			t.Fatalf("completion %d: %+v", i, wc)
		}
		if wc.WRID != uint64(i) {
			t.Fatalf("completion %d is of work request %d", i, wc.WRID)
		}
	}
	got := make([]byte, 128)
	mr.ReadAt(got, 0)
	for w, v := range want {
		if g := binary.NativeEndian.Uint64(got[8*w:]); g != v {
			t.Errorf("word %d holds %d, want %d", w, g, v)
		}
	}
}
