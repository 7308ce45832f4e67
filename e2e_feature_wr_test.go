package rnic_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// Work request features of ibv_post_send(3) / ibv_post_recv(3).

// TestFeatureMultiSGE: a work request's SGL is gathered (send side) or
// scattered (receive side, READ responses) in order across its SGEs, which
// may belong to different MRs (IBTA §10.7.2.1 / §9.7.5.1.1), across packet
// boundaries.
func TestFeatureMultiSGE(t *testing.T) {
	sendLens := []int{100, 3000, 1, 5000} // 8101 bytes, crossing 1 KiB packet boundaries inside SGEs
	recvLens := []int{2000, 7, 4000, 2200}
	total := 0
	for _, n := range sendLens {
		total += n
	}
	mk := func(t *testing.T, pd *rnic.PD, lens []int, seed byte, acc rnic.Access) ([]*guarded, []rnic.SGE) {
		var gs []*guarded
		var sgl []rnic.SGE
		for i, n := range lens {
			g := newGuarded(t, pd, n+16, acc, seed+byte(i)*17)
			gs = append(gs, g)
			sgl = append(sgl, g.mr.SGE(8, n)) // not at the MR's start
		}
		return gs, sgl
	}
	concat := func(gs []*guarded, lens []int, n int) []byte {
		var b []byte
		for i, g := range gs {
			b = append(b, g.region()[8:8+lens[i]]...)
		}
		return b[:n]
	}
	// rest checks that every byte of the SGL past the first n is untouched.
	rest := func(t *testing.T, gs []*guarded, lens []int, n int) {
		t.Helper()
		for i, g := range gs {
			g.guardsIntact(t, "SGE buffer")
			r := g.region()
			o := g.orig[guardLen : len(g.orig)-guardLen]
			if r[0] != o[0] || !bytes.Equal(r[:8], o[:8]) || !bytes.Equal(r[8+lens[i]:], o[8+lens[i]:]) {
				t.Errorf("SGE %d: bytes outside the SGE changed", i)
			}
			used := min(max(n, 0), lens[i])
			if !bytes.Equal(r[8+used:8+lens[i]], o[8+used:8+lens[i]]) {
				t.Errorf("SGE %d: bytes past the message's end changed", i)
			}
			n -= lens[i]
		}
	}
	for _, op := range []rnic.WROpcode{rnic.WRSend, rnic.WRRDMAWrite, rnic.WRRDMARead} {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			p := newPair(t, pairOpts{mtu: rnic.MTU1024})
			src, ssgl := mk(t, p.pda, sendLens, 1, allAccess)
			var want []byte
			switch op {
			case rnic.WRSend:
				dst, rsgl := mk(t, p.pdb, recvLens, 100, rnic.AccessLocalWrite)
				must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 5, SGL: rsgl}))
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: op, Flags: rnic.SendSignaled, SGL: ssgl}))
				waitWC(t, p.cqa, 1, 5*time.Second)
				wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
				if wc.Status != rnic.WCSuccess || wc.ByteLen != uint32(total) {
					t.Fatalf("receive: %+v", wc)
				}
				want = concat(src, sendLens, total)
				if !bytes.Equal(concat(dst, recvLens, total), want) {
					t.Fatal("4-SGE SEND into a 4-SGE receive: data differs")
				}
				rest(t, dst, recvLens, total)
			case rnic.WRRDMAWrite:
				dst := newGuarded(t, p.pdb, total, allAccess, 50)
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: op, Flags: rnic.SendSignaled, SGL: ssgl, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}))
				if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
					t.Fatalf("WRITE: %+v", wc)
				}
				if !bytes.Equal(dst.region(), concat(src, sendLens, total)) {
					t.Fatal("4-SGE WRITE: data differs")
				}
				dst.guardsIntact(t, "WRITE target")
			case rnic.WRRDMARead:
				remote := newGuarded(t, p.pdb, total, allAccess, 60)
				dst, rsgl := mk(t, p.pda, recvLens, 70, rnic.AccessLocalWrite)
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: op, Flags: rnic.SendSignaled, SGL: rsgl[:3], RemoteAddr: remote.mr.Addr(), RKey: remote.mr.RKey()}))
				n := recvLens[0] + recvLens[1] + recvLens[2]
				if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.ByteLen != uint32(n) {
					t.Fatalf("READ: %+v", wc)
				}
				if !bytes.Equal(concat(dst[:3], recvLens, n), remote.region()[:n]) {
					t.Fatal("READ into 3 SGEs: data differs")
				}
				rest(t, dst, recvLens, n)
				remote.unchanged(t, "READ source")
			}
			for _, g := range src {
				g.unchanged(t, "source")
			}
		})
	}
}

