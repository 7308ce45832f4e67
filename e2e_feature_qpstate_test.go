package rnic_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestFeatureQPQuery: ibv_query_qp returns what ibv_modify_qp set
// (IBTA §11.2.4.3 Query QP), and a QP connected by hand through
// RESET→INIT→RTR→RTS with those values moves data.
func TestFeatureQPQuery(t *testing.T) {
	p := newPairX(t, xopts{}) // its QPs are replaced below
	qcap := rnic.QPCap{MaxSendWR: 32, MaxRecvWR: 16, MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 48}
	mk := func(pd *rnic.PD, cq *rnic.CQ) *rnic.QP {
		return must(pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: qcap}))
	}
	qa, qb := mk(p.pda, p.cqa), mk(p.pdb, p.cqb)
	type side struct {
		qp, peer *rnic.QP
		dev      *rnic.Device
		init     rnic.QPAttr
		rtr      rnic.QPAttr
		rts      rnic.QPAttr
	}
	sides := []side{
		{qp: qa, peer: qb, dev: p.b,
			init: rnic.QPAttr{State: rnic.QPSInit, Port: 1, AccessFlags: rnic.AccessRemoteWrite | rnic.AccessRemoteRead},
			rtr: rnic.QPAttr{State: rnic.QPSRTR, AH: rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, HopLimit: 17, TrafficClass: 0x28}, PathMTU: rnic.MTU1024,
				RQPSN: 0x456, MaxDestRdAtomic: 5, MinRNRTimer: 9},
			rts: rnic.QPAttr{State: rnic.QPSRTS, Timeout: 13, RetryCnt: 5, RNRRetry: 4, SQPSN: 0x123, MaxRdAtomic: 3}},
		{qp: qb, peer: qa, dev: p.a,
			init: rnic.QPAttr{State: rnic.QPSInit, Port: 1, AccessFlags: allAccess},
			rtr: rnic.QPAttr{State: rnic.QPSRTR, AH: rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, HopLimit: 3}, PathMTU: rnic.MTU1024,
				RQPSN: 0x123, MaxDestRdAtomic: 2, MinRNRTimer: 1},
			rts: rnic.QPAttr{State: rnic.QPSRTS, Timeout: 12, RetryCnt: 2, RNRRetry: 7, SQPSN: 0x456, MaxRdAtomic: 1}},
	}
	initMask := rnic.QPAttrState | rnic.QPAttrPKeyIndex | rnic.QPAttrPort | rnic.QPAttrAccessFlags
	rtrMask := rnic.QPAttrState | rnic.QPAttrAV | rnic.QPAttrPathMTU | rnic.QPAttrDestQPN | rnic.QPAttrRQPSN | rnic.QPAttrMaxDestRdAtomic | rnic.QPAttrMinRNRTimer
	rtsMask := rnic.QPAttrState | rnic.QPAttrTimeout | rnic.QPAttrRetryCnt | rnic.QPAttrRNRRetry | rnic.QPAttrSQPSN | rnic.QPAttrMaxQPRdAtomic
	for i := range sides {
		s := &sides[i]
		if a, ia := query(t, s.qp); a.State != rnic.QPSReset || ia.Cap != qcap || ia.Type != rnic.RC {
			t.Fatalf("new QP: state %v, init %+v", a.State, ia)
		}
		must0(t, s.qp.Modify(&s.init, initMask))
		if a, _ := query(t, s.qp); a.State != rnic.QPSInit || a.AccessFlags != s.init.AccessFlags || a.Port != 1 || a.PKeyIndex != 0 {
			t.Errorf("after INIT: %+v", a)
		}
		s.rtr.AH.DGID = must(s.dev.GID(rnic.AddrGIDIndex))
		s.rtr.DestQPN = s.peer.QPN()
		must0(t, s.qp.Modify(&s.rtr, rtrMask))
		must0(t, s.qp.Modify(&s.rts, rtsMask))
	}
	for _, s := range sides {
		a, ia := query(t, s.qp)
		checks := []struct {
			name      string
			got, want any
		}{
			{"state", a.State, rnic.QPSRTS},
			{"cur_state", a.CurState, rnic.QPSRTS},
			{"qp_access_flags", a.AccessFlags, s.init.AccessFlags},
			{"path_mtu", a.PathMTU, s.rtr.PathMTU},
			{"dest_qp_num", a.DestQPN, s.peer.QPN()},
			{"rq_psn", a.RQPSN, s.rtr.RQPSN},
			{"sq_psn", a.SQPSN, s.rts.SQPSN},
			{"max_dest_rd_atomic", a.MaxDestRdAtomic, s.rtr.MaxDestRdAtomic},
			{"min_rnr_timer", a.MinRNRTimer, s.rtr.MinRNRTimer},
			{"timeout", a.Timeout, s.rts.Timeout},
			{"retry_cnt", a.RetryCnt, s.rts.RetryCnt},
			{"rnr_retry", a.RNRRetry, s.rts.RNRRetry},
			{"max_rd_atomic", a.MaxRdAtomic, s.rts.MaxRdAtomic},
			{"ah_attr.grh.dgid", a.AH.DGID, s.rtr.AH.DGID},
			{"ah_attr.grh.hop_limit", a.AH.HopLimit, s.rtr.AH.HopLimit},
			{"ah_attr.grh.traffic_class", a.AH.TrafficClass, s.rtr.AH.TrafficClass},
			{"port_num", a.Port, uint8(1)},
			{"cap", ia.Cap, qcap},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("QP %#x: Query %s = %v, Modify set %v", s.qp.QPN(), c.name, c.got, c.want)
			}
		}
	}
	// They work: a WRITE (a→b) and a SEND (b→a), across packet boundaries.
	src := newGuarded(t, p.pda, 3000, allAccess, 1)
	dst := newGuarded(t, p.pdb, 3000, allAccess, 2)
	must0(t, qa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 3000)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}))
	if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
		t.Fatalf("WRITE on hand-connected QPs: %+v", wc)
	}
	if !bytes.Equal(dst.region(), src.region()) {
		t.Fatal("WRITE data differs")
	}
	must0(t, qa.PostRecv(rnic.RecvWR{WRID: 7, SGL: []rnic.SGE{src.mr.SGE(0, 3000)}}))
	must0(t, qb.PostSend(rnic.SendWR{WRID: 2, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{dst.mr.SGE(0, 2500)}}))
	if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
		t.Fatalf("SEND b→a: %+v", wc)
	}
	if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.ByteLen != 2500 || wc.WRID != 7 {
		t.Fatalf("receive on a: %+v", wc)
	}
}

