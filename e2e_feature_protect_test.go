package rnic_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/rnic/rnic"
)

// Memory protection, end to end. IBTA Vol 1 §9.7.5.1.3 / §9.9.3.1.2: a
// request that fails the responder's R_Key, bounds, rights or PD checks
// (§10.6.3 "Memory Regions", C10-?? "access checks") is NAKed with "Remote
// Access Error" and the responder QP goes to the Error state with a "local
// access violation work queue error" async event; an opcode the QP's own
// access flags forbid, or a misaligned atomic (§9.4.5: atomics need an
// 8-byte aligned VA), is NAKed with "Invalid Request" (QP to Error,
// "invalid request local work queue error"). The requester completes the
// WR with IBV_WC_REM_ACCESS_ERR or IBV_WC_REM_INV_REQ_ERR, moves to Error
// (§10.7.3.1: an RC send queue error is fatal to the QP) and flushes every
// later WR with IBV_WC_WR_FLUSH_ERR. The target memory is never touched.

type protTarget struct {
	addr   uint64
	length int
	rkey   uint32
}

type protCase struct {
	name     string
	op       rnic.WROpcode
	mrAccess rnic.Access // rights of the target MR (allAccess if 0)
	qpAccess rnic.Access // the responder QP's access flags (all if 0)
	otherPD  bool        // register the target in a PD other than the responder QP's
	mod      func(t testing.TB, g *guarded, tg *protTarget)
	want     rnic.WCStatus
	event    rnic.EventType
}

func protCases() []protCase {
	var cs []protCase
	ops := []struct {
		name  string
		op    rnic.WROpcode
		right rnic.Access
	}{
		{"write", rnic.WRRDMAWrite, rnic.AccessRemoteWrite},
		{"write-imm", rnic.WRRDMAWriteWithImm, rnic.AccessRemoteWrite},
		{"read", rnic.WRRDMARead, rnic.AccessRemoteRead},
		{"fetch-add", rnic.WRAtomicFetchAndAdd, rnic.AccessRemoteAtomic},
		{"cmp-swap", rnic.WRAtomicCmpAndSwp, rnic.AccessRemoteAtomic},
	}
	acc := func(name string, op rnic.WROpcode) protCase {
		return protCase{name: name, op: op, want: rnic.WCRemAccessErr, event: rnic.EventQPAccessErr}
	}
	for _, o := range ops {
		c := acc(o.name+"/wrong-rkey", o.op)
		c.mod = func(_ testing.TB, g *guarded, tg *protTarget) { tg.rkey = g.mr.RKey() ^ 0x5a5a00 }
		cs = append(cs, c)

		c = acc(o.name+"/rkey-variant", o.op) // right index, stale 8-bit key variant
		c.mod = func(_ testing.TB, g *guarded, tg *protTarget) { tg.rkey = g.mr.RKey() ^ 0x01 }
		cs = append(cs, c)

		c = acc(o.name+"/deregistered-mr", o.op)
		c.mod = func(t testing.TB, g *guarded, tg *protTarget) { must0(t, g.mr.Dereg()) }
		cs = append(cs, c)

		c = acc(o.name+"/starts-before", o.op)
		c.mod = func(_ testing.TB, g *guarded, tg *protTarget) { tg.addr = g.mr.Addr() - 8 }
		cs = append(cs, c)

		c = acc(o.name+"/ends-after", o.op)
		c.mod = func(_ testing.TB, g *guarded, tg *protTarget) {
			tg.addr = g.mr.Addr() + uint64(g.mr.Len()) - 8
			if tg.length == 8 { // atomics: the next 8 bytes
				tg.addr += 8
			}
		}
		cs = append(cs, c)

		c = acc(o.name+"/address-wraps", o.op)
		c.mod = func(_ testing.TB, g *guarded, tg *protTarget) { tg.addr = ^uint64(0) - 7 }
		cs = append(cs, c)

		if o.op != rnic.WRAtomicFetchAndAdd && o.op != rnic.WRAtomicCmpAndSwp {
			c = acc(o.name+"/longer-than-mr", o.op)
			c.mod = func(_ testing.TB, g *guarded, tg *protTarget) { tg.length = g.mr.Len() + 1 }
			cs = append(cs, c)
		}

		c = acc(o.name+"/mr-without-right", o.op)
		c.mrAccess = allAccess &^ o.right
		cs = append(cs, c)

		c = acc(o.name+"/mr-in-other-pd", o.op)
		c.otherPD = true
		cs = append(cs, c)

		cs = append(cs, protCase{name: o.name + "/qp-without-right", op: o.op,
			qpAccess: allAccess &^ o.right, want: rnic.WCRemInvReqErr, event: rnic.EventQPReqErr})

		if o.op == rnic.WRAtomicFetchAndAdd || o.op == rnic.WRAtomicCmpAndSwp {
			for _, off := range []uint64{1, 4} {
				c := protCase{name: fmt.Sprintf("%s/misaligned-%d", o.name, off), op: o.op,
					want: rnic.WCRemInvReqErr, event: rnic.EventQPReqErr}
				c.mod = func(_ testing.TB, g *guarded, tg *protTarget) { tg.addr = g.mr.Addr() + off }
				cs = append(cs, c)
			}
		}
	}
	return cs
}