// TestFeatureInline: IBV_SEND_INLINE copies the data into the WQE at post
// time, so the buffer may be reused as soon as ibv_post_send returns
// (ibv_post_send(3)). The SEND here is held back by RNR NAKs until after the
// buffer has been overwritten, and its retransmissions still carry the
// original bytes.
func TestFeatureInline(t *testing.T) {
	checkGoroutines(t)
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 12, RNRRetry: 7, MinRNRTimer: 8}})
		src := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 1)
		dst := newGuarded(t, p.pdb, 256, allAccess, 2)
		orig := bytes.Clone(src.region()[:64])
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled | rnic.SendInline,
			SGL: []rnic.SGE{src.mr.SGE(0, 20), src.mr.SGE(20, 44)}}))
		for i := range 64 {
			src.region()[i] = 0xEE
		}
		// RNR NAKs: the SEND is sent again after the change. (In the
		// bubble the wait costs no wall time and a loaded machine cannot
		// outlast it.)
		for deadline := time.Now().Add(5 * time.Second); qpCounter(t, p.qpa, "rnr_nak_retry_err") == 0; {
			if time.Now().After(deadline) {
				t.Fatal("no RNR NAK in 5 s: the SEND was not held back")
			}
			time.Sleep(time.Millisecond)
		}
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 2, SGL: []rnic.SGE{dst.mr.SGE(0, 256)}}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
			t.Fatalf("inline SEND: %+v", wc)
		}
		wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
		if wc.Status != rnic.WCSuccess || wc.ByteLen != 64 {
			t.Fatalf("receive: %+v", wc)
		}
		if !bytes.Equal(dst.region()[:64], orig) {
			t.Fatalf("the receiver got the buffer's bytes after PostSend returned, not those at post time:\n% x\nwant\n% x", dst.region()[:64], orig)
		}

		// Inline WRITE: the same rule.
		copy(src.region(), pattern(7, 64))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 3, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled | rnic.SendInline,
			SGL: []rnic.SGE{src.mr.SGE(0, 64)}, RemoteAddr: dst.mr.Addr() + 100, RKey: dst.mr.RKey()}))
		clear(src.region()[:64])
		waitWC(t, p.cqa, 1, 5*time.Second)
		if !bytes.Equal(dst.region()[100:164], pattern(7, 64)) {
			t.Fatal("inline WRITE: data differs")
		}
		dst.guardsIntact(t, "target")

		// Limits: more than max_inline_data, and inline on an opcode without
		// payload, are refused at post time.
		var we *rnic.WRError
		err := p.qpa.PostSend(rnic.SendWR{WRID: 4, Opcode: rnic.WRSend, Flags: rnic.SendInline, SGL: []rnic.SGE{src.mr.SGE(0, 65)}})
		if !errors.As(err, &we) || we.Index != 0 || !strings.Contains(err.Error(), "max_inline_data") {
			t.Errorf("65 inline bytes with max_inline_data 64: %v", err)
		}
		err = p.qpa.PostSend(rnic.SendWR{WRID: 5, Opcode: rnic.WRRDMARead, Flags: rnic.SendInline, SGL: []rnic.SGE{src.mr.SGE(0, 8)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()})
		if !errors.As(err, &we) || we.Index != 0 {
			t.Errorf("inline RDMA READ: %v, want a WRError", err)
		}
		quiet(t, p.cqa, 10*time.Millisecond, "refused WRs")
	})
}