// TestFeatureSQD: RTS→SQD with IBV_QP_EN_SQD_ASYNC_NOTIFY (IBTA §10.3.1.4,
// §11.6.3.1): WRs already started complete, none is started after the
// transition, and IBV_EVENT_SQ_DRAINED is raised once nothing is
// outstanding; SQD→RTS resumes with the WRs left (and those posted while
// in SQD), in order.
func TestFeatureSQD(t *testing.T) {
	checkGoroutines(t)
	// In a testing/synctest bubble: the link delay and the ACK timers run on
	// the bubble's clock, so which WRs have started at the SQD transition
	// does not depend on how loaded the machine is.
	synctest.Test(t, func(t *testing.T) {
		// A 5 ms one-way delay: the requester's 128-packet window cannot
		// send the 32 × 16 packets below in less than several round trips.
		delay := mem.Faults{Delay: 5 * time.Millisecond}
		p := newPair(t, pairOpts{fa: delay, fb: delay, conn: rnic.ConnParams{Timeout: 16}})
		const n, size = 32, 64 << 10
		src := newGuarded(t, p.pda, (n+4)*size, rnic.AccessLocalWrite, 1)
		dst := newGuarded(t, p.pdb, (n+4)*size, allAccess, 2)
		for i := range src.region() {
			src.region()[i] = byte(i/size*31 + i)
		}
		wr := func(i int) rnic.SendWR {
			return rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{src.mr.SGE(i*size, size)}, RemoteAddr: dst.mr.Addr() + uint64(i*size), RKey: dst.mr.RKey()}
		}
		var wrs []rnic.SendWR
		for i := 0; i < n; i++ {
			wrs = append(wrs, wr(i))
		}
		must0(t, p.qpa.PostSend(wrs...))
		// Let the requester start: its first packets are on the wire (their
		// ACKs are 10 ms away).
		for deadline := time.Now().Add(5 * time.Second); counter(t, p.a, "tx_packets") == 0; {
			if time.Now().After(deadline) {
				t.Fatal("nothing sent")
			}
			time.Sleep(100 * time.Microsecond)
		}
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD, EnSQDAsyncNotify: true}, rnic.QPAttrState|rnic.QPAttrEnSQDAsyncNotify))
		if a, _ := query(t, p.qpa); a.State != rnic.QPSSQD || !a.EnSQDAsyncNotify {
			t.Fatalf("after Modify to SQD: state %v en_sqd_async_notify %v", a.State, a.EnSQDAsyncNotify)
		}
		waitQPEvent(t, p.a, p.qpa, rnic.EventSQDrained)
		// Everything started has completed by the time of the event.
		got := make([]rnic.WC, n)
		k := must(p.cqa.Poll(got))
		if k == 0 || k >= n {
			t.Fatalf("%d of %d WRs completed when the SQ drained; want some but not all (the rest not started)", k, n)
		}
		for i, wc := range got[:k] {
			if wc.WRID != uint64(i) || wc.Status != rnic.WCSuccess {
				t.Fatalf("completion %d before the drain: %+v", i, wc)
			}
		}
		if a, _ := query(t, p.qpa); a.State != rnic.QPSSQD || a.SQDraining {
			t.Errorf("drained QP: state %v sq_draining %v, want SQD, false", a.State, a.SQDraining)
		}
		// WRs posted in SQD wait too.
		must0(t, p.qpa.PostSend(wr(n), wr(n+1), wr(n+2), wr(n+3)))
		quiet(t, p.cqa, 30*time.Millisecond, "QP in SQD")
		if evs := drainEvents(p.a, 5*time.Millisecond); len(evs) != 0 {
			t.Errorf("more events: %s", evString(evs))
		}
		t.Logf("%d of %d WRITEs had started when the QP entered SQD", k, n)
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSRTS}, rnic.QPAttrState))
		for i, wc := range waitWC(t, p.cqa, n+4-k, 10*time.Second) {
			if wc.WRID != uint64(k+i) || wc.Status != rnic.WCSuccess {
				t.Fatalf("completion %d after SQD→RTS: %+v", k+i, wc)
			}
		}
		if !bytes.Equal(dst.region(), src.region()) {
			t.Fatal("data differs after SQD→RTS")
		}
		// An idle send queue is drained at once.
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD, EnSQDAsyncNotify: true}, rnic.QPAttrState|rnic.QPAttrEnSQDAsyncNotify))
		waitQPEvent(t, p.a, p.qpa, rnic.EventSQDrained)
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSRTS}, rnic.QPAttrState))
		// With en_sqd_async_notify cleared there is no event. (Leaving the
		// mask bit out keeps the previous value, as rxe does.)
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSSQD, EnSQDAsyncNotify: false}, rnic.QPAttrState|rnic.QPAttrEnSQDAsyncNotify))
		if evs := drainEvents(p.a, 20*time.Millisecond); len(evs) != 0 {
			t.Errorf("SQD without en_sqd_async_notify raised %s", evString(evs))
		}
	})
}

