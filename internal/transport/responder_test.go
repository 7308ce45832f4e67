package transport

// Responder tests (IBTA Vol 1 §9.7.4 responder: receiving inbound request
// packets; §9.7.5 responder: generating responses; §9.9.3 responder error
// behaviour; §9.8 UC and UD), with a hand-played requester.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/wire"
)

// respSolo returns a solo RC engine with a receive WQE posted for each id.
func respSolo(t *testing.T, c nodeConfig, recvIDs ...uint64) *solo {
	t.Helper()
	s := newSolo(t, c)
	for _, id := range recvIDs {
		s.n.postRecv(s.n.recvWR(id, int(id%8)*4096, 4096))
	}
	return s
}

// TestResponderAckCoalescing checks ACK coalescing (IBTA §9.7.5.1.1: an
// ACK acknowledges every request up to its PSN, so the responder may
// answer several AckReq'd requests with one ACK): one ACK per QP per
// receive batch, carrying the highest PSN that asked for one and the MSN
// of the messages completed through it.
func TestResponderAckCoalescing(t *testing.T) {
	send := func(psn uint32, ack bool) hdrs {
		return hdrs{Op: wire.OpRCSendOnly, PSN: wire.PSN(psn), AckReq: ack, Payload: pattern(8, byte(psn))}
	}
	write := func(s *solo, psn uint32, ack bool) hdrs {
		return hdrs{Op: wire.OpRCWriteOnly, PSN: wire.PSN(psn), AckReq: ack, Payload: pattern(8, 1),
			RETH: reth{VA: s.n.addr(60000), RKey: s.n.key, Len: 8}}
	}
	t.Run("one batch", func(t *testing.T) {
		s := respSolo(t, nodeConfig{}, 1, 2, 3, 4, 5)
		out := s.send(send(0, true), send(1, true), send(2, true), send(3, true), send(4, true))
		expectFrames(t, out, checks(opcode(wire.OpRCAck), psn(4), syndrome(synACK), msn(5), destQP(peerQPN)))
		if got := len(s.n.recvWCs()); got != 5 {
			t.Fatalf("%d receive completions, want 5", got)
		}
	})
	t.Run("two batches", func(t *testing.T) {
		s := respSolo(t, nodeConfig{}, 1, 2, 3, 4, 5)
		expectFrames(t, s.send(send(0, true), send(1, true), send(2, true)), checks(opcode(wire.OpRCAck), psn(2), msn(3)))
		expectFrames(t, s.send(send(3, true), send(4, true)), checks(opcode(wire.OpRCAck), psn(4), msn(5)))
	})
	t.Run("writes and sends", func(t *testing.T) {
		s := respSolo(t, nodeConfig{}, 1, 2)
		out := s.send(write(s, 0, true), send(1, true), write(s, 2, true), send(3, true))
		expectFrames(t, out, checks(opcode(wire.OpRCAck), psn(3), msn(4)))
	})
	t.Run("no AckReq, no ACK", func(t *testing.T) {
		s := respSolo(t, nodeConfig{}, 1, 2)
		if out := s.send(send(0, false), write(s, 1, false)); len(out) != 0 {
			t.Fatalf("unrequested ACK: %s", describeAll(out))
		}
		// A later AckReq covers them (MSN counts both).
		expectFrames(t, s.send(send(2, true)), checks(opcode(wire.OpRCAck), psn(2), msn(3)))
	})
	t.Run("READ in the batch keeps PSN order", func(t *testing.T) {
		// The ACK for PSN 2 must not overtake the READ response of PSN 1
		// (responses go back in PSN order, IBTA §9.7.5.1.4).
		s := respSolo(t, nodeConfig{}, 1, 2)
		fill(s.n.mem[100:200], 4)
		out := s.send(send(0, true),
			hdrs{Op: wire.OpRCReadRequest, PSN: 1, RETH: reth{VA: s.n.addr(100), RKey: s.n.key, Len: 100}},
			send(2, true))
		expectFrames(t, out,
			checks(opcode(wire.OpRCReadRespOnly), psn(1), payload(s.n.mem[100:200])),
			checks(opcode(wire.OpRCAck), psn(2), msn(3)))
	})
}

// TestResponderCoalescedMSN checks the MSN of a coalesced ACK when the
// batch ends with a message that did not ask for an ACK (hardware
// requesters set AckReq only on some messages). IBTA §9.7.5.1.1 has the
// AETH carry the responder's MSN when the ACK is generated; this engine
// generates it at the end of the batch, so the MSN may count messages
// after the ACKed PSN, but never fewer than those up to it, nor more than
// were received.
func TestResponderCoalescedMSN(t *testing.T) {
	s := respSolo(t, nodeConfig{}, 1, 2)
	out := s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0, AckReq: true}, hdrs{Op: wire.OpRCSendOnly, PSN: 1})
	if len(out) != 1 {
		t.Fatalf("%d frames, want one ACK:\n%s", len(out), describeAll(out))
	}
	p := expectFrame(t, out[0], opcode(wire.OpRCAck), syndrome(synACK))
	through := p.BTH.PSN() + 1 // messages completed through the ACKed PSN (one per PSN here)
	if m := p.AETH.MSN(); m < uint32(through) || m > 2 {
		t.Fatalf("ACK PSN %v with MSN %d: want MSN in [%d, 2]", p.BTH.PSN(), m, through)
	}
}

// TestResponderOutOfSequence checks a request ahead of the expected PSN
// (IBTA §9.7.5.1.2 "PSN sequence error", rxe check_psn): exactly one NAK
// PSN_SEQ_ERR (syndrome 0x60) carrying the expected PSN, nothing executed,
// then silence until the expected PSN arrives; after progress, a new gap
// is NAKed again.
func TestResponderOutOfSequence(t *testing.T) {
	s := respSolo(t, nodeConfig{}, 1, 2, 3)
	n := s.n
	w := func(p uint32) hdrs {
		return hdrs{Op: wire.OpRCWriteOnly, PSN: wire.PSN(p), AckReq: true, Payload: pattern(16, 0xEE),
			RETH: reth{VA: n.addr(1000), RKey: n.key, Len: 16}}
	}
	before := bytes.Clone(n.mem)
	expectFrames(t, s.send(w(2)), checks(opcode(wire.OpRCAck), psn(0), syndrome(synSeqErr), msn(0)))
	if uint8(synSeqErr) != 0x60 {
		t.Fatalf("PSN sequence error syndrome %#x, want 0x60", uint8(synSeqErr))
	}
	for _, p := range []uint32{3, 1, 2, 7} {
		if out := s.send(w(p)); len(out) != 0 {
			t.Fatalf("PSN %d after the NAK: answered %s", p, describeAll(out))
		}
	}
	if !bytes.Equal(n.mem, before) {
		t.Fatal("an out-of-sequence WRITE was executed")
	}
	// The expected PSN arrives: executed and ACKed.
	expectFrames(t, s.send(w(0)), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK), msn(1)))
	// A new gap is NAKed once more, with the new expected PSN.
	expectFrames(t, s.send(w(3)), checks(opcode(wire.OpRCAck), psn(1), syndrome(synSeqErr), msn(1)))
	expectFrames(t, s.send(w(1), w(2)), checks(opcode(wire.OpRCAck), psn(2), syndrome(synACK), msn(3)))
	if got, want := n.counter(OutOfSequence), uint64(6); got != want {
		t.Errorf("out_of_sequence %d, want %d", got, want)
	}
	if got := n.counter(SeqNAKSent); got != 2 {
		t.Errorf("seq_nak_sent %d, want 2", got)
	}
	if st := n.e.Query(n.qp).State; st != QPSRTS {
		t.Errorf("QP in %v", st)
	}
}

