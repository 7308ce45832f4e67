package transport

// QP state machine tests (IBTA Vol 1 §10.3.1 QP states, §11.2.4.2 Modify
// QP; IB core's qp_state_table in drivers/infiniband/core/verbs.c).

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// ibCoreCell is one cell of IB core's qp_state_table, written out here
// independently of qpTransitions (from drivers/infiniband/core/verbs.c,
// for the RC, UC and UD columns).
type ibCoreCell struct {
	req, opt [3]AttrMask // RC, UC, UD
}

func typeIdx(t QPType) int { return int(t - RC) }

// ibCoreTable returns the reference table: cells present are valid.
func ibCoreTable() map[[2]QPState]ibCoreCell {
	const (
		S   = AttrState
		_   = S
		pk  = AttrPKeyIndex
		prt = AttrPort
		acc = AttrAccessFlags
		qk  = AttrQKey
		cur = AttrCurState
		alt = AttrAltPath
		mig = AttrPathMigState
		rnr = AttrMinRNRTimer
	)
	tab := map[[2]QPState]ibCoreCell{}
	cell := func(from, to QPState, req, opt [3]AttrMask) { tab[[2]QPState{from, to}] = ibCoreCell{req, opt} }
	none := [3]AttrMask{}
	// Every state may go to RESET and to ERR. IB core's table lacks
	// RESET->ERR, but IBTA allows it (mlx4 emulates it for that reason,
	// commit "IB/mlx4: Fix RESET to RESET and RESET to ERROR transitions"),
	// and this NIC follows IBTA: the cell is valid here.
	for s := QPSReset; s < numQPStates; s++ {
		cell(s, QPSReset, none, none)
		cell(s, QPSErr, none, none)
	}
	cell(QPSReset, QPSInit, [3]AttrMask{pk | prt | acc, pk | prt | acc, pk | prt | qk}, none)
	cell(QPSInit, QPSInit, none, [3]AttrMask{pk | prt | acc, pk | prt | acc, pk | prt | qk})
	cell(QPSInit, QPSRTR,
		[3]AttrMask{
			AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | rnr,
			AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN,
			0},
		[3]AttrMask{alt | acc | pk, alt | acc | pk, pk | qk})
	cell(QPSRTR, QPSRTS,
		[3]AttrMask{AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic, AttrSQPSN, AttrSQPSN},
		[3]AttrMask{cur | alt | acc | rnr | mig, cur | alt | acc | mig, cur | qk})
	cell(QPSRTS, QPSRTS, none, [3]AttrMask{cur | acc | alt | mig | rnr, cur | acc | alt | mig, cur | qk})
	cell(QPSRTS, QPSSQD, none, [3]AttrMask{AttrEnSQDAsyncNotify, AttrEnSQDAsyncNotify, AttrEnSQDAsyncNotify})
	cell(QPSSQD, QPSRTS, none, [3]AttrMask{cur | alt | acc | rnr | mig, cur | alt | acc | mig, cur | qk})
	cell(QPSSQD, QPSSQD, none, [3]AttrMask{
		prt | AttrAV | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic | alt | acc | pk | rnr | mig,
		AttrAV | alt | acc | pk | mig,
		pk | qk})
	cell(QPSSQE, QPSRTS, none, [3]AttrMask{0, cur | acc, cur | qk})
	return tab
}

// allAttrs lists every attribute bit a Modify may carry besides STATE.
var allAttrs = func() []AttrMask {
	var out []AttrMask
	for b := AttrCurState; b <= AttrDestQPN; b <<= 1 {
		out = append(out, b)
	}
	return append(out, AttrRateLimit)
}()

func bits(m AttrMask) []AttrMask {
	var out []AttrMask
	for _, b := range allAttrs {
		if m&b != 0 {
			out = append(out, b)
		}
	}
	return out
}

// validAttr returns attributes with an in-range value for every field,
// for a move from cur to next.
func validAttr(cur, next QPState) *QPAttr {
	return &QPAttr{
		State: next, CurState: cur, PathMTU: wire.MTU1024, QKey: testQKey,
		RQPSN: 100, SQPSN: 200, DestQPN: peerQPN,
		AccessFlags: atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead,
		AV:          wire.Route{Src: gidA, Dst: gidPeer},
		MaxRdAtomic: 2, MaxDestRdAtomic: 2, MinRNRTimer: 3, Port: 1,
		Timeout: 14, RetryCnt: 7, RNRRetry: 7, EnSQDAsyncNotify: true,
	}
}