// TestFeatureFlushAndReset: Modify to ERR completes every outstanding send
// and receive WR with IBV_WC_WR_FLUSH_ERR, each queue in posting order
// (IBTA §10.3.1 "Error", §11.6.2 C11-?); WRs posted in ERR are flushed too.
// RESET discards everything without completions, and the QP can be
// connected again from RESET (§10.3.1 "Reset").
func TestFeatureFlushAndReset(t *testing.T) {
	checkGoroutines(t)
	// In a testing/synctest bubble: the waits for frames on the wire and
	// for quiet CQs cost no wall time.
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, pairOpts{})
		src := newGuarded(t, p.pda, 4096, allAccess, 1)
		dst := newGuarded(t, p.pdb, 4096, allAccess, 2)
		must0(t, p.pa.SetFaults(mem.Faults{Loss: 1})) // nothing completes on its own
		ops := []rnic.WROpcode{rnic.WRRDMAWrite, rnic.WRSend, rnic.WRRDMARead, rnic.WRAtomicFetchAndAdd, rnic.WRSendWithImm}
		for i := 0; i < 10; i++ {
			op := ops[i%len(ops)]
			n := 100
			if op == rnic.WRAtomicFetchAndAdd {
				n = 8
			}
			flags := rnic.SendSignaled
			if i == 4 {
				flags = 0 // unsignaled: a flushed WR completes anyway
			}
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: op, Flags: flags, SGL: []rnic.SGE{src.mr.SGE(i*128, n)},
				RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}))
			must0(t, p.qpa.PostRecv(rnic.RecvWR{WRID: uint64(100 + i), SGL: []rnic.SGE{src.mr.SGE(2048, 100)}}))
		}
		time.Sleep(2 * time.Millisecond) // some are on the wire now (virtual time)
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState))
		if st := p.qpa.State(); st != rnic.QPSErr {
			t.Fatalf("state %v after Modify to ERR", st)
		}
		// Posted in ERR: flushed as well.
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 10, Opcode: rnic.WRSend, Flags: rnic.SendSignaled}))
		must0(t, p.qpa.PostRecv(rnic.RecvWR{WRID: 110}))
		var sends, recvs []uint64
		for _, wc := range waitWC(t, p.cqa, 22, 5*time.Second) {
			if wc.Status != rnic.WCWRFlushErr || wc.QPNum != p.qpa.QPN() {
				t.Errorf("completion %+v (%v), want WR_FLUSH_ERR", wc, wc.Status)
			}
			if wc.WRID >= 100 {
				recvs = append(recvs, wc.WRID)
			} else {
				sends = append(sends, wc.WRID)
			}
		}
		for i := range 11 {
			if i >= len(sends) || sends[i] != uint64(i) || i >= len(recvs) || recvs[i] != uint64(100+i) {
				t.Fatalf("flush order: sends %v, receives %v; want 0..10 and 100..110", sends, recvs)
			}
		}
		quiet(t, p.cqa, 20*time.Millisecond, "all flushed")
		if n := qpCounter(t, p.qpa, "req_cqe_flush_error"); n != 11 {
			t.Errorf("req_cqe_flush_error = %d, want 11", n)
		}
		if n := qpCounter(t, p.qpa, "resp_cqe_flush_error"); n != 11 {
			t.Errorf("resp_cqe_flush_error = %d, want 11", n)
		}

		// RESET: no completions for what is posted then; then reconnect.
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 555}))
		for _, qp := range []*rnic.QP{p.qpa, p.qpb} {
			must0(t, qp.Modify(&rnic.QPAttr{State: rnic.QPSReset}, rnic.QPAttrState))
			if a, _ := query(t, qp); a.State != rnic.QPSReset || a.DestQPN != 0 {
				t.Errorf("after RESET: state %v dest_qp_num %#x", a.State, a.DestQPN)
			}
		}
		if err := p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRSend}); err == nil {
			t.Error("PostSend in RESET succeeded")
		}
		quiet(t, p.cqb, 20*time.Millisecond, "RESET discards without completions")
		must0(t, p.pa.SetFaults(mem.Faults{}))
		dst.unchanged(t, "target of the flushed WRs")
		connectRC(t, p.qpa, p.qpb, rnic.ConnParams{PSN: 0xABCDE, Timeout: 12})
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{dst.mr.SGE(2048, 2048)}}))
		must0(t, p.qpa.PostSend(
			rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 2048)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()},
			rnic.SendWR{WRID: 2, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(2048, 2048)}}))
		for i, wc := range waitWC(t, p.cqa, 2, 5*time.Second) {
			if wc.WRID != uint64(i+1) || wc.Status != rnic.WCSuccess {
				t.Fatalf("after reconnecting: %+v", wc)
			}
		}
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.WRID != 1 || wc.Status != rnic.WCSuccess || wc.ByteLen != 2048 {
			t.Fatalf("receive after reconnecting: %+v (the WQE posted before RESET must be gone)", wc)
		}
		if !bytes.Equal(dst.region(), src.region()) {
			t.Fatal("data after reconnecting differs")
		}
	})
}