// TestResponderDuplicateSendWrite checks duplicate SEND and WRITE requests
// (IBTA §9.7.5.1.2 "duplicate requests", rxe RESPST_DUPLICATE_REQUEST):
// they are acknowledged with an ACK of the last PSN received (epsn-1) and
// not executed again: the target memory keeps a byte changed after the
// original, and no receive WQE is consumed.
func TestResponderDuplicateSendWrite(t *testing.T) {
	s := respSolo(t, nodeConfig{}, 1, 2)
	n := s.n
	wr := hdrs{Op: wire.OpRCWriteOnly, PSN: 0, AckReq: true, Payload: pattern(32, 7), RETH: reth{VA: n.addr(5000), RKey: n.key, Len: 32}}
	expectFrames(t, s.send(wr), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK), msn(1)))
	if !bytes.Equal(n.mem[5000:5032], wr.Payload) {
		t.Fatal("WRITE did not land")
	}
	n.mem[5010] ^= 0xFF // the application changes a byte after the WRITE
	changed := bytes.Clone(n.mem)
	expectFrames(t, s.send(wr), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK), msn(1)))
	if !bytes.Equal(n.mem, changed) {
		t.Fatal("a duplicate WRITE was executed again")
	}

	// A 3-packet SEND (PSN 1..3), then duplicates of its middle and of the
	// WRITE: ACK of epsn-1 (3), MSN 2, nothing consumed.
	msg := pattern(2500, 3)
	first := hdrs{Op: wire.OpRCSendFirst, PSN: 1, Payload: msg[:1024]}
	mid := hdrs{Op: wire.OpRCSendMiddle, PSN: 2, Payload: msg[1024:2048]}
	last := hdrs{Op: wire.OpRCSendLast, PSN: 3, AckReq: true, Payload: msg[2048:]}
	expectFrames(t, s.send(first, mid, last), checks(opcode(wire.OpRCAck), psn(3), msn(2)))
	expectWCs(t, n.recvWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCRecv})
	mem := bytes.Clone(n.mem)
	expectFrames(t, s.send(mid), checks(opcode(wire.OpRCAck), psn(3), syndrome(synACK), msn(2)))
	expectFrames(t, s.send(wr), checks(opcode(wire.OpRCAck), psn(3), syndrome(synACK), msn(2)))
	expectFrames(t, s.send(first, mid, last), checks(opcode(wire.OpRCAck), psn(3), syndrome(synACK), msn(2)))
	if !bytes.Equal(n.mem, mem) {
		t.Fatal("a duplicate SEND was placed again")
	}
	if wcs := n.recvWCs(); len(wcs) != 0 {
		t.Fatalf("a duplicate SEND completed a receive WQE:\n%s", wcString(wcs))
	}
	// The next new SEND takes receive WQE 2.
	s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 4, AckReq: true})
	expectWCs(t, n.recvWCs(), WC{WRID: 2, Status: WCSuccess, Opcode: WCRecv})
	if got := n.counter(DuplicateRequest); got != 6 {
		t.Errorf("duplicate_request %d, want 6", got)
	}
}

// TestResponderDuplicateRead checks duplicate READ requests (IBTA
// §9.7.5.1.2, §9.7.4.1.6 "RDMA READ ... retried requests"): the responder
// answers again, starting at the duplicate's PSN: the whole response for
// a repeat of the original request, and, for a request whose PSN lies
// inside the original response (the requester lost part of it and asks
// for the rest with an adjusted RETH), FIRST..LAST from that PSN with the
// bytes of that offset.
func TestResponderDuplicateRead(t *testing.T) {
	s := respSolo(t, nodeConfig{})
	n := s.n
	fill(n.mem[2000:5000], 11)
	src := n.mem[2000:5000]
	read := hdrs{Op: wire.OpRCReadRequest, PSN: 0, RETH: reth{VA: n.addr(2000), RKey: n.key, Len: 3000}}
	whole := []([]frameCheck){
		checks(opcode(wire.OpRCReadRespFirst), psn(0), payload(src[:1024]), syndrome(synACK)),
		checks(opcode(wire.OpRCReadRespMiddle), psn(1), payload(src[1024:2048])),
		checks(opcode(wire.OpRCReadRespLast), psn(2), payload(src[2048:]), padCount(0), syndrome(synACK)),
	}
	expectFrames(t, s.send(read), whole...)
	expectFrames(t, s.send(read), whole...)
	// Mid-message resume at PSN 1: VA and length adjusted by one MTU.
	resume := hdrs{Op: wire.OpRCReadRequest, PSN: 1, RETH: reth{VA: n.addr(2000 + 1024), RKey: n.key, Len: 3000 - 1024}}
	expectFrames(t, s.send(resume),
		checks(opcode(wire.OpRCReadRespFirst), psn(1), payload(src[1024:2048])),
		checks(opcode(wire.OpRCReadRespLast), psn(2), payload(src[2048:])))
	resume2 := hdrs{Op: wire.OpRCReadRequest, PSN: 2, RETH: reth{VA: n.addr(2000 + 2048), RKey: n.key, Len: 3000 - 2048}}
	expectFrames(t, s.send(resume2), checks(opcode(wire.OpRCReadRespOnly), psn(2), payload(src[2048:])))
	// The expected PSN did not move: the next new request is PSN 3.
	n.postRecv(n.recvWR(1, 0, 64))
	expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 3, AckReq: true}), checks(opcode(wire.OpRCAck), psn(3), syndrome(synACK)))
}