// reach puts a fresh node's QP into state s. It reports false if a QP of
// its type cannot get there (only UC and UD QPs enter SQE: an RC send
// error moves the QP to ERR, IBTA §10.3.1).
func reach(t *testing.T, n *node, s QPState) bool {
	t.Helper()
	switch s {
	case QPSReset:
	case QPSInit, QPSRTR, QPSRTS:
		n.modifyTo(s, gidPeer, peerQPN)
	case QPSSQD:
		n.modifyTo(QPSRTS, gidPeer, peerQPN)
		if err := n.e.Modify(n.qp, &QPAttr{State: QPSSQD}, AttrState); err != nil {
			t.Fatalf("RTS->SQD: %v", err)
		}
	case QPSSQE:
		if n.qp.Type == RC {
			return false
		}
		n.modifyTo(QPSRTS, gidPeer, peerQPN)
		// A send whose SGE has a bad lkey fails locally: a UC/UD QP
		// goes to SQE (IBTA §10.3.1 "Send Queue Error").
		wr := SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{{Addr: n.addr(0), Length: 16, LKey: n.key ^ 0x5500}}}
		if n.qp.Type == UD {
			wr.AH, wr.RemoteQPN, wr.RemoteQKey = n.newAH(wire.Route{Dst: gidPeer}, testPD), peerQPN, testQKey
		}
		n.post(wr)
		n.e.Run(0, 16)
		n.e.ClearOutbox()
		if st := n.e.Query(n.qp).State; st != QPSSQE {
			t.Fatalf("a failed %v send left the QP in %v, want SQE", n.qp.Type, st)
		}
		expectWCs(t, n.sendWCs(), WC{WRID: 1, Status: WCLocProtErr, Opcode: WCSend})
	case QPSErr:
		n.modifyTo(QPSRTS, gidPeer, peerQPN)
		if err := n.e.Modify(n.qp, &QPAttr{State: QPSErr}, AttrState); err != nil {
			t.Fatalf("->ERR: %v", err)
		}
	}
	if got := n.e.Query(n.qp).State; got != s {
		t.Fatalf("reach %v: QP is in %v", s, got)
	}
	return true
}

// TestQPStateTable checks every (from, to, QP type) cell of the Modify QP
// table against IB core's qp_state_table (IBTA §11.2.4.2): an illegal move
// is refused with ErrTransition; a legal one succeeds with exactly its
// required attributes, is refused naming each required attribute left
// out, accepts each optional attribute, and refuses naming each attribute
// the move does not take.
func TestQPStateTable(t *testing.T) {
	ref := ibCoreTable()
	for _, typ := range []QPType{RC, UC, UD} {
		for from := QPSReset; from < numQPStates; from++ {
			for to := QPSReset; to < numQPStates; to++ {
				t.Run(fmt.Sprintf("%v/%v->%v", typ, from, to), func(t *testing.T) {
					checkCell(t, ref, typ, from, to)
				})
			}
		}
	}
}

