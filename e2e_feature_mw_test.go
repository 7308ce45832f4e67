package rnic_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

// Memory windows of type 2 (IBTA §10.6.7, ibv_alloc_mw(3), ibv_post_send(3)
// IBV_WR_BIND_MW): bound by a BIND_MW work request on a QP, to which the
// window then belongs; the peer reaches the window's range, and only that
// range, with its rkey; SEND_WITH_INV (§9.4.1.1, o9-?) or LOCAL_INV
// invalidates it; a region with a bound window cannot be deregistered
// (C10-?? ibv_dereg_mr fails with EBUSY).

const winOff, winLen = 256, 1024

type mwSetup struct {
	p    *pair
	mem  *guarded // on b, with MW_BIND
	mw   *rnic.MW
	key0 uint32 // before the bind
	key  uint32 // after it
	src  *guarded
}

// bindMW binds a type 2 window over [winOff, winOff+winLen) of a fresh
// region on b, through b's QP.
func bindMW(t *testing.T, access rnic.Access) *mwSetup {
	t.Helper()
	s := &mwSetup{p: newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})}
	p := s.p
	s.mem = newGuarded(t, p.pdb, 4096, allAccess|rnic.AccessMWBind, 1)
	s.src = newGuarded(t, p.pda, 4096, rnic.AccessLocalWrite, 2)
	s.mw = must(p.pdb.AllocMW(rnic.MWType2))
	if s.mw.Type() != rnic.MWType2 {
		t.Fatalf("Type() = %v", s.mw.Type())
	}
	s.key0 = s.mw.RKey()
	s.key = rebind(t, s, access)
	return s
}

func rebind(t *testing.T, s *mwSetup, access rnic.Access) uint32 {
	t.Helper()
	old := s.mw.RKey()
	key := s.mw.NextRKey()
	if key == old || key>>8 != old>>8 {
		t.Fatalf("NextRKey %#x from %#x: want the same index with a new 8-bit variant", key, old)
	}
	must0(t, s.p.qpb.PostSend(rnic.SendWR{WRID: 900, Opcode: rnic.WRBindMW, Flags: rnic.SendSignaled,
		Bind: rnic.MWBindInfo{MW: old, NewKey: key, MR: s.mem.mr.LKey(), Addr: s.mem.mr.Addr() + winOff, Length: winLen, Access: access}}))
	wc := waitWC(t, s.p.cqb, 1, 5*time.Second)[0]
	if wc.WRID != 900 || wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCBindMW {
		t.Fatalf("BIND_MW completion %+v (%v)", wc, wc.Status)
	}
	return key
}

// write WRITEs n bytes of the source (pattern tag) at addr with rkey and
// returns the completion.
func (s *mwSetup) write(t *testing.T, wrid uint64, addr uint64, n int, rkey uint32, tag int) rnic.WC {
	t.Helper()
	copy(s.src.region(), pattern(tag, n))
	must0(t, s.p.qpa.PostSend(rnic.SendWR{WRID: wrid, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{s.src.mr.SGE(0, n)}, RemoteAddr: addr, RKey: rkey}))
	return waitWC(t, s.p.cqa, 1, 5*time.Second)[0]
}