// TestResponderDuplicateReadAfterDereg: a READ is answered, then its
// region is deregistered (the requester has its data and the application
// moved on), then a duplicate of the READ arrives (a resend that raced the
// answer). The responder does not answer it and does not turn it into a
// remote access error: the connection stays up and the next request is
// served.
func TestResponderDuplicateReadAfterDereg(t *testing.T) {
	s := respSolo(t, nodeConfig{})
	n := s.n
	buf := make([]byte, 4096)
	key := n.regMR(testPD, buf, 0x700000, atu.RemoteRead|atu.LocalWrite)
	read := hdrs{Op: wire.OpRCReadRequest, PSN: 0, RETH: reth{VA: 0x700000, RKey: key, Len: 3000}}
	if out := s.send(read); len(out) != 3 {
		t.Fatalf("READ answered with %d frames, want 3", len(out))
	}
	if err := n.atu.DeregMR(key); err != nil {
		t.Fatal(err)
	}
	resume := hdrs{Op: wire.OpRCReadRequest, PSN: 1, RETH: reth{VA: 0x700000 + 1024, RKey: key, Len: 3000 - 1024}}
	if out := s.send(resume); len(out) != 0 {
		t.Fatalf("duplicate READ of a deregistered region answered with:\n%s", describeAll(out))
	}
	if st := n.e.Query(n.qp).State; st != QPSRTS {
		t.Fatalf("QP in %v after a stale duplicate READ, want RTS", st)
	}
	if got := n.counter(ReadReplayAborted); got != 1 {
		t.Errorf("read_replay_aborted %d, want 1", got)
	}
	n.postRecv(n.recvWR(1, 0, 64))
	expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 3, AckReq: true}), checks(opcode(wire.OpRCAck), psn(3), syndrome(synACK)))
}

// TestResponderDuplicateAtomic checks duplicate atomics (IBTA §9.7.5.1.2,
// §9.4.5 "the responder shall not re-execute a duplicate atomic; it
// returns the saved result"): memory is not changed a second time and the
// atomic ACK carries the original value of the first execution.
func TestResponderDuplicateAtomic(t *testing.T) {
	s := respSolo(t, nodeConfig{})
	n := s.n
	binary.NativeEndian.PutUint64(n.mem[64:], 100)
	fa := hdrs{Op: wire.OpRCFetchAdd, PSN: 0, Atomic: atomicETH{VA: n.addr(64), RKey: n.key, SwapAdd: 5}}
	expectFrames(t, s.send(fa), checks(opcode(wire.OpRCAtomicAck), psn(0), syndrome(synACK), origData(100), msn(1)))
	expectFrames(t, s.send(fa), checks(opcode(wire.OpRCAtomicAck), psn(0), syndrome(synACK), origData(100)))
	if v := hostU64(n.mem[64:]); v != 105 {
		t.Fatalf("after a duplicate FETCH_ADD memory holds %d, want 105", v)
	}
	cs := hdrs{Op: wire.OpRCCompareSwap, PSN: 1, Atomic: atomicETH{VA: n.addr(64), RKey: n.key, Compare: 105, SwapAdd: 7}}
	expectFrames(t, s.send(cs), checks(opcode(wire.OpRCAtomicAck), psn(1), origData(105)))
	expectFrames(t, s.send(cs), checks(opcode(wire.OpRCAtomicAck), psn(1), origData(105)))
	expectFrames(t, s.send(fa), checks(opcode(wire.OpRCAtomicAck), psn(0), origData(100)))
	if v := hostU64(n.mem[64:]); v != 7 {
		t.Fatalf("after duplicates memory holds %d, want 7", v)
	}
}

// TestResponderMissingFirst checks opcode sequence errors (IBTA §9.7.4.1.3
// "opcode sequence": a MIDDLE or LAST without the message's FIRST, or a
// new message inside one): NAK invalid request (syndrome 0x61) at the
// packet's PSN, the QP goes to ERR and raises a request error (§9.9.3.1).
func TestResponderMissingFirst(t *testing.T) {
	m := pattern(1024, 1)
	tests := []struct {
		name  string
		pre   []hdrs // accepted first
		bad   hdrs
		recvs int
	}{
		{"SEND MIDDLE", nil, hdrs{Op: wire.OpRCSendMiddle, Payload: m}, 1},
		{"SEND LAST", nil, hdrs{Op: wire.OpRCSendLast, Payload: m[:4]}, 1},
		{"SEND LAST IMM", nil, hdrs{Op: wire.OpRCSendLastImm, Payload: m[:4]}, 1},
		{"SEND LAST INV", nil, hdrs{Op: wire.OpRCSendLastInv, Payload: m[:4]}, 1},
		{"WRITE MIDDLE", nil, hdrs{Op: wire.OpRCWriteMiddle, Payload: m}, 1},
		{"WRITE LAST", nil, hdrs{Op: wire.OpRCWriteLast, Payload: m[:4]}, 1},
		{"WRITE LAST IMM", nil, hdrs{Op: wire.OpRCWriteLastImm, Payload: m[:4]}, 1},
		{"WRITE MIDDLE in a SEND", []hdrs{{Op: wire.OpRCSendFirst, Payload: m}}, hdrs{Op: wire.OpRCWriteMiddle, Payload: m}, 1},
		{"SEND ONLY in a SEND", []hdrs{{Op: wire.OpRCSendFirst, Payload: m}}, hdrs{Op: wire.OpRCSendOnly, Payload: m[:4]}, 2},
		{"READ in a WRITE", []hdrs{{Op: wire.OpRCWriteFirst, Payload: m, RETH: reth{VA: memIOVA, Len: 4096}}}, hdrs{Op: wire.OpRCReadRequest}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{})
			n := s.n
			for i := range tc.recvs {
				n.postRecv(n.recvWR(uint64(i+1), i*4096, 4096))
			}
			for i, h := range tc.pre {
				h.PSN = wire.PSN(i)
				if h.RETH.Len != 0 {
					h.RETH.RKey = n.key
				}
				if out := s.send(h); len(out) != 0 {
					t.Fatalf("setup packet answered: %s", describeAll(out))
				}
			}
			bad := tc.bad
			bad.PSN = wire.PSN(len(tc.pre))
			bad.AckReq = true
			before := bytes.Clone(n.mem)
			expectFrames(t, s.send(bad), checks(opcode(wire.OpRCAck), psn(uint32(bad.PSN)), syndrome(synInvReq)))
			if uint8(synInvReq) != 0x61 {
				t.Fatalf("invalid request syndrome %#x, want 0x61", uint8(synInvReq))
			}
			if st := n.e.Query(n.qp).State; st != QPSErr {
				t.Errorf("QP in %v, want ERR", st)
			}
			if !slices.Contains(n.eventTypes(), EventQPReqErr) {
				t.Errorf("events %v, want a QP request error", n.eventTypes())
			}
			if tc.pre == nil && !bytes.Equal(n.mem, before) {
				t.Error("the refused packet was executed")
			}
		})
	}
}

