package transport

// Engine features around the protocol: shared receive queues, CQ overrun
// and notification, memory-window invalidation, QP destruction, names.

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// TestSRQ checks a QP on a shared receive queue (IBTA §10.2.9): SENDs
// take WQEs from the SRQ, the limit event fires once when fewer than
// srq_limit WQEs remain (ibv_modify_srq), posting to the QP's own receive
// queue is refused, and a QP that goes to ERR raises LAST_WQE_REACHED
// instead of flushing the SRQ's WQEs (§11.6.3.4).
func TestSRQ(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{})
	srq, err := NewSRQ(1, testPD, 4, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srq.MaxWR() != 4 || srq.MaxSGE() != 2 {
		t.Fatalf("SRQ %d/%d", srq.MaxWR(), srq.MaxSGE())
	}
	n.e.DestroyQP(n.qp)
	n.qp = n.createQP(RC, srq)
	n.connect(gidPeer, peerQPN)
	s := &solo{t: t, n: n}
	if _, err := n.qp.PostRecv([]RecvWR{n.recvWR(1, 0, 8)}); !errors.Is(err, ErrInvalidWR) {
		t.Fatalf("PostRecv on an SRQ QP: %v", err)
	}
	if err := srq.Arm(5); err == nil {
		t.Fatal("srq_limit above max_wr accepted")
	}
	for i := range 3 {
		if _, err := srq.PostRecv([]RecvWR{n.recvWR(uint64(10+i), i*4096, 4096)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srq.Arm(2); err != nil || srq.Limit() != 2 || srq.Posted() != 3 {
		t.Fatalf("Arm: %v, limit %d, posted %d", err, srq.Limit(), srq.Posted())
	}
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0, Payload: pattern(4, 1)})
	if slices.Contains(n.eventTypes(), EventSRQLimitReached) {
		t.Fatal("limit event with 2 WQEs left (limit 2)")
	}
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 1, Payload: pattern(4, 2)})
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 2, AckReq: true, Payload: pattern(4, 3)})
	if got := n.eventTypes(); !slices.Equal(got, []EventType{EventSRQLimitReached}) {
		t.Fatalf("events %v, want one SRQ_LIMIT_REACHED", got)
	}
	if srq.Limit() != 0 {
		t.Error("the limit did not disarm")
	}
	expectWCs(t, n.recvWCs(), WC{WRID: 10, Status: WCSuccess, Opcode: WCRecv}, WC{WRID: 11, Status: WCSuccess, Opcode: WCRecv},
		WC{WRID: 12, Status: WCSuccess, Opcode: WCRecv})
	// Empty SRQ: RNR NAK.
	expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 3}), checks(opcode(wire.OpRCAck), syndrome(wire.SyndromeRNR(12))))
	if _, err := srq.PostRecv([]RecvWR{n.recvWR(20, 0, 64)}); err != nil {
		t.Fatal(err)
	}
	if err := n.e.Modify(n.qp, &QPAttr{State: QPSErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.eventTypes(), EventQPLastWQEReached) {
		t.Errorf("events %v, want LAST_WQE_REACHED", n.eventTypes())
	}
	if wcs := n.recvWCs(); len(wcs) != 0 {
		t.Errorf("the SRQ's WQEs were flushed by one QP:\n%s", wcString(wcs))
	}
	if srq.Posted() != 1 {
		t.Errorf("SRQ holds %d WQEs, want 1", srq.Posted())
	}
}