func TestFeatureMemoryWindow(t *testing.T) {
	t.Run("write-read-through-window-then-send-with-inv", func(t *testing.T) {
		t.Parallel()
		s := bindMW(t, rnic.AccessRemoteWrite|rnic.AccessRemoteRead)
		p := s.p
		win := s.mem.mr.Addr() + winOff
		if err := s.mem.mr.Dereg(); err == nil {
			t.Fatal("Dereg of a region with a bound window succeeded")
		}
		// The whole window, then its last 24 bytes.
		if wc := s.write(t, 1, win, winLen, s.key, 1); wc.Status != rnic.WCSuccess {
			t.Fatalf("WRITE of the whole window: %+v (%v)", wc, wc.Status)
		}
		if wc := s.write(t, 2, win+winLen-24, 24, s.key, 2); wc.Status != rnic.WCSuccess {
			t.Fatalf("WRITE of the window's last bytes: %+v (%v)", wc, wc.Status)
		}
		want := bytes.Clone(s.mem.orig)
		copy(want[guardLen+winOff:], pattern(1, winLen))
		copy(want[guardLen+winOff+winLen-24:], pattern(2, 24))
		if i := firstDiff(s.mem.all, want); i >= 0 {
			t.Fatalf("memory after WRITEs through the window differs at %d (region offset %d)", i, i-guardLen)
		}
		// READ back through the window.
		rd := newGuarded(t, p.pda, winLen, rnic.AccessLocalWrite, 3)
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 3, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{rd.mr.SGE(0, winLen)}, RemoteAddr: win, RKey: s.key}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
			t.Fatalf("READ through the window: %+v", wc)
		}
		if !bytes.Equal(rd.region(), want[guardLen+winOff:guardLen+winOff+winLen]) {
			t.Fatal("READ through the window returned other bytes")
		}

		// SEND_WITH_INV invalidates the window at the responder.
		rb := newGuarded(t, p.pdb, 64, rnic.AccessLocalWrite, 4)
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 50, SGL: []rnic.SGE{rb.mr.SGE(0, 64)}}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 4, Opcode: rnic.WRSendWithInv, Flags: rnic.SendSignaled, InvalidateRKey: s.key,
			SGL: []rnic.SGE{s.src.mr.SGE(0, 10)}}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCSend {
			t.Fatalf("SEND_WITH_INV: %+v", wc)
		}
		rwc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
		if rwc.WRID != 50 || rwc.Status != rnic.WCSuccess || rwc.Flags&rnic.WCWithInv == 0 || rwc.InvalidatedRKey != s.key || rwc.ByteLen != 10 {
			t.Fatalf("receive of SEND_WITH_INV: %+v; want IBV_WC_WITH_INV and invalidated rkey %#x", rwc, s.key)
		}
		// The region is free to go once no window is bound...
		must0(t, s.mem.mr.Dereg())
		// ...and the invalidated rkey fails (IBTA C10-?: an invalid
		// window's R_Key is a remote access error).
		before := bytes.Clone(s.mem.all)
		if wc := s.write(t, 5, win, 16, s.key, 5); wc.Status != rnic.WCRemAccessErr {
			t.Fatalf("WRITE through the invalidated window: %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
		}
		if !bytes.Equal(before, s.mem.all) {
			t.Fatal("WRITE through the invalidated window changed memory")
		}
		waitQPEvent(t, p.b, p.qpb, rnic.EventQPAccessErr)
		must0(t, s.mw.Dealloc())
	})

	t.Run("local-inv-and-rebind", func(t *testing.T) {
		t.Parallel()
		s := bindMW(t, rnic.AccessRemoteWrite)
		p := s.p
		win := s.mem.mr.Addr() + winOff
		if wc := s.write(t, 1, win, 64, s.key, 1); wc.Status != rnic.WCSuccess {
			t.Fatalf("WRITE through the window: %+v", wc)
		}
		must0(t, p.qpb.PostSend(rnic.SendWR{WRID: 901, Opcode: rnic.WRLocalInv, Flags: rnic.SendSignaled, InvalidateRKey: s.key}))
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.WRID != 901 || wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCLocalInv {
			t.Fatalf("LOCAL_INV: %+v (%v)", wc, wc.Status)
		}
		// Invalidating it again: the key is no longer valid.
		must0(t, p.qpb.PostSend(rnic.SendWR{WRID: 902, Opcode: rnic.WRLocalInv, Flags: rnic.SendSignaled, InvalidateRKey: s.key}))
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.WRID != 902 || wc.Status == rnic.WCSuccess {
			t.Fatalf("second LOCAL_INV of the same key: %+v, want an error", wc)
		}
		// b's QP is now in ERR (a failed send WR is fatal on RC); reconnect it
		// to rebind: windows survive their QP's reset but rebinding needs a
		// working QP.
		waitState(t, p.qpb, rnic.QPSErr)
		must0(t, p.qpb.Modify(&rnic.QPAttr{State: rnic.QPSReset}, rnic.QPAttrState))
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSReset}, rnic.QPAttrState))
		connectRC(t, p.qpa, p.qpb, rnic.ConnParams{Timeout: 10})
		old := s.key
		s.key = rebind(t, s, rnic.AccessRemoteWrite)
		if wc := s.write(t, 2, win+100, 64, s.key, 2); wc.Status != rnic.WCSuccess {
			t.Fatalf("WRITE through the rebound window: %+v (%v)", wc, wc.Status)
		}
		if !bytes.Equal(s.mem.region()[winOff+100:winOff+164], pattern(2, 64)) {
			t.Fatal("WRITE through the rebound window did not land")
		}
		if err := s.mem.mr.Dereg(); err == nil {
			t.Fatal("Dereg with a bound window succeeded")
		}
		snap := bytes.Clone(s.mem.all)
		if wc := s.write(t, 3, win, 16, old, 3); wc.Status != rnic.WCRemAccessErr {
			t.Fatalf("WRITE with the window's previous rkey: %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
		}
		if !bytes.Equal(snap, s.mem.all) {
			t.Fatal("WRITE with a stale window key changed memory")
		}
		must0(t, s.mw.Dealloc())
		must0(t, s.mem.mr.Dereg())
	})

	// Accesses that the window refuses: REM_ACCESS_ERR, memory untouched.
	type wcase struct {
		name   string
		access rnic.Access
		op     rnic.WROpcode
		off    int64 // from the window's start
		n      int
		key    func(s *mwSetup) uint32
	}
	cur := func(s *mwSetup) uint32 { return s.key }
	cases := []wcase{
		{"past-end", rnic.AccessRemoteWrite, rnic.WRRDMAWrite, winLen - 8, 16, cur},
		{"before-start", rnic.AccessRemoteWrite, rnic.WRRDMAWrite, -8, 16, cur},
		{"beyond-window-inside-mr", rnic.AccessRemoteWrite, rnic.WRRDMAWrite, winLen, 8, cur},
		{"read-through-write-only", rnic.AccessRemoteWrite, rnic.WRRDMARead, 0, 16, cur},
		{"write-through-read-only", rnic.AccessRemoteRead, rnic.WRRDMAWrite, 0, 16, cur},
		{"pre-bind-key", rnic.AccessRemoteWrite, rnic.WRRDMAWrite, 0, 16, func(s *mwSetup) uint32 { return s.key0 }},
		{"mr-key-is-not-window-key", rnic.AccessRemoteWrite, rnic.WRRDMAWrite, 0, 16, func(s *mwSetup) uint32 { return s.key ^ 0x80 }},
	}
	for _, c := range cases {
		t.Run("refused/"+c.name, func(t *testing.T) {
			t.Parallel()
			s := bindMW(t, c.access)
			p := s.p
			local := newGuarded(t, p.pda, 64, rnic.AccessLocalWrite, 5)
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: c.op, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{local.mr.SGE(0, c.n)}, RemoteAddr: uint64(int64(s.mem.mr.Addr()+winOff) + c.off), RKey: c.key(s)}))
			wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
			if wc.Status != rnic.WCRemAccessErr {
				t.Fatalf("completion %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
			}
			s.mem.unchanged(t, "region under the window")
			local.unchanged(t, "local buffer")
			waitState(t, p.qpb, rnic.QPSErr)
			waitQPEvent(t, p.b, p.qpb, rnic.EventQPAccessErr)
		})
	}

	t.Run("refused/other-qp", func(t *testing.T) {
		// A type 2 window belongs to the QP that bound it (IBTA
		// §10.6.7.2.2): the same rkey arriving on another QP of the same
		// PD is a remote access error.
		t.Parallel()
		s := bindMW(t, rnic.AccessRemoteWrite)
		p := s.p
		qa2 := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		qb2 := must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		connectRC(t, qa2, qb2, rnic.ConnParams{Timeout: 10})
		must0(t, qa2.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{s.src.mr.SGE(0, 16)}, RemoteAddr: s.mem.mr.Addr() + winOff, RKey: s.key}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCRemAccessErr || wc.QPNum != qa2.QPN() {
			t.Fatalf("WRITE through another QP: %+v (%v), want REM_ACCESS_ERR", wc, wc.Status)
		}
		s.mem.unchanged(t, "region under the window")
		// The binding QP still reaches it.
		if wc := s.write(t, 2, s.mem.mr.Addr()+winOff, 16, s.key, 1); wc.Status != rnic.WCSuccess {
			t.Fatalf("WRITE through the binding QP: %+v", wc)
		}
	})

	// Binds the NIC must refuse: IBV_WC_MW_BIND_ERR.
	type bcase struct {
		name   string
		mrAcc  rnic.Access
		access rnic.Access
		off, n uint64
	}
	for _, c := range []bcase{
		{"mr-without-mw-bind", allAccess, rnic.AccessRemoteWrite, 0, 64},
		{"range-past-mr", allAccess | rnic.AccessMWBind, rnic.AccessRemoteWrite, 4000, 200},
		{"remote-write-without-local-write", rnic.AccessRemoteRead | rnic.AccessMWBind, rnic.AccessRemoteWrite, 0, 64},
	} {
		t.Run("bind-refused/"+c.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
			m := newGuarded(t, p.pdb, 4096, c.mrAcc, 1)
			mw := must(p.pdb.AllocMW(rnic.MWType2))
			old := mw.RKey()
			key := mw.NextRKey()
			must0(t, p.qpb.PostSend(rnic.SendWR{WRID: 7, Opcode: rnic.WRBindMW, Flags: rnic.SendSignaled,
				Bind: rnic.MWBindInfo{MW: old, NewKey: key, MR: m.mr.LKey(), Addr: m.mr.Addr() + c.off, Length: c.n, Access: c.access}}))
			wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
			if wc.WRID != 7 || wc.Status != rnic.WCMWBindErr {
				t.Fatalf("bind: %+v (%v), want MW_BIND_ERR", wc, wc.Status)
			}
			must0(t, m.mr.Dereg()) // nothing bound
			must0(t, mw.Dealloc())
		})
	}

	t.Run("dereg-busy-is-ErrBusy", func(t *testing.T) {
		t.Parallel()
		s := bindMW(t, rnic.AccessRemoteWrite)
		err := s.mem.mr.Dereg()
		if !errors.Is(err, rnic.ErrBusy) {
			t.Fatalf("Dereg with a bound window: %v; want an error wrapping rnic.ErrBusy", err)
		}
	})
}