// TestResponderLengthErrors checks length errors (IBTA §9.7.4.1.5
// "length": FIRST and MIDDLE carry exactly one path MTU, LAST 1..MTU,
// ONLY 0..MTU; the bytes of an RDMA WRITE must add up to the RETH's DMA
// length): NAK invalid request.
func TestResponderLengthErrors(t *testing.T) {
	tests := []struct {
		name    string
		pkts    func(n *node) []hdrs
		badPSN  uint32
		wantSyn wire.Syndrome
	}{
		{"WRITE beyond the RETH length", func(n *node) []hdrs {
			return []hdrs{
				{Op: wire.OpRCWriteFirst, Payload: pattern(1024, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 1500}},
				{Op: wire.OpRCWriteLast, Payload: pattern(1024, 2)},
			}
		}, 1, synInvReq},
		{"WRITE ONLY longer than its RETH", func(n *node) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(100, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 50}}}
		}, 0, synInvReq},
		{"WRITE ONLY shorter than its RETH", func(n *node) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(50, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 100}}}
		}, 0, synInvReq},
		{"WRITE LAST short of the RETH length", func(n *node) []hdrs {
			return []hdrs{
				{Op: wire.OpRCWriteFirst, Payload: pattern(1024, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 3000}},
				{Op: wire.OpRCWriteLast, Payload: pattern(100, 2)},
			}
		}, 1, synInvReq},
		{"WRITE FIRST shorter than the MTU", func(n *node) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteFirst, Payload: pattern(1000, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 3000}}}
		}, 0, synInvReq},
		{"SEND MIDDLE longer than the MTU", func(n *node) []hdrs {
			return []hdrs{{Op: wire.OpRCSendFirst, Payload: pattern(1024, 1)}, {Op: wire.OpRCSendMiddle, Payload: pattern(1028, 1)}}
		}, 1, synInvReq},
		{"SEND ONLY longer than the MTU", func(n *node) []hdrs {
			return []hdrs{{Op: wire.OpRCSendOnly, Payload: pattern(1028, 1)}}
		}, 0, synInvReq},
		{"SEND LAST empty", func(n *node) []hdrs {
			return []hdrs{{Op: wire.OpRCSendFirst, Payload: pattern(1024, 1)}, {Op: wire.OpRCSendLast}}
		}, 1, synInvReq},
		{"SEND longer than the receive WQE", func(n *node) []hdrs {
			// The receive WQE holds 4096 bytes; the fifth packet overflows
			// it (IBTA §9.9.3 responder errors: a local length error is NAKed as an
			// invalid request, rxe RESPST_ERR_LENGTH).
			var hs []hdrs
			hs = append(hs, hdrs{Op: wire.OpRCSendFirst, Payload: pattern(1024, 1)})
			for range 3 {
				hs = append(hs, hdrs{Op: wire.OpRCSendMiddle, Payload: pattern(1024, 1)})
			}
			return append(hs, hdrs{Op: wire.OpRCSendLast, Payload: pattern(4, 1)})
		}, 4, synInvReq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{}, 1)
			pk := tc.pkts(s.n)
			for i := range pk {
				pk[i].PSN = wire.PSN(i)
			}
			var out [][]byte
			for _, h := range pk {
				out = append(out, s.send(h)...)
			}
			expectFrames(t, out, checks(opcode(wire.OpRCAck), psn(tc.badPSN), syndrome(tc.wantSyn)))
			if st := s.n.e.Query(s.n.qp).State; st != QPSErr {
				t.Errorf("QP in %v, want ERR", st)
			}
		})
	}
}

// TestResponderAccessErrors checks R_Key validation (IBTA §9.7.4.1.4 / §10.6
// memory access: key, PD, bounds and rights; C9-88 for zero-length
// requests): every violation is NAKed with remote access error (syndrome
// 0x62) at the request's PSN, the QP goes to ERR with an access error
// event, and no byte of any region changes.
func TestResponderAccessErrors(t *testing.T) {
	type regions struct{ ro, wo, noAtomic, other uint32 }
	tests := []struct {
		name string
		req  func(n *node, r regions) []hdrs
	}{
		{"WRITE bad rkey", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(8, 1), RETH: reth{VA: n.addr(0), RKey: n.key + 1, Len: 8}}}
		}},
		{"WRITE beyond the end", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(20, 1), RETH: reth{VA: n.addr(len(n.mem) - 10), RKey: n.key, Len: 20}}}
		}},
		{"WRITE before the start", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(20, 1), RETH: reth{VA: n.base - 4, RKey: n.key, Len: 20}}}
		}},
		{"WRITE with wrapping VA", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(32, 1), RETH: reth{VA: ^uint64(0) - 15, RKey: n.key, Len: 32}}}
		}},
		{"WRITE to a read-only region", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(8, 1), RETH: reth{VA: 0x100000, RKey: r.ro, Len: 8}}}
		}},
		{"WRITE to another PD's region", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCWriteOnly, Payload: pattern(8, 1), RETH: reth{VA: 0x400000, RKey: r.other, Len: 8}}}
		}},
		{"READ from a write-only region", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCReadRequest, RETH: reth{VA: 0x200000, RKey: r.wo, Len: 8}}}
		}},
		{"READ beyond the end", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCReadRequest, RETH: reth{VA: n.addr(len(n.mem) - 100), RKey: n.key, Len: 3000}}}
		}},
		{"READ another PD's region", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCReadRequest, RETH: reth{VA: 0x400000, RKey: r.other, Len: 8}}}
		}},
		{"FETCH_ADD without atomic rights", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCFetchAdd, Atomic: atomicETH{VA: 0x300000, RKey: r.noAtomic, SwapAdd: 1}}}
		}},
		{"CMP_SWAP bad rkey", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCCompareSwap, Atomic: atomicETH{VA: n.addr(0), RKey: 0x12345678, SwapAdd: 1}}}
		}},
		{"FETCH_ADD past the end", func(n *node, r regions) []hdrs {
			return []hdrs{{Op: wire.OpRCFetchAdd, Atomic: atomicETH{VA: n.addr(len(n.mem)), RKey: n.key, SwapAdd: 1}}}
		}},
		{"WRITE after a good one, bad rkey", func(n *node, r regions) []hdrs {
			return []hdrs{
				{Op: wire.OpRCWriteOnly, AckReq: true, Payload: pattern(8, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 8}},
				{Op: wire.OpRCWriteOnly, Payload: pattern(8, 1), RETH: reth{VA: n.addr(0), RKey: r.ro, Len: 8}},
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{})
			n := s.n
			bufs := [][]byte{make([]byte, 4096), make([]byte, 4096), make([]byte, 4096), make([]byte, 4096)}
			for i, b := range bufs {
				fill(b, byte(0x10*i))
			}
			r := regions{
				ro:       n.regMR(testPD, bufs[0], 0x100000, atu.RemoteRead),
				wo:       n.regMR(testPD, bufs[1], 0x200000, atu.LocalWrite|atu.RemoteWrite),
				noAtomic: n.regMR(testPD, bufs[2], 0x300000, atu.LocalWrite|atu.RemoteWrite|atu.RemoteRead),
				other:    n.regMR(otherPD, bufs[3], 0x400000, atu.LocalWrite|atu.RemoteWrite|atu.RemoteRead|atu.RemoteAtomic),
			}
			fill(n.mem, 0x77)
			pk := tc.req(n, r)
			var good [][]byte
			for i := range pk[:len(pk)-1] {
				pk[i].PSN = wire.PSN(i)
				good = append(good, s.send(pk[i])...)
			}
			memBefore := bytes.Clone(n.mem)
			var before [][]byte
			for _, b := range bufs {
				before = append(before, bytes.Clone(b))
			}
			bad := pk[len(pk)-1]
			bad.PSN = wire.PSN(len(pk) - 1)
			out := append(good, s.send(bad)...)
			want := []([]frameCheck){checks(opcode(wire.OpRCAck), psn(uint32(bad.PSN)), syndrome(synAccErr), destQP(peerQPN))}
			if len(pk) > 1 {
				want = append([]([]frameCheck){checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK))}, want...)
			}
			expectFrames(t, out, want...)
			if uint8(synAccErr) != 0x62 {
				t.Fatalf("remote access error syndrome %#x, want 0x62", uint8(synAccErr))
			}
			if !bytes.Equal(n.mem, memBefore) {
				t.Error("the main region changed")
			}
			for i, b := range bufs {
				if !bytes.Equal(b, before[i]) {
					t.Errorf("region %d changed", i)
				}
			}
			if st := n.e.Query(n.qp).State; st != QPSErr {
				t.Errorf("QP in %v, want ERR", st)
			}
			if !slices.Contains(n.eventTypes(), EventQPAccessErr) {
				t.Errorf("events %v, want a local access violation", n.eventTypes())
			}
			if n.counter(RespRemoteAccessErrors) != 1 {
				t.Errorf("resp_remote_access_errors %d, want 1", n.counter(RespRemoteAccessErrors))
			}
		})
	}
}