// TestFeatureUnsignaled: without IBV_SEND_SIGNALED (and without sq_sig_all)
// a successful WR produces no completion; a failed one always does
// (ibv_post_send(3), IBTA §10.8.3 C10-?). With sq_sig_all every WR does.
func TestFeatureUnsignaled(t *testing.T) {
	t.Run("selective", func(t *testing.T) {
		t.Parallel()
		p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
		src := newGuarded(t, p.pda, 1000, rnic.AccessLocalWrite, 1)
		dst := newGuarded(t, p.pdb, 1000, allAccess, 2)
		var wrs []rnic.SendWR
		for i := 0; i < 10; i++ {
			wr := rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, SGL: []rnic.SGE{src.mr.SGE(i*100, 100)},
				RemoteAddr: dst.mr.Addr() + uint64(i*100), RKey: dst.mr.RKey()}
			if i == 9 {
				wr.Flags = rnic.SendSignaled
			}
			wrs = append(wrs, wr)
		}
		must0(t, p.qpa.PostSend(wrs...))
		wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]
		if wc.WRID != 9 || wc.Status != rnic.WCSuccess {
			t.Fatalf("the one signaled WR: %+v", wc)
		}
		quiet(t, p.cqa, 20*time.Millisecond, "9 unsignaled WRITEs")
		if !bytes.Equal(dst.region(), src.region()) {
			t.Fatal("unsignaled WRITEs did not all land")
		}
		// An unsignaled WR that fails still completes.
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 77, Opcode: rnic.WRRDMAWrite, SGL: []rnic.SGE{src.mr.SGE(0, 8)},
			RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey() ^ 0x10100}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.WRID != 77 || wc.Status != rnic.WCRemAccessErr {
			t.Fatalf("unsignaled failing WR: %+v (%v), want a REM_ACCESS_ERR completion", wc, wc.Status)
		}
	})
	t.Run("sq_sig_all", func(t *testing.T) {
		t.Parallel()
		p := newPairX(t, xopts{initA: func(a *rnic.QPInitAttr) { a.SigAll = true }})
		if _, ia := query(t, p.qpa); !ia.SigAll {
			t.Error("Query does not report sq_sig_all")
		}
		src := newGuarded(t, p.pda, 100, allAccess, 1)
		dst := newGuarded(t, p.pdb, 100, allAccess, 2)
		for i := 0; i < 5; i++ {
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, SGL: []rnic.SGE{src.mr.SGE(i*20, 20)},
				RemoteAddr: dst.mr.Addr() + uint64(i*20), RKey: dst.mr.RKey()}))
		}
		for i, wc := range waitWC(t, p.cqa, 5, 5*time.Second) {
			if wc.WRID != uint64(i) || wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCRDMAWrite {
				t.Fatalf("completion %d: %+v", i, wc)
			}
		}
		// b's QP is not sq_sig_all.
		must0(t, p.qpb.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, SGL: []rnic.SGE{dst.mr.SGE(0, 8)}, RemoteAddr: src.mr.Addr(), RKey: src.mr.RKey()}))
		quiet(t, p.cqb, 20*time.Millisecond, "unsignaled WR on a QP without sq_sig_all")
	})
}