// checkCell checks one cell of the table. The QP is driven into from for
// real when its type can get there; a state it never enters (SQE for RC)
// is checked against checkTransition, the table lookup Modify uses.
func checkCell(t *testing.T, ref map[[2]QPState]ibCoreCell, typ QPType, from, to QPState) {
	small := nodeConfig{memSize: 4096, sqDepth: 4, rqDepth: 4, qpType: typ}
	// modify tries one Modify on a fresh QP in from and returns its error
	// and the state the QP is in afterwards.
	modify := func(mask AttrMask) (QPState, error) {
		n := newNode(t, "E", gidA, small)
		if !reach(t, n, from) {
			err := checkTransition(typ, from, to, mask)
			if err == nil {
				return to, nil
			}
			return from, err
		}
		err := n.e.Modify(n.qp, validAttr(from, to), mask)
		st := n.e.Query(n.qp).State
		if ps := n.qp.State(); ps != st {
			t.Errorf("posting path sees %v, engine %v", ps, st)
		}
		return st, err
	}
	cell, valid := ref[[2]QPState{from, to}]
	if to == QPSSQE {
		valid = false // only the NIC moves a QP to SQE
	}
	if !valid {
		st, err := modify(AttrState)
		if !errors.Is(err, ErrTransition) {
			t.Fatalf("illegal %v->%v: Modify = %v, want ErrTransition", from, to, err)
		}
		if st != from {
			t.Fatalf("refused Modify moved the QP to %v", st)
		}
		return
	}
	req, opt := cell.req[typeIdx(typ)], cell.opt[typeIdx(typ)]

	// Exactly the required attributes.
	if st, err := modify(AttrState | req); err != nil || st != to {
		t.Fatalf("Modify %v->%v with %v: %v (QP in %v)", from, to, req, err, st)
	}
	// Each required attribute left out.
	for _, b := range bits(req) {
		st, err := modify(AttrState | req&^b)
		if !errors.Is(err, ErrTransition) || !strings.Contains(err.Error(), b.String()) {
			t.Errorf("without required %v: Modify = %v, want ErrTransition naming it", b, err)
		}
		if st != from {
			t.Errorf("refused Modify moved the QP to %v", st)
		}
	}
	// Each other attribute added.
	for _, b := range allAttrs {
		if req&b != 0 {
			continue
		}
		st, err := modify(AttrState | req | b)
		switch {
		case opt&b == 0:
			if !errors.Is(err, ErrTransition) || !strings.Contains(err.Error(), b.String()) {
				t.Errorf("with %v (not taken by %v->%v): Modify = %v, want ErrTransition naming it", b, from, to, err)
			}
			if st != from {
				t.Errorf("refused Modify moved the QP to %v", st)
			}
		case b == AttrAltPath:
			// Allowed by the table, but this NIC has no alternate path
			// (APM): refused as such.
			if !errors.Is(err, ErrNotSupported) {
				t.Errorf("with optional ALT_PATH: Modify = %v, want ErrNotSupported", err)
			}
		default:
			if err != nil || st != to {
				t.Errorf("with optional %v: Modify = %v (QP in %v)", b, err, st)
			}
		}
	}
}

// TestModifyWithoutState checks that a Modify without AttrState stays in
// the current state and is judged by the (cur, cur) cell: RTS->RTS takes
// MIN_RNR_TIMER on RC but not a new path MTU.
func TestModifyWithoutState(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{})
	n.connect(gidPeer, peerQPN)
	if err := n.e.Modify(n.qp, &QPAttr{MinRNRTimer: 5}, AttrMinRNRTimer); err != nil {
		t.Fatalf("RTS MIN_RNR_TIMER: %v", err)
	}
	if a := n.e.Query(n.qp); a.State != QPSRTS || a.MinRNRTimer != 5 {
		t.Fatalf("Query: state %v min_rnr_timer %d, want RTS 5", a.State, a.MinRNRTimer)
	}
	err := n.e.Modify(n.qp, &QPAttr{PathMTU: wire.MTU512}, AttrPathMTU)
	if !errors.Is(err, ErrTransition) || !strings.Contains(err.Error(), "PATH_MTU") {
		t.Fatalf("RTS PATH_MTU: %v, want ErrTransition naming PATH_MTU", err)
	}
}

// TestModifyCurState checks IB_QP_CUR_STATE: a cur_state that is not the
// QP's state is refused (ib_modify_qp: "Assume this is the current QP
// state"), and the QP is left as it was.
func TestModifyCurState(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{})
	n.modifyTo(QPSRTR, gidPeer, peerQPN)
	a, m := n.rtsAttr()
	a.CurState = QPSInit
	if err := n.e.Modify(n.qp, &a, m|AttrCurState); !errors.Is(err, ErrAttr) {
		t.Fatalf("wrong cur_state: %v, want ErrAttr", err)
	}
	if got := n.e.Query(n.qp).State; got != QPSRTR {
		t.Fatalf("QP in %v after a refused Modify", got)
	}
	a.CurState = QPSRTR
	if err := n.e.Modify(n.qp, &a, m|AttrCurState); err != nil {
		t.Fatalf("right cur_state: %v", err)
	}
}