// TestCQOverrun checks a full CQ (IBTA §11.4.2.1 "CQ overrun"): the CQ
// goes to error with a CQ error event, the QP whose completion was lost
// goes to ERR with a fatal event, and Wait reports the overrun.
func TestCQOverrun(t *testing.T) {
	s := newSolo(t, nodeConfig{cqDepth: 2})
	n := s.n
	n.postRecv(n.recvWR(1, 0, 64), n.recvWR(2, 64, 64), n.recvWR(3, 128, 64))
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0}, hdrs{Op: wire.OpRCSendOnly, PSN: 1}, hdrs{Op: wire.OpRCSendOnly, PSN: 2})
	if !n.rcq.Overrun() {
		t.Fatal("CQ not in error")
	}
	got := n.eventTypes()
	if !slices.Contains(got, EventCQErr) || !slices.Contains(got, EventQPFatal) {
		t.Fatalf("events %v, want CQ error and QP fatal", got)
	}
	if st := n.e.Query(n.qp).State; st != QPSErr {
		t.Errorf("QP in %v", st)
	}
	if n.e.Counters()[CQOverruns] == 0 {
		t.Error("cq_overruns not counted")
	}
	wcs := make([]WC, 4)
	if k, err := n.rcq.Wait(context.Background(), wcs); k != 2 || err != nil {
		t.Fatalf("Wait = %d, %v; want the 2 completions that fit", k, err)
	}
	if _, err := n.rcq.Wait(context.Background(), wcs); !errors.Is(err, ErrCQOverrun) {
		t.Fatalf("Wait on an overrun CQ: %v", err)
	}
}

// TestCQNotify checks completion notification (ibv_req_notify_cq): armed
// for solicited events, only a completion with SE (or an error) fires;
// armed for any, the next completion fires; each arming fires once.
func TestCQNotify(t *testing.T) {
	s := newSolo(t, nodeConfig{})
	n := s.n
	n.postRecv(n.recvWR(1, 0, 64), n.recvWR(2, 64, 64), n.recvWR(3, 128, 64), n.recvWR(4, 192, 64))
	fired := func() bool {
		select {
		case <-n.rcq.Events():
			return true
		default:
			return false
		}
	}
	n.rcq.ReqNotify(true)
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0})
	if fired() {
		t.Fatal("solicited-only notification fired on an unsolicited completion")
	}
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 1, SE: true})
	if !fired() {
		t.Fatal("solicited completion did not fire")
	}
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 2, SE: true})
	if fired() {
		t.Fatal("fired without being armed again")
	}
	n.rcq.ReqNotify(false)
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 3})
	if !fired() {
		t.Fatal("armed for any completion, did not fire")
	}
	if n.rcq.Depth() != 256 || len(n.recvWCs()) != 4 {
		t.Fatal("completions lost")
	}
}

// TestInvalidate checks SEND with Invalidate and LOCAL_INV of a type 2
// memory window (IBTA §10.6.7, §9.4.1.1): the window bound to the QP is
// invalidated and the receive completion reports it; invalidating a key
// that is not a valid window fails (remote: NAK invalid request and the
// WQE completes with REM_INV_REQ_ERR; local: LOC_PROT_ERR).
func TestInvalidate(t *testing.T) {
	setup := func(t *testing.T) (*solo, uint32) {
		s := newSolo(t, nodeConfig{})
		n := s.n
		return s, bindMW2(t, n, make([]byte, 4096), 0x900000, atu.RemoteWrite)
	}
	t.Run("remote", func(t *testing.T) {
		s, key := setup(t)
		n := s.n
		n.postRecv(n.recvWR(1, 0, 64), n.recvWR(2, 64, 64))
		expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnlyInv, PSN: 0, AckReq: true, InvRKey: key, Payload: pattern(4, 1)}),
			checks(opcode(wire.OpRCAck), syndrome(synACK)))
		wcs := n.recvWCs()
		if len(wcs) != 1 || wcs[0].Flags&WCWithInv == 0 || wcs[0].InvalidatedRKey != key {
			t.Fatalf("completion %+v", wcs)
		}
		if e, _ := n.atu.Lookup(key); e.Valid {
			t.Fatal("window still valid")
		}
		// Again: the key is no longer valid.
		expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnlyInv, PSN: 1, AckReq: true, InvRKey: key}),
			checks(opcode(wire.OpRCAck), psn(1), syndrome(synInvReq)))
		expectWCs(t, n.recvWCs(), WC{WRID: 2, Status: WCRemInvReqErr, Opcode: WCRecv})
	})
	t.Run("local", func(t *testing.T) {
		s, key := setup(t)
		n := s.n
		n.post(SendWR{WRID: 1, Opcode: WRLocalInv, Flags: SendSignaled, InvalidateRKey: key},
			SendWR{WRID: 2, Opcode: WRLocalInv, Flags: SendSignaled, InvalidateRKey: key})
		if out := s.run(); len(out) != 0 {
			t.Fatalf("LOCAL_INV sent %d frames", len(out))
		}
		expectWCs(t, n.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCLocalInv}, WC{WRID: 2, Status: WCLocProtErr, Opcode: WCLocalInv})
		if st := n.e.Query(n.qp).State; st != QPSErr {
			t.Errorf("QP in %v after a failed LOCAL_INV", st)
		}
	})
	t.Run("bind error", func(t *testing.T) {
		s, _ := setup(t)
		n := s.n
		n.post(SendWR{WRID: 1, Opcode: WRBindMW, Flags: SendSignaled, Bind: MWBindInfo{MW: 0x12345, NewKey: 0x12346}})
		s.run()
		expectWCs(t, n.sendWCs(), WC{WRID: 1, Status: WCMWBindErr, Opcode: WCBindMW})
	})
}