func TestFeatureRemoteProtection(t *testing.T) {
	for _, c := range protCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			qpAcc := c.qpAccess
			if qpAcc == 0 {
				qpAcc = allAccess
			}
			p := newPairX(t, xopts{pairOpts: pairOpts{conn: rnic.ConnParams{Timeout: 10, Access: qpAcc}}})
			pd := p.pdb
			if c.otherPD {
				pd = must(p.b.AllocPD())
			}
			mrAcc := c.mrAccess
			if mrAcc == 0 {
				mrAcc = allAccess
			}
			g := newGuarded(t, pd, 256, mrAcc, 1)
			local := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 2)
			atomic := c.op == rnic.WRAtomicFetchAndAdd || c.op == rnic.WRAtomicCmpAndSwp
			tg := protTarget{addr: g.mr.Addr() + 16, length: 16, rkey: g.mr.RKey()}
			if atomic {
				tg.length = 8
			}
			if c.mod != nil {
				c.mod(t, g, &tg)
			}
			if c.op == rnic.WRRDMAWriteWithImm {
				must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 500}))
			}
			wr := rnic.SendWR{WRID: 1, Opcode: c.op, Flags: rnic.SendSignaled, SGL: []rnic.SGE{local.mr.SGE(0, min(tg.length, 256))},
				RemoteAddr: tg.addr, RKey: tg.rkey, CompareAdd: 0x0101010101010101, Swap: 0xdeadbeefdeadbeef, ImmData: 7}
			if tg.length > 256 { // longer than the local buffer: gather it from two SGEs of the same region
				wr.SGL = []rnic.SGE{local.mr.SGE(0, 256), local.mr.SGE(0, tg.length-256)}
			}
			if c.op == rnic.WRAtomicCmpAndSwp {
				// Make the compare succeed if it were executed.
				wr.CompareAdd = binary.NativeEndian.Uint64(g.region()[16:])
			}
			must0(t, p.qpa.PostSend(wr))
			wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
			if wc.WRID != 1 || wc.Status != c.want {
				t.Fatalf("completion %+v (%v), want WRID 1 status %v", wc, wc.Status, c.want)
			}
			g.unchanged(t, "target")
			local.unchanged(t, "requester's local buffer")

			// Requester: QP in ERR, later WRs flushed.
			waitState(t, p.qpa, rnic.QPSErr)
			flushCheck(t, p.qpa, p.cqa, 2, local.mr, g.mr)
			wantCtr := "req_remote_access_errors"
			if c.want == rnic.WCRemInvReqErr {
				wantCtr = "req_remote_invalid_request"
			}
			if n := qpCounter(t, p.qpa, wantCtr); n != 1 {
				t.Errorf("requester %s = %d, want 1", wantCtr, n)
			}
			if n := qpCounter(t, p.qpa, "req_cqe_error"); n != 1 {
				t.Errorf("requester req_cqe_error = %d, want 1", n)
			}

			// Responder: QP in ERR with the matching affiliated event.
			waitState(t, p.qpb, rnic.QPSErr)
			waitQPEvent(t, p.b, p.qpb, c.event)
			if c.op == rnic.WRRDMAWriteWithImm {
				// The receive WQE the WRITE_WITH_IMM would have consumed
				// completes in error (flushed by the move to ERR, or with
				// the access error), never as a success.
				rwc := waitWC(t, p.cqb, 1, 3*time.Second)[0]
				if rwc.WRID != 500 || rwc.Status == rnic.WCSuccess {
					t.Errorf("responder's receive WQE completed as %+v, want an error", rwc)
				}
			}
			g.unchanged(t, "target after the flush")
		})
	}
}