// TestModifyValueRanges checks the value checks of Modify (IBTA §11.2.4.2
// and the ibv_qp_attr field widths): each out-of-range value is refused
// with ErrAttr naming the field, its in-range neighbour accepted, and a
// refused Modify changes nothing.
func TestModifyValueRanges(t *testing.T) {
	type step int
	const (
		toRTR step = iota // INIT -> RTR
		toRTS             // RTR -> RTS
		toInit
	)
	tests := []struct {
		name    string
		cfg     nodeConfig
		step    step
		set     func(a *QPAttr, ok bool)
		wantErr error
		field   string
	}{
		{name: "timeout 5 bits", step: toRTS, field: "timeout",
			set: func(a *QPAttr, ok bool) { a.Timeout = pick[uint8](ok, 31, 32) }},
		{name: "retry_cnt 3 bits", step: toRTS, field: "retry_cnt",
			set: func(a *QPAttr, ok bool) { a.RetryCnt = pick[uint8](ok, 7, 8) }},
		{name: "rnr_retry 3 bits", step: toRTS, field: "rnr_retry",
			set: func(a *QPAttr, ok bool) { a.RNRRetry = pick[uint8](ok, 7, 8) }},
		{name: "min_rnr_timer 5 bits", step: toRTR, field: "min_rnr_timer",
			set: func(a *QPAttr, ok bool) { a.MinRNRTimer = pick[uint8](ok, 31, 32) }},
		{name: "path_mtu above the port's active MTU", cfg: nodeConfig{localMTU: wire.MTU1024}, step: toRTR, field: "path_mtu",
			set: func(a *QPAttr, ok bool) { a.PathMTU = pick(ok, wire.MTU1024, wire.MTU2048) }},
		{name: "path_mtu not an MTU", step: toRTR, field: "path_mtu",
			set: func(a *QPAttr, ok bool) { a.PathMTU = pick(ok, wire.MTU4096, wire.MTU(6)) }},
		{name: "path_mtu zero", step: toRTR, field: "path_mtu",
			set: func(a *QPAttr, ok bool) { a.PathMTU = pick(ok, wire.MTU256, wire.MTU(0)) }},
		{name: "max_rd_atomic above the device max", cfg: nodeConfig{devRdAtom: 4}, step: toRTS, field: "max_rd_atomic",
			set: func(a *QPAttr, ok bool) { a.MaxRdAtomic = pick[uint8](ok, 4, 5) }},
		{name: "max_dest_rd_atomic above the device max", cfg: nodeConfig{devRdAtom: 4}, step: toRTR, field: "max_dest_rd_atomic",
			set: func(a *QPAttr, ok bool) { a.MaxDestRdAtomic = pick[uint8](ok, 4, 5) }},
		{name: "sq_psn 24 bits", step: toRTS, field: "sq_psn",
			set: func(a *QPAttr, ok bool) { a.SQPSN = pick[wire.PSN](ok, 0xFFFFFF, 0x1000000) }},
		{name: "rq_psn 24 bits", step: toRTR, field: "rq_psn",
			set: func(a *QPAttr, ok bool) { a.RQPSN = pick[wire.PSN](ok, 0xFFFFFF, 0x1000000) }},
		{name: "dest_qp_num 24 bits", step: toRTR, field: "dest_qp_num",
			set: func(a *QPAttr, ok bool) { a.DestQPN = pick[uint32](ok, 0xFFFFFF, 0x1000000) }},
		{name: "address vector without a destination", step: toRTR, field: "destination",
			set: func(a *QPAttr, ok bool) {
				if !ok {
					a.AV.Dst = wire.GID{}
				}
			}},
		{name: "port", step: toInit, field: "port",
			set: func(a *QPAttr, ok bool) { a.Port = pick[uint8](ok, 1, 2) }},
		{name: "pkey_index", step: toInit, field: "pkey_index",
			set: func(a *QPAttr, ok bool) { a.PKeyIndex = pick[uint16](ok, 0, 1) }},
		{name: "access flags", step: toInit, field: "qp_access_flags",
			set: func(a *QPAttr, ok bool) {
				a.AccessFlags = pick(ok, atu.LocalWrite|atu.RemoteAtomic|atu.MWBind, atu.LocalWrite|atu.ZeroBased)
			}},
	}
	for _, tc := range tests {
		for _, ok := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ok=%v", tc.name, ok), func(t *testing.T) {
				c := tc.cfg
				c.memSize = 4096
				n := newNode(t, "E", gidA, c)
				var a QPAttr
				var m AttrMask
				switch tc.step {
				case toInit:
					a, m = n.initAttr()
				case toRTR:
					n.modifyTo(QPSInit, gidPeer, peerQPN)
					a, m = n.rtrAttr(gidPeer, peerQPN)
				case toRTS:
					n.modifyTo(QPSRTR, gidPeer, peerQPN)
					a, m = n.rtsAttr()
				}
				before := n.e.Query(n.qp)
				tc.set(&a, ok)
				err := n.e.Modify(n.qp, &a, m)
				if ok {
					if err != nil {
						t.Fatalf("in-range value refused: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrAttr) || !strings.Contains(err.Error(), tc.field) {
					t.Fatalf("Modify = %v, want ErrAttr naming %q", err, tc.field)
				}
				if after := n.e.Query(n.qp); after != before {
					t.Fatalf("refused Modify changed the QP:\n before %+v\n after  %+v", before, after)
				}
			})
		}
	}
}