// TestResponderWriteRangeCheckedOnFirst checks that the R_Key check of an
// RDMA WRITE covers the whole RETH range on its FIRST packet (rxe
// check_rkey: mr_check_range(mr, va + offset, resid) with resid the DMA
// length still to come): a WRITE whose first packet fits in the region but
// whose message does not is NAKed with remote access error at the FIRST
// packet, and no byte of the region is written.
func TestResponderWriteRangeCheckedOnFirst(t *testing.T) {
	s := respSolo(t, nodeConfig{})
	n := s.n
	fill(n.mem, 0x77)
	before := bytes.Clone(n.mem)
	first := hdrs{Op: wire.OpRCWriteFirst, PSN: 0, Payload: pattern(1024, 1), RETH: reth{VA: n.addr(len(n.mem) - 2048), RKey: n.key, Len: 4096}}
	expectFrames(t, s.send(first), checks(opcode(wire.OpRCAck), psn(0), syndrome(synAccErr)))
	if !bytes.Equal(n.mem, before) {
		t.Error("the region was written")
	}
}

// TestResponderZeroLengthNoKeyCheck checks IBTA C9-88: a zero-length RDMA
// WRITE or READ carries no valid R_Key or VA, and the responder does not
// check them.
func TestResponderZeroLengthNoKeyCheck(t *testing.T) {
	s := respSolo(t, nodeConfig{})
	out := s.send(
		hdrs{Op: wire.OpRCWriteOnly, PSN: 0, AckReq: true, RETH: reth{VA: 1, RKey: 0xBAD, Len: 0}},
		hdrs{Op: wire.OpRCReadRequest, PSN: 1, RETH: reth{VA: 1, RKey: 0xBAD, Len: 0}})
	expectFrames(t, out,
		checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK)),
		checks(opcode(wire.OpRCReadRespOnly), psn(1), payloadLen(0), syndrome(synACK)))
	if st := s.n.e.Query(s.n.qp).State; st != QPSRTS {
		t.Fatalf("QP in %v", st)
	}
}

// TestResponderQPAccessFlags checks the QP's own access flags (IBTA
// §9.7.4.1.2 / rxe check_op_valid: an operation the QP does not enable is
// an invalid request, NAK 0x61), before any R_Key check.
func TestResponderQPAccessFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		access atu.Access
		req    func(n *node) hdrs
	}{
		{"WRITE", atu.LocalWrite | atu.RemoteRead | atu.RemoteAtomic, func(n *node) hdrs {
			return hdrs{Op: wire.OpRCWriteOnly, Payload: pattern(8, 1), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 8}}
		}},
		{"READ", atu.LocalWrite | atu.RemoteWrite | atu.RemoteAtomic, func(n *node) hdrs {
			return hdrs{Op: wire.OpRCReadRequest, RETH: reth{VA: n.addr(0), RKey: n.key, Len: 8}}
		}},
		{"ATOMIC", atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead, func(n *node) hdrs {
			return hdrs{Op: wire.OpRCFetchAdd, Atomic: atomicETH{VA: n.addr(0), RKey: n.key, SwapAdd: 1}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{access: tc.access})
			before := bytes.Clone(s.n.mem)
			expectFrames(t, s.send(tc.req(s.n)), checks(opcode(wire.OpRCAck), psn(0), syndrome(synInvReq)))
			if !bytes.Equal(before, s.n.mem) {
				t.Error("memory changed")
			}
			if st := s.n.e.Query(s.n.qp).State; st != QPSErr {
				t.Errorf("QP in %v, want ERR", st)
			}
		})
	}
}

// TestResponderMisalignedAtomic checks IBTA §9.4.5 (atomic operations
// address naturally aligned 8-byte words; rxe RESPST_ERR_MISALIGNED_ATOMIC):
// a misaligned atomic is an invalid request (NAK 0x61), memory untouched.
func TestResponderMisalignedAtomic(t *testing.T) {
	for _, op := range []wire.Opcode{wire.OpRCFetchAdd, wire.OpRCCompareSwap} {
		for _, off := range []int{1, 4, 7} {
			t.Run(fmt.Sprintf("%v+%d", op, off), func(t *testing.T) {
				s := respSolo(t, nodeConfig{})
				before := bytes.Clone(s.n.mem)
				out := s.send(hdrs{Op: op, Atomic: atomicETH{VA: s.n.addr(64 + off), RKey: s.n.key, SwapAdd: 1}})
				expectFrames(t, out, checks(opcode(wire.OpRCAck), psn(0), syndrome(synInvReq)))
				if !bytes.Equal(before, s.n.mem) {
					t.Error("memory changed")
				}
			})
		}
	}
}