// TestFeatureLocalProtection: an SGE whose lkey is invalid, of another PD,
// or that reaches outside its MR fails the WR locally with
// IBV_WC_LOC_PROT_ERR (IBTA §10.6.3.1, C10-?: the local L_Key check), and
// nothing reaches the peer. A receive WQE that fails the check on the
// responder completes with LOC_PROT_ERR there, and the requester gets
// IBV_WC_REM_OP_ERR (§9.9.3.1.2: responder local errors are NAKed as
// "Remote Operational Error").
func TestFeatureLocalProtection(t *testing.T) {
	type lcase struct {
		name string
		op   rnic.WROpcode
		sge  func(t testing.TB, p *pair, l *guarded) rnic.SGE
	}
	badKey := func(_ testing.TB, _ *pair, l *guarded) rnic.SGE {
		s := l.mr.SGE(0, 16)
		s.LKey ^= 0x3c3c00
		return s
	}
	variant := func(_ testing.TB, _ *pair, l *guarded) rnic.SGE {
		s := l.mr.SGE(0, 16)
		s.LKey ^= 1
		return s
	}
	dereg := func(t testing.TB, _ *pair, l *guarded) rnic.SGE {
		s := l.mr.SGE(0, 16)
		must0(t, l.mr.Dereg())
		return s
	}
	past := func(_ testing.TB, _ *pair, l *guarded) rnic.SGE { return l.mr.SGE(l.mr.Len()-8, 16) }
	before := func(_ testing.TB, _ *pair, l *guarded) rnic.SGE {
		s := l.mr.SGE(0, 16)
		s.Addr -= 4
		return s
	}
	otherPD := func(t testing.TB, p *pair, l *guarded) rnic.SGE {
		o := newGuarded(t, must(p.a.AllocPD()), 64, rnic.AccessLocalWrite, 9)
		return o.mr.SGE(0, 16)
	}
	var cases []lcase
	for _, op := range []rnic.WROpcode{rnic.WRRDMAWrite, rnic.WRSend, rnic.WRRDMARead} {
		for _, s := range []struct {
			n string
			f func(testing.TB, *pair, *guarded) rnic.SGE
		}{{"bad-lkey", badKey}, {"lkey-variant", variant}, {"deregistered", dereg}, {"past-end", past}, {"before-start", before}, {"other-pd", otherPD}} {
			cases = append(cases, lcase{name: fmt.Sprintf("%v/%s", op, s.n), op: op, sge: s.f})
		}
	}
	// A READ's data lands in local memory: the SGE's MR needs local write.
	cases = append(cases, lcase{name: "RDMA_READ/mr-without-local-write", op: rnic.WRRDMARead,
		sge: func(t testing.TB, p *pair, l *guarded) rnic.SGE {
			return newGuarded(t, p.pda, 64, rnic.AccessRemoteRead, 8).mr.SGE(0, 16)
		}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
			remote := newGuarded(t, p.pdb, 256, allAccess, 3)
			local := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 4)
			rbuf := newGuarded(t, p.pdb, 256, rnic.AccessLocalWrite, 5)
			if c.op == rnic.WRSend {
				must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 77, SGL: []rnic.SGE{rbuf.mr.SGE(0, 256)}}))
			}
			sge := c.sge(t, p, local)
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: c.op, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{sge}, RemoteAddr: remote.mr.Addr(), RKey: remote.mr.RKey()}))
			wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
			if wc.WRID != 1 || wc.Status != rnic.WCLocProtErr {
				t.Fatalf("completion %+v (%v), want LOC_PROT_ERR", wc, wc.Status)
			}
			waitState(t, p.qpa, rnic.QPSErr)
			remote.unchanged(t, "remote memory")
			rbuf.unchanged(t, "remote receive buffer")
			if local.mr.Dereg() == nil { // still registered: it must be untouched
				local.unchanged(t, "local buffer")
			}
			// A READ that fails on placement has reached the peer (that
			// is fine); the others must fail before anything is sent.
			if c.op != rnic.WRRDMARead {
				if n := counter(t, p.b, "rx_packets"); n != 0 {
					t.Errorf("the peer received %d packets of a WR that failed local protection", n)
				}
			}
			if st := p.qpb.State(); st != rnic.QPSRTS {
				t.Errorf("responder QP went to %v on the requester's local error", st)
			}
		})
	}

	t.Run("receive-wqe-bad-lkey", func(t *testing.T) {
		t.Parallel()
		p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
		src := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 6)
		rbuf := newGuarded(t, p.pdb, 256, rnic.AccessLocalWrite, 7)
		bad := rbuf.mr.SGE(0, 256)
		bad.LKey ^= 0x777700
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 77, SGL: []rnic.SGE{bad}}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 100)}}))
		rwc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
		if rwc.WRID != 77 || rwc.Status != rnic.WCLocProtErr {
			t.Errorf("receive completion %+v (%v), want LOC_PROT_ERR", rwc, rwc.Status)
		}
		wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
		if wc.WRID != 1 || wc.Status != rnic.WCRemOpErr {
			t.Errorf("send completion %+v (%v), want REM_OP_ERR", wc, wc.Status)
		}
		rbuf.unchanged(t, "receive buffer")
		waitState(t, p.qpa, rnic.QPSErr)
		waitState(t, p.qpb, rnic.QPSErr)
	})

	t.Run("receive-wqe-too-small", func(t *testing.T) {
		// IBTA §9.9.3.1.2 / C9-?: a SEND longer than the receive WQE
		// is a responder local length error: LOC_LEN_ERR on the
		// receive, NAK "Invalid Request" → REM_INV_REQ_ERR.
		t.Parallel()
		p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
		src := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 6)
		rbuf := newGuarded(t, p.pdb, 256, rnic.AccessLocalWrite, 7)
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 77, SGL: []rnic.SGE{rbuf.mr.SGE(0, 99)}}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 100)}}))
		rwc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
		if rwc.WRID != 77 || rwc.Status != rnic.WCLocLenErr {
			t.Errorf("receive completion %+v (%v), want LOC_LEN_ERR", rwc, rwc.Status)
		}
		wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
		if wc.WRID != 1 || wc.Status != rnic.WCRemInvReqErr {
			t.Errorf("send completion %+v (%v), want REM_INV_REQ_ERR", wc, wc.Status)
		}
		rbuf.guardsIntact(t, "receive buffer")
		if i := firstDiff(rbuf.region()[99:], rbuf.orig[guardLen+99:len(rbuf.orig)-guardLen]); i >= 0 {
			t.Errorf("receive buffer written past the receive WQE's 99 bytes (at %d)", 99+i)
		}
	})
}