func pick[T any](ok bool, good, bad T) T {
	if ok {
		return good
	}
	return bad
}

// TestModifyUnsupported checks the attributes this NIC refuses as not
// supported (alternate paths, resizing, rate limits), whatever the table
// allows.
func TestModifyUnsupported(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{})
	n.modifyTo(QPSInit, gidPeer, peerQPN)
	a, m := n.rtrAttr(gidPeer, peerQPN)
	if err := n.e.Modify(n.qp, &a, m|AttrAltPath); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("ALT_PATH: %v, want ErrNotSupported", err)
	}
	if _, err := n.e.CreateQP(&QPInit{Type: QPType(9), SendCQ: n.scq, RecvCQ: n.rcq}, 0x30, 9); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("CreateQP of type 9: %v, want ErrNotSupported", err)
	}
	if _, err := n.e.CreateQP(&QPInit{Type: RC}, 0x30, 9); !errors.Is(err, ErrAttr) {
		t.Fatalf("CreateQP without CQs: %v, want ErrAttr", err)
	}
}

// errSetup puts a solo RC QP in a state with work everywhere: two receive
// WQEs queued and one taken by a SEND in progress, two send WQEs sent and
// unacknowledged (one unsignaled), one posted and not sent.
func errSetup(t *testing.T) *solo {
	s := newSolo(t, nodeConfig{})
	n := s.n
	n.postRecv(n.recvWR(10, 0, 4096), n.recvWR(11, 4096, 4096), n.recvWR(12, 8192, 4096))
	// The peer starts a SEND: receive WQE 10 is taken.
	if out := s.send(hdrs{Op: wire.OpRCSendFirst, PSN: 0, Payload: pattern(1024, 1)}); len(out) != 0 {
		t.Fatalf("SEND FIRST answered: %s", describeAll(out))
	}
	n.post(
		SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 10)}},
		SendWR{WRID: 2, Opcode: WRRDMAWrite, SGL: []SGE{n.sge(0, 2000)}, RemoteAddr: 0x1000, RKey: 0x99},
	)
	if out := s.run(); len(out) != 3 {
		t.Fatalf("sent %d frames, want 3", len(out))
	}
	n.post(SendWR{WRID: 3, Opcode: WRRDMARead, SGL: []SGE{n.sge(0, 8)}, RemoteAddr: 0x1000, RKey: 0x99})
	return s
}