// TestDestroyQP checks ibv_destroy_qp: outstanding work is dropped
// without completions, frames for the QPN find no QP, and its timers
// never fire.
func TestDestroyQP(t *testing.T) {
	s := newSolo(t, nodeConfig{timeout: 8})
	n := s.n
	n.post(SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{n.sge(0, 8)}})
	s.run()
	qpn := n.qp.QPN
	n.e.DestroyQP(n.qp)
	if n.qps.Get(qpn) != nil {
		t.Fatal("QP still in the table")
	}
	if out := s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0, AckReq: true, DestQP: qpn}); len(out) != 0 {
		t.Fatal("destroyed QP answered")
	}
	if n.e.Counters()[RxUnknownQP] != 1 {
		t.Errorf("rx_unknown_qpn %d", n.e.Counters()[RxUnknownQP])
	}
	if out := s.tickAt(1 << 40); len(out) != 0 {
		t.Fatal("destroyed QP retransmitted")
	}
	if wcs := n.sendWCs(); len(wcs) != 0 {
		t.Fatalf("completions:\n%s", wcString(wcs))
	}
	if n.scq.Refs.Load() != 0 || n.rcq.Refs.Load() != 0 {
		t.Error("CQ references not dropped")
	}
}

// TestNames checks that names follow libibverbs (ibv_wc_status_str,
// ibv_event_type_str) and Linux `rdma statistic`, as the docs promise.
func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{WCRetryExcErr.String(), "transport retry counter exceeded"},
		{WCRNRRetryExcErr.String(), "RNR retry counter exceeded"},
		{WCWRFlushErr.String(), "Work Request Flushed Error"},
		{WCStatus(99).String(), "unknown"},
		{EventSQDrained.String(), "send queue drained"},
		{EventType(99).String(), "unknown"},
		{WCRecvRDMAWithImm.String(), "RECV_RDMA_WITH_IMM"},
		{RetransPackets.String(), "roce_retrans_packets"},
		{RxICRCErrors.String(), "rx_icrc_encapsulated"},
		{Counter(999).String(), "counter?"},
		{QPSSQD.String(), "SQD"},
		{QPState(9).String(), "QPState(9)"},
		{UD.String(), "UD"},
		{QPType(7).String(), "QPType(7)"},
		{WRAtomicCmpAndSwp.String(), "ATOMIC_CMP_AND_SWP"},
		{(AttrAV | AttrSQPSN).String(), "AV|SQ_PSN"},
		{AttrMask(0).String(), "none"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	for c := Counter(0); c < numCounters; c++ {
		if c.String() == "" {
			t.Errorf("counter %d has no name", c)
		}
	}
}