// TestResponderTooManyReadAtomics checks max_dest_rd_atomic (IBTA
// §9.7.5 / §11.2.4.2 max_dest_rd_atomic: the responder accepts at most that many
// outstanding READ and atomic requests; one more is an invalid request,
// NAK 0x61).
func TestResponderTooManyReadAtomics(t *testing.T) {
	s := respSolo(t, nodeConfig{maxDestRdAtomic: 2})
	n := s.n
	rd := func(p uint32) hdrs {
		return hdrs{Op: wire.OpRCReadRequest, PSN: wire.PSN(p), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 16}}
	}
	fa := hdrs{Op: wire.OpRCFetchAdd, PSN: 2, Atomic: atomicETH{VA: n.addr(64), RKey: n.key, SwapAdd: 1}}
	before := hostU64(n.mem[64:])
	out := s.send(rd(0), rd(1), fa)
	if len(out) == 0 {
		t.Fatal("no answer")
	}
	expectFrame(t, out[len(out)-1], opcode(wire.OpRCAck), psn(2), syndrome(synInvReq))
	if hostU64(n.mem[64:]) != before {
		t.Error("the refused atomic was executed")
	}
	if st := n.e.Query(n.qp).State; st != QPSErr {
		t.Errorf("QP in %v, want ERR", st)
	}

	// Within the limit, answered requests free their resources: many
	// READs in separate batches all succeed.
	s = respSolo(t, nodeConfig{maxDestRdAtomic: 2})
	for i := range uint32(10) {
		h := hdrs{Op: wire.OpRCReadRequest, PSN: wire.PSN(i), RETH: reth{VA: s.n.addr(0), RKey: s.n.key, Len: 16}}
		expectFrames(t, s.send(h), checks(opcode(wire.OpRCReadRespOnly), psn(i)))
	}
}

// TestResponderAnswersWithinLimitFirst sends 20 READ requests back to back
// to a responder with 16 resources (the hardening issue's defect 7): the
// 17th is an invalid request, but the 16 before it were legal and are
// answered first, in PSN order (IBTA 9.7.5.2); only then comes the NAK at
// PSN 16, and the QP enters ERR. What arrives after the error is dropped.
// An access error behind queued responses waits for them the same way.
func TestResponderAnswersWithinLimitFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bad   func(n *node, psn uint32) hdrs // the request at PSN 16
		syn   wire.Syndrome
		event EventType
	}{
		{"17th READ", func(n *node, p uint32) hdrs {
			return hdrs{Op: wire.OpRCReadRequest, PSN: wire.PSN(p), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 16}}
		}, synInvReq, EventQPReqErr},
		{"WRITE with a bad rkey", func(n *node, p uint32) hdrs {
			return hdrs{Op: wire.OpRCWriteOnly, PSN: wire.PSN(p), AckReq: true, Payload: pattern(8, 1),
				RETH: reth{VA: n.addr(0), RKey: n.key + 0x100, Len: 8}}
		}, wire.SyndromeNAK(wire.NAKRemoteAccessErr), EventQPAccessErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{maxDestRdAtomic: 16, pathMTU: wire.MTU1024})
			n := s.n
			var reqs []hdrs
			for i := range uint32(16) {
				reqs = append(reqs, hdrs{Op: wire.OpRCReadRequest, PSN: wire.PSN(i), RETH: reth{VA: n.addr(int(i) * 8), RKey: n.key, Len: 8}})
			}
			reqs = append(reqs, tc.bad(n, 16))
			for i := uint32(17); i < 20; i++ {
				reqs = append(reqs, hdrs{Op: wire.OpRCReadRequest, PSN: wire.PSN(i), RETH: reth{VA: n.addr(0), RKey: n.key, Len: 8}})
			}
			fill(n.mem[:128], 7)
			out := s.send(reqs...)
			var want [][]frameCheck
			for i := range uint32(16) {
				want = append(want, checks(opcode(wire.OpRCReadRespOnly), psn(i), payload(n.mem[i*8:i*8+8])))
			}
			want = append(want, checks(opcode(wire.OpRCAck), psn(16), syndrome(tc.syn)))
			expectFrames(t, out, want...)
			if st := n.e.Query(n.qp).State; st != QPSErr {
				t.Errorf("QP in %v, want ERR", st)
			}
			if ev := n.eventTypes(); len(ev) != 1 || ev[0] != tc.event {
				t.Errorf("events %v, want [%v]", ev, tc.event)
			}
			if got := n.counter(RxBadState); got != 3 {
				t.Errorf("%d requests after the error dropped, want 3", got)
			}
		})
	}
}

// TestResponderRNR checks "receiver not ready" (IBTA §9.7.5.1.3, §9.9.3.1.2
// RNR NAK): a SEND (or WRITE with immediate) with no receive WQE is NAKed
// with syndrome 0x20|min_rnr_timer at its own PSN, nothing is placed, the
// expected PSN does not advance (the retry is not a duplicate) and the QP
// stays in RTS.
func TestResponderRNR(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(n *node) hdrs
	}{
		{"SEND ONLY", func(n *node) hdrs { return hdrs{Op: wire.OpRCSendOnly, AckReq: true, Payload: pattern(8, 1)} }},
		{"SEND FIRST", func(n *node) hdrs { return hdrs{Op: wire.OpRCSendFirst, Payload: pattern(1024, 1)} }},
		{"WRITE ONLY IMM", func(n *node) hdrs {
			return hdrs{Op: wire.OpRCWriteOnlyImm, AckReq: true, Payload: pattern(8, 1), RETH: reth{VA: n.addr(100), RKey: n.key, Len: 8}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{minRNRTimer: 14})
			n := s.n
			// One message first, so that the MSN is 1.
			n.postRecv(n.recvWR(1, 0, 64))
			s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0})
			before := bytes.Clone(n.mem)
			h := tc.req(n)
			h.PSN = 1
			expectFrames(t, s.send(h), checks(opcode(wire.OpRCAck), psn(1), syndrome(wire.SyndromeRNR(14)), msn(1)))
			if got := uint8(wire.SyndromeRNR(14)); got != 0x20|14 {
				t.Fatalf("RNR syndrome %#x, want %#x", got, 0x20|14)
			}
			if !bytes.Equal(before, n.mem) {
				t.Error("memory changed under an RNR NAK")
			}
			if st := n.e.Query(n.qp).State; st != QPSRTS {
				t.Fatalf("QP in %v", st)
			}
			// The requester retries the same PSN once a WQE is posted.
			n.postRecv(n.recvWR(2, 4096, 4096))
			h.AckReq = true
			if h.Op == wire.OpRCSendFirst {
				s.send(h)
				h = hdrs{Op: wire.OpRCSendLast, PSN: 2, AckReq: true, Payload: pattern(4, 1)}
			}
			expectFrames(t, s.send(h), checks(opcode(wire.OpRCAck), psn(uint32(h.PSN)), syndrome(synACK), msn(2)))
			wcs := n.recvWCs()
			if len(wcs) != 2 || wcs[1].WRID != 2 || wcs[1].Status != WCSuccess {
				t.Fatalf("completions:\n%s", wcString(wcs))
			}
			if n.counter(RNRNAKSent) != 1 {
				t.Errorf("rnr_nak_sent %d", n.counter(RNRNAKSent))
			}
		})
	}
}