// TestErrFlushesInOrder checks the move to ERR (IBTA §10.3.1 "Error":
// every outstanding and every later WR completes with WR_FLUSH_ERR, in
// posting order, signaled or not; §11.4.2.1).
func TestErrFlushesInOrder(t *testing.T) {
	s := errSetup(t)
	n := s.n
	if err := n.e.Modify(n.qp, &QPAttr{State: QPSErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	s.run()
	want := []WC{{WRID: 1, Status: WCWRFlushErr, Opcode: WCSend}, {WRID: 2, Status: WCWRFlushErr, Opcode: WCRDMAWrite},
		{WRID: 3, Status: WCWRFlushErr, Opcode: WCRDMARead}}
	expectWCs(t, n.sendWCs(), want...)
	expectWCs(t, n.recvWCs(), WC{WRID: 10, Status: WCWRFlushErr, Opcode: WCRecv},
		WC{WRID: 11, Status: WCWRFlushErr, Opcode: WCRecv}, WC{WRID: 12, Status: WCWRFlushErr, Opcode: WCRecv})

	// WRs posted to a QP in ERR are flushed too (after the doorbell).
	n.post(SendWR{WRID: 4, Opcode: WRSend, SGL: []SGE{n.sge(0, 10)}})
	n.postRecv(n.recvWR(13, 0, 64))
	if out := s.run(); len(out) != 0 {
		t.Fatalf("QP in ERR sent %d frames", len(out))
	}
	expectWCs(t, n.sendWCs(), WC{WRID: 4, Status: WCWRFlushErr, Opcode: WCSend})
	expectWCs(t, n.recvWCs(), WC{WRID: 13, Status: WCWRFlushErr, Opcode: WCRecv})

	// A QP in ERR ignores the wire (IBTA §10.3.1: no packets processed).
	out := s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 1, AckReq: true})
	if len(out) != 0 {
		t.Fatalf("QP in ERR answered: %s", describeAll(out))
	}
	// Timers are off: nothing fires later.
	if out := s.tickAt(1e12); len(out) != 0 {
		t.Fatalf("QP in ERR retransmitted: %s", describeAll(out))
	}
}

// TestResetDiscardsWork checks the move to RESET (IBTA §10.3.1 "Reset":
// the work queues are emptied without completions, attributes return to
// their defaults) and that a reset QP starts afresh when connected again.
func TestResetDiscardsWork(t *testing.T) {
	s := errSetup(t)
	n := s.n
	if err := n.e.Modify(n.qp, &QPAttr{State: QPSReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	s.run()
	if wcs := append(n.sendWCs(), n.recvWCs()...); len(wcs) != 0 {
		t.Fatalf("RESET produced completions:\n%s", wcString(wcs))
	}
	a := n.e.Query(n.qp)
	if a.State != QPSReset || a.DestQPN != 0 || a.PathMTU != 0 || a.Timeout != 0 || a.RQPSN != 0 {
		t.Fatalf("after RESET: %+v", a)
	}
	if _, err := n.qp.PostRecv([]RecvWR{n.recvWR(1, 0, 8)}); !errors.Is(err, ErrQPState) {
		t.Fatalf("PostRecv in RESET: %v, want ErrQPState", err)
	}
	if _, err := n.qp.PostSend([]SendWR{{Opcode: WRSend}}); !errors.Is(err, ErrQPState) {
		t.Fatalf("PostSend in RESET: %v, want ErrQPState", err)
	}
	// Nothing fires later.
	if out := s.tickAt(1e12); len(out) != 0 {
		t.Fatalf("reset QP sent: %s", describeAll(out))
	}

	// Connected again, the old WQEs are gone: a new SEND goes out at the
	// new sq_psn as an ONLY, and the responder expects the new rq_psn.
	n.cfg.sqPSN, n.cfg.rqPSN = 500, 900
	n.connect(gidPeer, peerQPN)
	n.post(SendWR{WRID: 9, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 4)}})
	expectFrames(t, s.run(), checks(opcode(wire.OpRCSendOnly), psn(500)))
	n.postRecv(n.recvWR(20, 0, 64))
	expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 900, AckReq: true}),
		checks(opcode(wire.OpRCAck), psn(900), syndrome(synACK), msn(1)))
	expectWCs(t, n.recvWCs(), WC{WRID: 20, Status: WCSuccess, Opcode: WCRecv})
}