// TestFeatureFence: IBV_SEND_FENCE makes a WR wait until every earlier
// READ and atomic has completed (IBTA §10.8.3.3 "fence indicator"). A
// WRITE to the location an earlier READ reads may otherwise be executed
// by the responder before it gathers the READ's data (§9.5 ordering
// rules); with the fence the READ always returns the old bytes.
func TestFeatureFence(t *testing.T) {
	t.Parallel()
	const n = 64 << 10
	p := newPair(t, pairOpts{})
	remote := newGuarded(t, p.pdb, n, allAccess, 1)
	old := bytes.Clone(remote.region())
	readBuf := newGuarded(t, p.pda, n, rnic.AccessLocalWrite, 2)
	newData := newGuarded(t, p.pda, n, rnic.AccessLocalWrite, 3)
	run := func(fence bool) (overtaken int) {
		for i := 0; i < 20; i++ {
			copy(remote.region(), old)
			clear(readBuf.region())
			wflags := rnic.SendSignaled
			if fence {
				wflags |= rnic.SendFence
			}
			must0(t, p.qpa.PostSend(
				rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled, SGL: []rnic.SGE{readBuf.mr.SGE(0, n)},
					RemoteAddr: remote.mr.Addr(), RKey: remote.mr.RKey()},
				rnic.SendWR{WRID: 2, Opcode: rnic.WRRDMAWrite, Flags: wflags, SGL: []rnic.SGE{newData.mr.SGE(0, n)},
					RemoteAddr: remote.mr.Addr(), RKey: remote.mr.RKey()}))
			wcs := waitWC(t, p.cqa, 2, 5*time.Second)
			if wcs[0].WRID != 1 || wcs[1].WRID != 2 || wcs[0].Status != rnic.WCSuccess || wcs[1].Status != rnic.WCSuccess {
				t.Fatalf("completions %+v", wcs)
			}
			if !bytes.Equal(remote.region(), newData.region()) {
				t.Fatal("the WRITE did not land")
			}
			if !bytes.Equal(readBuf.region(), old) {
				if fence {
					t.Fatalf("iteration %d: the READ returned bytes of the fenced WRITE that followed it", i)
				}
				overtaken++
			}
		}
		return overtaken
	}
	run(true)
	t.Logf("without the fence the WRITE overtook the READ in %d of 20 runs (allowed)", run(false))
}

// TestFeatureSolicited: ibv_req_notify_cq(cq, 1) arms the completion
// channel for the next solicited receive completion or the next failed
// completion only (IBTA §11.4.2.2, C11-?); (cq, 0) for any completion.
// A notification fires once per arming.
func TestFeatureSolicited(t *testing.T) {
	p := newPair(t, pairOpts{mtu: rnic.MTU1024})
	src := newGuarded(t, p.pda, 8192, rnic.AccessLocalWrite, 1)
	dst := newGuarded(t, p.pdb, 8192, allAccess, 2)
	for i := 0; i < 16; i++ {
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{dst.mr.SGE(0, 8192)}}))
	}
	event := func(wait time.Duration) bool {
		select {
		case <-p.cqb.Events():
			return true
		case <-time.After(wait):
			return false
		}
	}
	send := func(op rnic.WROpcode, flags rnic.SendFlags, n int) {
		t.Helper()
		must0(t, p.qpa.PostSend(rnic.SendWR{Opcode: op, Flags: flags | rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, n)},
			RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey(), ImmData: 1}))
		waitWC(t, p.cqa, 1, 5*time.Second)
		waitWC(t, p.cqb, 1, 5*time.Second)
	}
	steps := []struct {
		name      string
		arm       int // 0: leave as is, 1: solicited only, 2: next
		op        rnic.WROpcode
		flags     rnic.SendFlags
		n         int
		wantEvent bool
	}{
		{"unarmed", 0, rnic.WRSend, rnic.SendSolicited, 10, false},
		{"solicited-only/plain-send", 1, rnic.WRSend, 0, 10, false},
		{"solicited-only/still-armed/solicited-send-multi-packet", 0, rnic.WRSend, rnic.SendSolicited, 5000, true},
		{"fired-once", 0, rnic.WRSend, rnic.SendSolicited, 10, false},
		{"next/plain-send", 2, rnic.WRSend, 0, 10, true},
		{"solicited-only/write-imm-unsolicited", 1, rnic.WRRDMAWriteWithImm, 0, 10, false},
		{"solicited-only/write-imm-solicited", 0, rnic.WRRDMAWriteWithImm, rnic.SendSolicited, 3000, true},
		{"solicited-only/send-imm-solicited", 1, rnic.WRSendWithImm, rnic.SendSolicited, 0, true},
	}
	for _, s := range steps {
		switch s.arm {
		case 1:
			p.cqb.ReqNotify(true)
		case 2:
			p.cqb.ReqNotify(false)
		}
		send(s.op, s.flags, s.n)
		if got := event(20 * time.Millisecond); got != s.wantEvent {
			t.Errorf("%s: completion event %v, want %v", s.name, got, s.wantEvent)
		}
	}
	// A failed completion fires a solicited-only notification: b posts a
	// WR with a bad lkey (LOC_PROT_ERR on the same CQ).
	p.cqb.ReqNotify(true)
	bad := dst.mr.SGE(0, 8)
	bad.LKey ^= 0x4400
	must0(t, p.qpb.PostSend(rnic.SendWR{WRID: 99, Opcode: rnic.WRRDMAWrite, SGL: []rnic.SGE{bad}, RemoteAddr: src.mr.Addr(), RKey: src.mr.RKey()}))
	if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.Status != rnic.WCLocProtErr {
		t.Fatalf("b's WR with a bad lkey: %+v", wc)
	}
	if !event(time.Second) {
		t.Error("a failed completion did not fire the solicited-only notification")
	}
}