// TestResponderUCLoss checks UC reception (IBTA §9.8.2 "UC responder": no
// ACKs; a PSN gap aborts the message in progress, which is silently
// dropped, and reception resumes at the next FIRST or ONLY; the receive
// WQE the aborted message had taken is used for the next message).
func TestResponderUCLoss(t *testing.T) {
	s := newSolo(t, nodeConfig{qpType: UC})
	n := s.n
	n.postRecv(n.recvWR(1, 0, 4096), n.recvWR(2, 4096, 4096))
	a, b, c := pattern(1024, 1), pattern(1024, 2), pattern(100, 3)
	var out [][]byte
	out = append(out, s.send(hdrs{Op: wire.OpUCSendFirst, PSN: 0, Payload: a})...)
	// PSN 1 (SEND MIDDLE) is lost.
	out = append(out, s.send(hdrs{Op: wire.OpUCSendLast, PSN: 2, Payload: b[:10]})...)
	if wcs := n.recvWCs(); len(wcs) != 0 {
		t.Fatalf("a message with a hole completed:\n%s", wcString(wcs))
	}
	// The next message takes the same receive WQE (1).
	out = append(out, s.send(hdrs{Op: wire.OpUCSendOnly, PSN: 3, Payload: c})...)
	wcs := n.recvWCs()
	if len(wcs) != 1 || wcs[0].WRID != 1 || wcs[0].Status != WCSuccess || wcs[0].ByteLen != 100 {
		t.Fatalf("completions:\n%s", wcString(wcs))
	}
	if !bytes.Equal(n.mem[:100], c) {
		t.Error("the new message is not at the start of the reused WQE")
	}
	// A MIDDLE without a FIRST is dropped, the QP stays in RTS.
	out = append(out, s.send(hdrs{Op: wire.OpUCSendMiddle, PSN: 4, Payload: a})...)
	out = append(out, s.send(hdrs{Op: wire.OpUCSendLast, PSN: 5, Payload: a[:4]})...)
	// A WRITE with a hole, then a SEND: WQE 2.
	out = append(out, s.send(hdrs{Op: wire.OpUCWriteFirst, PSN: 6, Payload: a, RETH: reth{VA: n.addr(20000), RKey: n.key, Len: 3000}})...)
	out = append(out, s.send(hdrs{Op: wire.OpUCWriteLast, PSN: 8, Payload: a[:952]})...)
	out = append(out, s.send(hdrs{Op: wire.OpUCSendOnly, PSN: 9, Payload: c[:7]})...)
	if len(out) != 0 {
		t.Fatalf("UC responder sent: %s", describeAll(out))
	}
	expectWCs(t, n.recvWCs(), WC{WRID: 2, Status: WCSuccess, Opcode: WCRecv})
	if st := n.e.Query(n.qp).State; st != QPSRTS {
		t.Errorf("QP in %v", st)
	}
}

// TestResponderUD checks UD reception (IBTA §9.8.3 UD, §10.2.5 Q_Keys,
// §11.4.1.1 "the first 40 bytes of the receive buffer hold the GRH"; for
// RoCEv2 over IPv4 the IPv4 header fills its last 20 bytes, as rdma-core
// defines): a wrong Q_Key is dropped and counted without consuming a WQE;
// a good datagram lands after the GRH with WC flags GRH (and IMM),
// src_qp from the DETH and byte_len = 40 + payload.
func TestResponderUD(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{qpType: UD})
	n.connect(wire.GID{}, 0)
	s := &solo{t: t, n: n}
	n.postRecv(n.recvWR(1, 0, 4096), n.recvWR(2, 4096, 4096), n.recvWR(3, 8192, 50))
	for i := range n.mem[:12288] {
		n.mem[i] = 0xCC
	}
	data := pattern(100, 9)
	bad := s.frame(hdrs{Op: wire.OpUDSendOnly, PSN: 0, QKey: testQKey + 1, SrcQP: 0x77, Payload: data, Src: gidEvil})
	if out := s.inject(bad); len(out) != 0 {
		t.Fatalf("UD answered: %s", describeAll(out))
	}
	if got := n.e.Counters()[RxBadQKey]; got != 1 {
		t.Fatalf("rx_bad_qkey %d, want 1", got)
	}
	if wcs := n.recvWCs(); len(wcs) != 0 {
		t.Fatalf("a wrong Q_Key completed:\n%s", wcString(wcs))
	}
	good := s.frame(hdrs{Op: wire.OpUDSendOnlyImm, PSN: 77, QKey: testQKey, SrcQP: 0x77, Imm: 0xABCD, Payload: data, Src: gidEvil})
	s.inject(good)
	wcs := n.recvWCs()
	if len(wcs) != 1 {
		t.Fatalf("completions:\n%s", wcString(wcs))
	}
	wc := wcs[0]
	if wc.WRID != 1 || wc.Status != WCSuccess || wc.Flags&WCWithGRH == 0 || wc.Flags&WCWithImm == 0 ||
		wc.ImmData != 0xABCD || wc.SrcQP != 0x77 || wc.ByteLen != 140 || wc.QPNum != n.qp.QPN {
		t.Fatalf("completion %+v", wc)
	}
	if !bytes.Equal(n.mem[20:40], good[:20]) {
		t.Errorf("GRH bytes 20..40 % x, want the IPv4 header % x", n.mem[20:40], good[:20])
	}
	if !bytes.Equal(n.mem[40:140], data) {
		t.Error("payload not placed after the GRH")
	}
	if n.mem[140] != 0xCC {
		t.Error("bytes after the payload were written")
	}
	// A datagram larger than the receive buffer: local length error.
	s.inject(s.frame(hdrs{Op: wire.OpUDSendOnly, QKey: testQKey, SrcQP: 0x77, Payload: data}))
	expectWCs(t, n.recvWCs(), WC{WRID: 2, Status: WCSuccess, Opcode: WCRecv})
	s.inject(s.frame(hdrs{Op: wire.OpUDSendOnly, QKey: testQKey, SrcQP: 0x77, Payload: data}))
	expectWCs(t, n.recvWCs(), WC{WRID: 3, Status: WCLocLenErr, Opcode: WCRecv})
	// Over IPv6 the GRH area holds the IPv6 header itself.
	n.postRecv(n.recvWR(5, 0, 4096))
	v6src := wire.GIDFromAddr(netip.MustParseAddr("fd00::9"))
	f6 := buildFrame(hdrs{Op: wire.OpUDSendOnly, QKey: testQKey, SrcQP: 0x78, Payload: data}, v6src,
		wire.GIDFromAddr(netip.MustParseAddr("fd00::1")), n.qp.QPN)
	s.inject(f6)
	wcs = n.recvWCs()
	if len(wcs) != 1 || wcs[0].WRID != 5 || wcs[0].SrcQP != 0x78 || wcs[0].Flags&WCWithGRH == 0 {
		t.Fatalf("IPv6 completion:\n%s", wcString(wcs))
	}
	if !bytes.Equal(n.mem[:40], f6[:40]) || !bytes.Equal(n.mem[40:140], data) {
		t.Error("IPv6 GRH or payload not placed")
	}
	// No receive WQE left: dropped and counted.
	s.inject(s.frame(hdrs{Op: wire.OpUDSendOnly, QKey: testQKey, SrcQP: 0x77, Payload: data}))
	if got := n.counter(OutOfBuffer); got != 1 {
		t.Errorf("out_of_buffer %d, want 1", got)
	}
}