// TestTimersLeaveWithTheQP checks that a destroyed or reset QP leaves the
// engine's timer heap at once: its entry used to stay until its deadline
// (with timeout 31, 2.4 hours), keeping the QP and its rings alive.
func TestTimersLeaveWithTheQP(t *testing.T) {
	s := newSolo(t, nodeConfig{timeout: 31})
	n := s.n
	var qps []*QP
	for range 4 {
		qp := n.createQP(RC, nil)
		n.qp = qp
		n.connect(gidB, 0xabcde)
		qps = append(qps, qp)
		n.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, SGL: []SGE{n.sge(0, 8)}, RemoteAddr: 0x1000, RKey: 1})
	}
	s.run()
	if len(n.e.timers) != 4 {
		t.Fatalf("%d timer entries for 4 QPs waiting for ACKs", len(n.e.timers))
	}
	checkHeap := func() {
		t.Helper()
		for i, ent := range n.e.timers {
			if ent.qp.timer.heapPos != i || ent.qp.timer.queuedAt != ent.at {
				t.Fatalf("heap entry %d: QP says position %d, deadline %d (entry %d)", i, ent.qp.timer.heapPos, ent.qp.timer.queuedAt, ent.at)
			}
		}
	}
	checkHeap()
	n.e.DestroyQP(qps[1])
	checkHeap()
	if err := n.e.Modify(qps[2], &QPAttr{State: QPSReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	checkHeap()
	if len(n.e.timers) != 2 {
		t.Fatalf("%d timer entries after destroying one QP and resetting another, want 2", len(n.e.timers))
	}
	n.e.DestroyQP(qps[0])
	n.e.DestroyQP(qps[3])
	if len(n.e.timers) != 0 {
		t.Fatalf("%d timer entries after destroying every waiting QP", len(n.e.timers))
	}
}

// TestDropsAreCounted checks drops that used to leave no trace in any
// counter: a CNP (nothing reacts to congestion yet: rp_cnp_ignored), the
// packets of a UC message dropped after a gap until the next FIRST
// (rx_uc_dropped), an invalid request on UC, which has no NAK to send
// (rx_invalid_requests), and a response with an AETH syndrome IBTA
// reserves (rx_ghost_response).
func TestDropsAreCounted(t *testing.T) {
	s := newSolo(t, nodeConfig{})
	s.send(hdrs{Op: wire.OpCNP})
	if got := s.n.counter(RxCNPIgnored); got != 1 {
		t.Errorf("rp_cnp_ignored %d after a CNP, want 1", got)
	}

	uc := newSolo(t, nodeConfig{qpType: UC, pathMTU: wire.MTU1024})
	n := uc.n
	w := func(op wire.Opcode, p uint32, size int) hdrs {
		return hdrs{Op: op, PSN: wire.PSN(p), Payload: pattern(size, byte(p)), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 4096}}
	}
	uc.send(w(wire.OpUCWriteFirst, 0, 1024), w(wire.OpUCWriteMiddle, 2, 1024), w(wire.OpUCWriteLast, 3, 1024))
	if got, oos := n.counter(RxUCDropped), n.counter(OutOfSequence); got != 2 || oos != 1 {
		t.Errorf("after a gap at PSN 1: rx_uc_dropped %d, out_of_sequence %d; want 2 (PSN 2 and 3), 1", got, oos)
	}
	// A MIDDLE with no FIRST before it is an invalid opcode sequence.
	uc.send(w(wire.OpUCWriteFirst, 4, 1024), w(wire.OpUCWriteFirst, 5, 1024))
	if got := n.counter(RxInvalidRequests); got != 1 {
		t.Errorf("rx_invalid_requests %d after a FIRST inside a message, want 1", got)
	}

	rq := newSolo(t, nodeConfig{})
	rq.n.post(SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{rq.n.sge(0, 8)}})
	rq.run()
	rq.send(hdrs{Op: wire.OpRCAck, PSN: 0, Syn: wire.Syndrome(0x40)}) // kind 2: reserved
	if got := rq.n.counter(RxGhostResponse); got != 1 {
		t.Errorf("rx_ghost_response %d after a reserved syndrome, want 1", got)
	}
	if wcs := rq.n.sendWCs(); len(wcs) != 0 {
		t.Errorf("a reserved syndrome completed %v", wcs)
	}
}