// TestSQDDrains checks Send Queue Drain (IBTA §10.3.1 "SQ Drain", §11.6.3
// "Send Queue Drained"): a message in progress is finished, no new one is
// started, and once every outstanding message is acknowledged the QP
// raises SQ_DRAINED if en_sqd_async_notify was set. Back in RTS, the
// queued work proceeds.
func TestSQDDrains(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify=%v", notify), func(t *testing.T) {
			s := newSolo(t, nodeConfig{maxUnacked: 2})
			n := s.n
			n.post(
				SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{n.sge(0, 3000)}, RemoteAddr: 0x1000, RKey: 7},
				SendWR{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 10)}},
			)
			// The window (2 unacked PSNs) stops the WRITE after 2 packets.
			expectFrames(t, s.run(), checks(opcode(wire.OpRCWriteFirst), psn(0)), checks(opcode(wire.OpRCWriteMiddle), psn(1)))
			if err := n.e.Modify(n.qp, &QPAttr{State: QPSSQD, EnSQDAsyncNotify: notify}, AttrState|AttrEnSQDAsyncNotify); err != nil {
				t.Fatal(err)
			}
			if a := n.e.Query(n.qp); a.State != QPSSQD || !a.SQDraining {
				t.Fatalf("after RTS->SQD: state %v draining %v", a.State, a.SQDraining)
			}
			// An ACK of PSN 0 opens the window: the WRITE is finished...
			expectFrames(t, s.send(hdrs{Op: wire.OpRCAck, PSN: 0, Syn: synACK}),
				checks(opcode(wire.OpRCWriteLast), psn(2)))
			if slices.Contains(n.eventTypes(), EventSQDrained) {
				t.Fatal("SQ_DRAINED before the WRITE was acknowledged")
			}
			// ...and acknowledged: drained, the SEND not started.
			if out := s.send(hdrs{Op: wire.OpRCAck, PSN: 2, Syn: synACK, MSN: 1}); len(out) != 0 {
				t.Fatalf("SQD started a new message: %s", describeAll(out))
			}
			expectWCs(t, n.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCRDMAWrite})
			got := slices.Contains(n.eventTypes(), EventSQDrained)
			if got != notify {
				t.Fatalf("SQ_DRAINED raised %v, want %v (events %v)", got, notify, n.eventTypes())
			}
			if a := n.e.Query(n.qp); a.SQDraining {
				t.Fatal("sq_draining still set once drained")
			}
			// The responder keeps working in SQD (IBTA: receive side unaffected).
			n.postRecv(n.recvWR(5, 0, 64))
			expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0, AckReq: true}),
				checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK)))
			// Back to RTS: the SEND goes out.
			if err := n.e.Modify(n.qp, &QPAttr{State: QPSRTS}, AttrState); err != nil {
				t.Fatal(err)
			}
			expectFrames(t, s.run(), checks(opcode(wire.OpRCSendOnly), psn(3)))
		})
	}
}

// TestSQDIdleDrainsAtOnce checks that a QP with nothing outstanding is
// drained as soon as it enters SQD.
func TestSQDIdleDrainsAtOnce(t *testing.T) {
	s := newSolo(t, nodeConfig{})
	if err := s.n.e.Modify(s.n.qp, &QPAttr{State: QPSSQD, EnSQDAsyncNotify: true}, AttrState|AttrEnSQDAsyncNotify); err != nil {
		t.Fatal(err)
	}
	if got := s.n.eventTypes(); !slices.Equal(got, []EventType{EventSQDrained}) {
		t.Fatalf("events %v, want [SQ_DRAINED]", got)
	}
}

// TestSQERecovers checks Send Queue Error for UC (IBTA §10.3.1 "SQ
// Error"): after a local send error the QP flushes later sends but keeps
// receiving; moving it back to RTS lets new sends go out.
func TestSQERecovers(t *testing.T) {
	c := nodeConfig{qpType: UC, memSize: 8192}
	n := newNode(t, "E", gidA, c)
	s := &solo{t: t, n: n}
	if !reach(t, n, QPSSQE) {
		t.Fatal("UC did not reach SQE")
	}
	n.post(SendWR{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 8)}})
	if out := s.run(); len(out) != 0 {
		t.Fatalf("QP in SQE sent: %s", describeAll(out))
	}
	expectWCs(t, n.sendWCs(), WC{WRID: 2, Status: WCWRFlushErr, Opcode: WCSend})
	// The receive side still works.
	n.postRecv(n.recvWR(7, 0, 64))
	s.send(hdrs{Op: wire.OpUCSendOnly, PSN: 0, Payload: pattern(8, 2)})
	expectWCs(t, n.recvWCs(), WC{WRID: 7, Status: WCSuccess, Opcode: WCRecv})
	if err := n.e.Modify(n.qp, &QPAttr{State: QPSRTS}, AttrState); err != nil {
		t.Fatal(err)
	}
	n.post(SendWR{WRID: 3, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 8)}})
	// The failed send used no PSN: the next one carries sq_psn (0).
	expectFrames(t, s.run(), checks(opcode(wire.OpUCSendOnly), psn(0)))
	expectWCs(t, n.sendWCs(), WC{WRID: 3, Status: WCSuccess, Opcode: WCSend})
}