// TestReceiveDrops checks ingress validation (IBTA §9.6 "packet transport
// header validation", rxe rxe_recv.c): each malformed, misaddressed or
// misrouted frame is dropped without an answer, counted, and leaves the QP
// untouched (the next good packet is accepted at the same PSN).
func TestReceiveDrops(t *testing.T) {
	tests := []struct {
		name    string
		frame   func(s *solo) []byte
		counter Counter
	}{
		{"bad ICRC", func(s *solo) []byte {
			f := s.frame(hdrs{Op: wire.OpRCSendOnly, AckReq: true})
			f[len(f)-1] ^= 1
			return f
		}, RxICRCErrors},
		{"payload bit flip", func(s *solo) []byte {
			f := s.frame(hdrs{Op: wire.OpRCSendOnly, AckReq: true, Payload: pattern(8, 1)})
			f[len(f)-6] ^= 0x10
			return f
		}, RxICRCErrors},
		{"truncated", func(s *solo) []byte { return s.frame(hdrs{Op: wire.OpRCSendOnly})[:30] }, RxMalformed},
		{"unknown QPN", func(s *solo) []byte { return s.frame(hdrs{Op: wire.OpRCSendOnly, DestQP: 0x500}) }, RxUnknownQP},
		{"wrong transport", func(s *solo) []byte { return s.frame(hdrs{Op: wire.OpUCSendOnly, AckReq: true}) }, RxWrongTransport},
		{"UD opcode on RC", func(s *solo) []byte { return s.frame(hdrs{Op: wire.OpUDSendOnly, QKey: testQKey}) }, RxWrongTransport},
		{"bad P_Key", func(s *solo) []byte { return s.frame(hdrs{Op: wire.OpRCSendOnly, AckReq: true, PKey: 0x8001}) }, RxBadPKey},
		{"another source", func(s *solo) []byte { return s.frame(hdrs{Op: wire.OpRCSendOnly, AckReq: true, Src: gidEvil}) }, RxBadAddress},
		{"CNP", func(s *solo) []byte {
			f := s.frame(hdrs{Op: wire.OpCNP, Payload: make([]byte, wire.CNPReservedSize)})
			return f
		}, RxPackets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := respSolo(t, nodeConfig{}, 1)
			f := tc.frame(s)
			before := s.n.counter(tc.counter)
			if out := s.inject(f); len(out) != 0 {
				t.Fatalf("answered: %s", describeAll(out))
			}
			if tc.counter != RxPackets && s.n.counter(tc.counter) != before+1 {
				t.Errorf("%v %d, want %d", tc.counter, s.n.counter(tc.counter), before+1)
			}
			expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0, AckReq: true}), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK), msn(1)))
		})
	}
}

// TestResponderInRTR checks the RTR state (IBTA §10.3.1 "Ready to
// Receive": requests are processed, the first one raises COMM_EST;
// responses to the requester side are dropped).
func TestResponderInRTR(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{})
	n.modifyTo(QPSRTR, gidPeer, peerQPN)
	s := &solo{t: t, n: n}
	n.postRecv(n.recvWR(1, 0, 64))
	expectFrames(t, s.send(hdrs{Op: wire.OpRCSendOnly, AckReq: true}), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK)))
	if got := n.eventTypes(); !slices.Equal(got, []EventType{EventCommEst}) {
		t.Errorf("events %v, want [COMM_EST]", got)
	}
	if out := s.send(hdrs{Op: wire.OpRCAck, PSN: 0, Syn: synACK}); len(out) != 0 {
		t.Fatal("answered an ACK in RTR")
	}
	if n.e.Counters()[RxBadState] != 1 {
		t.Errorf("rx_bad_qp_state %d, want 1", n.e.Counters()[RxBadState])
	}
}

// TestResponderPSNWrap checks the responder's PSN arithmetic across the
// 24-bit wrap (IBTA §9.7.1.1: PSNs are compared modulo 2^24, half the
// space ahead, half behind): in-order packets cross 0xFFFFFF->0, a
// duplicate from before the wrap is ACKed with epsn-1, a packet ahead is
// NAKed with the wrapped expected PSN.
func TestResponderPSNWrap(t *testing.T) {
	s := respSolo(t, nodeConfig{rqPSN: 0xFFFFFE}, 1, 2, 3)
	send := func(p uint32, ack bool) hdrs { return hdrs{Op: wire.OpRCSendOnly, PSN: wire.PSN(p), AckReq: ack} }
	expectFrames(t, s.send(send(0xFFFFFE, false), send(0xFFFFFF, false), send(0, true)), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK), msn(3)))
	expectFrames(t, s.send(send(0xFFFFFF, true)), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK), msn(3)))
	expectFrames(t, s.send(send(5, true)), checks(opcode(wire.OpRCAck), psn(1), syndrome(synSeqErr)))
	// Half the PSN space behind is a duplicate, not a packet ahead.
	expectFrames(t, s.send(send(0x800001, true)), checks(opcode(wire.OpRCAck), psn(0), syndrome(synACK)))
	if len(s.n.recvWCs()) != 3 {
		t.Fatal("wrong number of receive completions")
	}
}