// TestFeatureZeroLength: 0-byte SEND, WRITE, WRITE_WITH_IMM and READ are
// legal (IBTA §9.7.4.1: a zero-length RDMA operation carries no payload
// and its R_Key and VA are not checked, C9-?).
func TestFeatureZeroLength(t *testing.T) {
	p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 10}})
	buf := newGuarded(t, p.pdb, 64, allAccess, 1)
	local := newGuarded(t, p.pda, 64, rnic.AccessLocalWrite, 2)
	must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{buf.mr.SGE(0, 64)}}))
	must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 2}))
	must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 3}))
	must0(t, p.qpa.PostSend(
		rnic.SendWR{WRID: 10, Opcode: rnic.WRSend, Flags: rnic.SendSignaled},
		rnic.SendWR{WRID: 11, Opcode: rnic.WRSendWithImm, ImmData: 5, Flags: rnic.SendSignaled},
		rnic.SendWR{WRID: 12, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, RemoteAddr: buf.mr.Addr(), RKey: buf.mr.RKey()},
		rnic.SendWR{WRID: 13, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled}, // no address, no key
		rnic.SendWR{WRID: 14, Opcode: rnic.WRRDMAWriteWithImm, ImmData: 6, Flags: rnic.SendSignaled, RemoteAddr: buf.mr.Addr(), RKey: buf.mr.RKey()},
		rnic.SendWR{WRID: 15, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled, RemoteAddr: buf.mr.Addr(), RKey: buf.mr.RKey()},
		rnic.SendWR{WRID: 16, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled, SGL: []rnic.SGE{local.mr.SGE(0, 0)}, RemoteAddr: 0, RKey: 0},
	))
	wcs := waitWC(t, p.cqa, 7, 5*time.Second)
	for i, wc := range wcs {
		if wc.WRID != uint64(10+i) || wc.Status != rnic.WCSuccess {
			t.Errorf("0-byte WR %d: %+v (%v)", 10+i, wc, wc.Status)
		}
		if wc.Opcode == rnic.WCRDMARead && wc.ByteLen != 0 {
			t.Errorf("0-byte READ: ByteLen %d", wc.ByteLen)
		}
	}
	rwcs := waitWC(t, p.cqb, 3, 5*time.Second)
	for i, wc := range rwcs {
		if wc.WRID != uint64(1+i) || wc.Status != rnic.WCSuccess || wc.ByteLen != 0 {
			t.Errorf("receive %d: %+v", i, wc)
		}
	}
	if rwcs[1].Flags&rnic.WCWithImm == 0 || rwcs[1].ImmData != 5 || rwcs[2].Opcode != rnic.WCRecvRDMAWithImm || rwcs[2].ImmData != 6 {
		t.Errorf("immediates: %+v %+v", rwcs[1], rwcs[2])
	}
	buf.unchanged(t, "0-byte targets")
	local.unchanged(t, "0-byte READ destination")
	quiet(t, p.cqb, 10*time.Millisecond, "three receives only")
}