// TestFeatureRemoteProtectionWholeMessage: the responder validates the
// whole range a WRITE's RETH names (VA, DMA length) when the first packet
// arrives, so a multi-packet WRITE that runs past the end of its region is
// refused before any of it is placed (IBTA §9.7.4.1.3 / C9-?: "the
// responder shall verify the R_Key, VA and length of the request"; Linux
// rxe's check_rkey checks va+offset..resid on the first packet). The
// target memory is byte-identical afterwards.
func TestFeatureRemoteProtectionWholeMessage(t *testing.T) {
	for _, op := range []rnic.WROpcode{rnic.WRRDMAWrite, rnic.WRRDMAWriteWithImm} {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			p := newPair(t, pairOpts{mtu: rnic.MTU1024, conn: rnic.ConnParams{Timeout: 10}})
			g := newGuarded(t, p.pdb, 4096, allAccess, 1)
			src := newGuarded(t, p.pda, 4096, rnic.AccessLocalWrite, 2)
			must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1}))
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: op, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{src.mr.SGE(0, 3072)}, RemoteAddr: g.mr.Addr() + 1032, RKey: g.mr.RKey()}))
			if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCRemAccessErr {
				t.Fatalf("completion %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
			}
			g.unchanged(t, "target of a WRITE that ends 8 bytes past its region")
		})
	}
}