// TestFeatureCQOverrun: completions beyond a CQ's depth overrun it (IBTA
// §11.4.2.1 C11-?): the CQ goes to error, the device raises
// IBV_EVENT_CQ_ERR, and Wait reports ErrCQOverrun.
func TestFeatureCQOverrun(t *testing.T) {
	p := newPairX(t, xopts{cqeA: 4})
	if d := p.cqa.Depth(); d != 4 {
		t.Fatalf("Depth() = %d", d)
	}
	src := newGuarded(t, p.pda, 1024, rnic.AccessLocalWrite, 1)
	dst := newGuarded(t, p.pdb, 1024, allAccess, 2)
	for i := 0; i < 10; i++ {
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(i*64, 64)}, RemoteAddr: dst.mr.Addr() + uint64(i*64), RKey: dst.mr.RKey()}))
	}
	ev, other := waitEvent(t, p.a, 5*time.Second, "CQ error", func(ev rnic.AsyncEvent) bool { return ev.Type == rnic.EventCQErr })
	if ev.CQ != p.cqa {
		t.Errorf("CQ error event names CQ %v, want %v", ev.CQ, p.cqa)
	}
	t.Logf("other events: %s", evString(append(other, drainEvents(p.a, 10*time.Millisecond)...)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var got []rnic.WC
	buf := make([]rnic.WC, 16)
	var err error
	for {
		var k int
		k, err = p.cqa.Wait(ctx, buf)
		if err != nil {
			break
		}
		got = append(got, buf[:k]...)
	}
	if !errors.Is(err, rnic.ErrCQOverrun) {
		t.Fatalf("Wait after the overrun: %v (after %d completions), want ErrCQOverrun", err, len(got))
	}
	if len(got) > 4 {
		t.Errorf("%d completions from a CQ of 4 entries", len(got))
	}
	for i, wc := range got {
		if wc.WRID != uint64(i) {
			t.Errorf("completion %d: %+v", i, wc)
		}
	}
	if n := counter(t, p.a, "cq_overruns"); n == 0 {
		t.Error("cq_overruns not counted")
	}
	// The CQ stays in error.
	if _, err := p.cqa.Wait(ctx, buf); !errors.Is(err, rnic.ErrCQOverrun) {
		t.Errorf("second Wait: %v, want ErrCQOverrun", err)
	}
}

// TestFeatureCQOverrunEventOnce: the CQ error is an event about the CQ
// entering the error state (IBTA §11.6.3.1, "CQ Error" is raised when the
// CQ overruns), not one event per completion lost.
func TestFeatureCQOverrunEventOnce(t *testing.T) {
	p := newPairX(t, xopts{cqeA: 4})
	src := newGuarded(t, p.pda, 1024, rnic.AccessLocalWrite, 1)
	dst := newGuarded(t, p.pdb, 1024, allAccess, 2)
	for i := 0; i < 10; i++ {
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(i*64, 64)}, RemoteAddr: dst.mr.Addr() + uint64(i*64), RKey: dst.mr.RKey()}))
	}
	waitEvent(t, p.a, 5*time.Second, "CQ error", func(ev rnic.AsyncEvent) bool { return ev.Type == rnic.EventCQErr })
	for _, ev := range drainEvents(p.a, 20*time.Millisecond) {
		if ev.Type == rnic.EventCQErr {
			t.Fatalf("a second CQ error event for the same overrun")
		}
	}
}