// TestFeatureQueueFull: ibv_post_send/ibv_post_recv refuse a WR that does
// not fit the queue (max_send_wr / max_recv_wr outstanding) and report it
// through bad_wr: the WRs before it are posted, the rest are not.
func TestFeatureQueueFull(t *testing.T) {
	p := newPair(t, pairOpts{conn: rnic.ConnParams{Timeout: 14},
		cap: rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 1}})
	src := newGuarded(t, p.pda, 256, rnic.AccessLocalWrite, 1)
	dst := newGuarded(t, p.pdb, 256, allAccess, 2)
	// Nothing completes while the peer is unreachable, so the queue fills.
	must0(t, p.pa.SetFaults(mem.Faults{Loss: 1}))
	wr := func(i int) rnic.SendWR {
		return rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(i*16, 16)}, RemoteAddr: dst.mr.Addr() + uint64(i*16), RKey: dst.mr.RKey()}
	}
	must0(t, p.qpa.PostSend(wr(0), wr(1)))
	var batch []rnic.SendWR
	for i := 2; i < 12; i++ {
		batch = append(batch, wr(i))
	}
	err := p.qpa.PostSend(batch...)
	var we *rnic.WRError
	if !errors.As(err, &we) || we.Index != 6 {
		t.Fatalf("posting 10 WRs with 2 of max_send_wr 8 outstanding: %v; want a *WRError with Index 6", err)
	}
	errContains(t, err, "queue full", "max_send_wr")
	if err := p.qpa.PostSend(wr(12)); !errors.As(err, &we) || we.Index != 0 {
		t.Fatalf("posting to a full queue: %v", err)
	}
	// The 8 posted complete once the peer is back, and nothing else.
	must0(t, p.pa.SetFaults(mem.Faults{}))
	for i, wc := range waitWC(t, p.cqa, 8, 5*time.Second) {
		if wc.WRID != uint64(i) || wc.Status != rnic.WCSuccess {
			t.Fatalf("completion %d: %+v", i, wc)
		}
	}
	quiet(t, p.cqa, 20*time.Millisecond, "the refused WRs")
	if !bytes.Equal(dst.region()[:128], src.region()[:128]) || !bytes.Equal(dst.region()[128:], dst.orig[guardLen+128:len(dst.orig)-guardLen]) {
		t.Fatal("exactly the first 8 WRITEs must have landed")
	}
	// A bad WR in the middle of a batch: the ones before it are posted.
	bad := wr(21)
	bad.SGL = []rnic.SGE{src.mr.SGE(0, 1), src.mr.SGE(1, 1), src.mr.SGE(2, 1)} // max_send_sge is 2
	err = p.qpa.PostSend(wr(0), wr(1), bad, wr(3))
	if !errors.As(err, &we) || we.Index != 2 {
		t.Fatalf("batch with a 3-SGE WR at index 2: %v", err)
	}
	errContains(t, err, "max_send_sge")
	if wcs := waitWC(t, p.cqa, 2, 5*time.Second); wcs[0].WRID != 0 || wcs[1].WRID != 1 {
		t.Fatalf("completions %+v", wcs)
	}
	quiet(t, p.cqa, 20*time.Millisecond, "WRs after the refused one")

	// Receive queue.
	var rwrs []rnic.RecvWR
	for i := 0; i < 9; i++ {
		rwrs = append(rwrs, rnic.RecvWR{WRID: uint64(i)})
	}
	err = p.qpb.PostRecv(rwrs...)
	if !errors.As(err, &we) || we.Index != 8 {
		t.Fatalf("posting 9 receives with max_recv_wr 8: %v", err)
	}
}