// TestFeatureVirtualAddressing: the bounds check works in the address
// space the region was registered with: its IOVA (ibv_reg_mr_iova) or,
// with IBV_ACCESS_ZERO_BASED, offsets from 0.
func TestFeatureVirtualAddressing(t *testing.T) {
	cases := []struct {
		name   string
		reg    func(pd *rnic.PD, b []byte) (*rnic.MR, error)
		base   uint64 // the VA of byte 0
		off    int64
		n      int
		wantOK bool
	}{
		{"zero-based/inside", func(pd *rnic.PD, b []byte) (*rnic.MR, error) { return pd.RegMR(b, allAccess|rnic.AccessZeroBased) }, 0, 100, 100, true},
		{"zero-based/last-byte", func(pd *rnic.PD, b []byte) (*rnic.MR, error) { return pd.RegMR(b, allAccess|rnic.AccessZeroBased) }, 0, 999, 1, true},
		{"zero-based/past-end", func(pd *rnic.PD, b []byte) (*rnic.MR, error) { return pd.RegMR(b, allAccess|rnic.AccessZeroBased) }, 0, 996, 8, false},
		{"iova/inside", func(pd *rnic.PD, b []byte) (*rnic.MR, error) { return pd.RegMRIOVA(b, 0x7000_0000, allAccess) }, 0x7000_0000, 900, 100, true},
		{"iova/below", func(pd *rnic.PD, b []byte) (*rnic.MR, error) { return pd.RegMRIOVA(b, 0x7000_0000, allAccess) }, 0x7000_0000, -8, 16, false},
		{"iova/buffer-address-is-not-the-iova", func(pd *rnic.PD, b []byte) (*rnic.MR, error) { return pd.RegMRIOVA(b, 0x7000_0000, allAccess) }, 0, -1, 16, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
			all := make([]byte, 1000+2*guardLen)
			orig := bytes.Clone(all)
			mr := must(c.reg(p.pdb, all[guardLen:guardLen+1000]))
			if mr.Addr() != c.base && c.off >= 0 {
				t.Fatalf("Addr() = %#x, want %#x", mr.Addr(), c.base)
			}
			addr := uint64(int64(c.base) + c.off)
			if c.off == -1 { // the buffer's own address, which peers must not use
				addr = uint64(uintptr(unsafe.Pointer(&all[guardLen])))
			}
			src := newGuarded(t, p.pda, 128, rnic.AccessLocalWrite, 3)
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{src.mr.SGE(0, c.n)}, RemoteAddr: addr, RKey: mr.RKey()}))
			wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
			want := orig
			if c.wantOK {
				want = bytes.Clone(orig)
				copy(want[guardLen+int(c.off):], src.region()[:c.n])
				if wc.Status != rnic.WCSuccess {
					t.Fatalf("completion %+v (%v), want success", wc, wc.Status)
				}
			} else if wc.Status != rnic.WCRemAccessErr {
				t.Fatalf("completion %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
			}
			if i := firstDiff(all, want); i >= 0 {
				t.Fatalf("memory differs at byte %d of the region", i-guardLen)
			}
		})
	}
}
