package transport

// Requester tests: how work requests become packets (IBTA Vol 1 §9.7.1
// "requester: packet generation", §9.2 BTH fields, §9.4 opcode sequences).

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rnic/rnic/wire"
)

// wantPkt is one expected packet of a message.
type wantPkt struct {
	op wire.Opcode
	n  int // payload bytes
}

// TestRequesterOpcodeSequences checks the packets of every kind of
// message (IBTA §9.4.1 SEND, §9.4.3 RDMA WRITE, §9.4.4 READ, §9.4.5
// atomics; Table 38 opcodes): FIRST/MIDDLE/LAST for messages longer than
// the path MTU, ONLY otherwise; FIRST and MIDDLE carry exactly one MTU;
// the RETH only on the FIRST/ONLY packet of a WRITE, with the whole
// message length (§9.3.3); immediate data and the invalidate key only on
// the LAST/ONLY packet (§9.3.5, §9.3.7); the pad count makes payload+pad a
// multiple of 4 (§9.2 PadCnt); AckReq and SE only on the last packet
// (§9.2, §9.7.6.1.2); PSNs consecutive, a READ taking one PSN per response
// packet (§9.7.1.1) and an atomic one.
func TestRequesterOpcodeSequences(t *testing.T) {
	const mtu = 1024
	const raddr, rkey = 0x123456789000, 0x4242
	tests := []struct {
		name string
		wr   SendWR
		want []wantPkt
		// psns is the number of PSNs the message takes (default: packets).
		psns int
	}{
		{"send 0", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendOnly, 0}}, 0},
		{"send 1 (pad 3)", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendOnly, 1}}, 0},
		{"send 2 (pad 2)", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendOnly, 2}}, 0},
		{"send 3 (pad 1)", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendOnly, 3}}, 0},
		{"send mtu", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendOnly, mtu}}, 0},
		{"send mtu+1", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendFirst, mtu}, {wire.OpRCSendLast, 1}}, 0},
		{"send 3 mtu + 3", SendWR{Opcode: WRSend}, []wantPkt{{wire.OpRCSendFirst, mtu}, {wire.OpRCSendMiddle, mtu}, {wire.OpRCSendMiddle, mtu}, {wire.OpRCSendLast, 3}}, 0},
		{"send solicited", SendWR{Opcode: WRSend, Flags: SendSolicited}, []wantPkt{{wire.OpRCSendFirst, mtu}, {wire.OpRCSendLast, 2}}, 0},
		{"send imm only", SendWR{Opcode: WRSendWithImm, ImmData: 0xdeadbeef}, []wantPkt{{wire.OpRCSendOnlyImm, 5}}, 0},
		{"send imm", SendWR{Opcode: WRSendWithImm, ImmData: 0xdeadbeef}, []wantPkt{{wire.OpRCSendFirst, mtu}, {wire.OpRCSendMiddle, mtu}, {wire.OpRCSendLastImm, 6}}, 0},
		{"send inv only", SendWR{Opcode: WRSendWithInv, InvalidateRKey: 0x777}, []wantPkt{{wire.OpRCSendOnlyInv, 7}}, 0},
		{"send inv", SendWR{Opcode: WRSendWithInv, InvalidateRKey: 0x777}, []wantPkt{{wire.OpRCSendFirst, mtu}, {wire.OpRCSendLastInv, mtu}}, 0},
		{"write 0", SendWR{Opcode: WRRDMAWrite, RemoteAddr: raddr, RKey: rkey}, []wantPkt{{wire.OpRCWriteOnly, 0}}, 0},
		{"write 9", SendWR{Opcode: WRRDMAWrite, RemoteAddr: raddr, RKey: rkey}, []wantPkt{{wire.OpRCWriteOnly, 9}}, 0},
		{"write 3 mtu + 1", SendWR{Opcode: WRRDMAWrite, RemoteAddr: raddr, RKey: rkey},
			[]wantPkt{{wire.OpRCWriteFirst, mtu}, {wire.OpRCWriteMiddle, mtu}, {wire.OpRCWriteMiddle, mtu}, {wire.OpRCWriteLast, 1}}, 0},
		{"write imm only", SendWR{Opcode: WRRDMAWriteWithImm, RemoteAddr: raddr, RKey: rkey, ImmData: 1}, []wantPkt{{wire.OpRCWriteOnlyImm, 10}}, 0},
		{"write imm", SendWR{Opcode: WRRDMAWriteWithImm, RemoteAddr: raddr, RKey: rkey, ImmData: 1},
			[]wantPkt{{wire.OpRCWriteFirst, mtu}, {wire.OpRCWriteLastImm, 11}}, 0},
		{"read 1 packet", SendWR{Opcode: WRRDMARead, RemoteAddr: raddr, RKey: rkey}, []wantPkt{{wire.OpRCReadRequest, 0}}, 1},
		{"read 3 packets", SendWR{Opcode: WRRDMARead, RemoteAddr: raddr, RKey: rkey}, []wantPkt{{wire.OpRCReadRequest, 0}}, 3},
		{"read 0 bytes", SendWR{Opcode: WRRDMARead, RemoteAddr: raddr, RKey: rkey}, []wantPkt{{wire.OpRCReadRequest, 0}}, 1},
		{"cmp swap", SendWR{Opcode: WRAtomicCmpAndSwp, RemoteAddr: raddr, RKey: rkey, CompareAdd: 5, Swap: 6}, []wantPkt{{wire.OpRCCompareSwap, 0}}, 1},
		{"fetch add", SendWR{Opcode: WRAtomicFetchAndAdd, RemoteAddr: raddr, RKey: rkey, CompareAdd: 9}, []wantPkt{{wire.OpRCFetchAdd, 0}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSolo(t, nodeConfig{sqPSN: 100})
			n := s.n
			fill(n.mem, 9)
			length := 0
			for _, w := range tc.want {
				length += w.n
			}
			switch tc.wr.Opcode {
			case WRRDMARead:
				length = map[int]int{1: 100, 3: 2*mtu + 1}[tc.psns]
				if tc.name == "read 0 bytes" {
					length = 0
				}
			case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
				length = 8
			}
			wr := tc.wr
			wr.WRID = 1
			wr.SGL = []SGE{n.sge(64, length)}
			n.post(wr)
			// A marker SEND after the message shows the next free PSN.
			n.post(SendWR{WRID: 2, Opcode: WRSend})
			out := s.run()
			if len(out) != len(tc.want)+1 {
				t.Fatalf("got %d frames, want %d:\n%s", len(out), len(tc.want)+1, describeAll(out))
			}
			var got []byte
			for i, w := range tc.want {
				last := i == len(tc.want)-1
				p := expectFrame(t, out[i], opcode(w.op), psn(100+uint32(i)), destQP(peerQPN), payloadLen(w.n),
					padCount(wire.PadLen(w.n)), ackReq(last),
					solicited(last && wr.Flags&SendSolicited != 0))
				got = append(got, p.Payload...)
				if (p.RETH != nil) != (i == 0 && (wr.Opcode == WRRDMAWrite || wr.Opcode == WRRDMAWriteWithImm || wr.Opcode == WRRDMARead)) {
					t.Errorf("packet %d: RETH present %v", i, p.RETH != nil)
				}
				if p.RETH != nil {
					expectFrame(t, out[i], rethIs(raddr, rkey, uint32(length)))
				}
				if (p.ImmDt != nil) != (last && wr.Opcode == WRSendWithImm || last && wr.Opcode == WRRDMAWriteWithImm) {
					t.Errorf("packet %d: ImmDt present %v", i, p.ImmDt != nil)
				} else if p.ImmDt != nil && p.ImmDt.Imm() != wr.ImmData {
					t.Errorf("immediate %#x, want %#x", p.ImmDt.Imm(), wr.ImmData)
				}
				if (p.IETH != nil) != (last && wr.Opcode == WRSendWithInv) {
					t.Errorf("packet %d: IETH present %v", i, p.IETH != nil)
				} else if p.IETH != nil && p.IETH.RKey() != wr.InvalidateRKey {
					t.Errorf("IETH rkey %#x, want %#x", p.IETH.RKey(), wr.InvalidateRKey)
				}
				if a := p.AtomicETH; a != nil {
					wantSwap, wantCmp := wr.Swap, wr.CompareAdd
					if wr.Opcode == WRAtomicFetchAndAdd {
						wantSwap, wantCmp = wr.CompareAdd, 0
					}
					if a.VA() != raddr || a.RKey() != rkey || a.SwapAdd() != wantSwap || a.Compare() != wantCmp {
						t.Errorf("AtomicETH va %#x rkey %#x swap/add %d compare %d, want %#x %#x %d %d",
							a.VA(), a.RKey(), a.SwapAdd(), a.Compare(), uint64(raddr), rkey, wantSwap, wantCmp)
					}
				}
			}
			if wr.Opcode != WRRDMARead && wr.Opcode != WRAtomicCmpAndSwp && wr.Opcode != WRAtomicFetchAndAdd {
				if !bytes.Equal(got, n.mem[64:64+length]) {
					t.Errorf("payload of the message differs from the source buffer")
				}
			}
			next := 100 + uint32(len(tc.want))
			if tc.psns > 0 {
				next = 100 + uint32(tc.psns)
			}
			expectFrame(t, out[len(tc.want)], opcode(wire.OpRCSendOnly), psn(next))
		})
	}
}

// TestRequesterAckReqEvery checks that a long message asks for an ACK
// every AckReqEvery packets as well as on its last packet, so that the
// window keeps moving (rxe's RXE_MAX_PKT_PER_ACK; IBTA §9.7.6.1.2 lets the
// requester set AckReq on any packet and requires it on the last).
func TestRequesterAckReqEvery(t *testing.T) {
	s := newSolo(t, nodeConfig{ackReqEvery: 4})
	s.n.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, SGL: []SGE{s.n.sge(0, 10*1024)}, RemoteAddr: 0x1000, RKey: 1})
	out := s.run()
	if len(out) != 10 {
		t.Fatalf("%d frames, want 10", len(out))
	}
	for i, f := range out {
		expectFrame(t, f, psn(uint32(i)), ackReq(i == 3 || i == 7 || i == 9))
	}
}

// TestRequesterPSNWrap sends 40 packets starting at PSN 0xFFFFF0 through a
// pair: PSNs wrap from 0xFFFFFF to 0 (IBTA §9.7.1.1: PSNs are 24-bit,
// modulo 2^24), the responder accepts the wrap, the data lands and the
// completion and ACK come back with wrapped PSNs.
func TestRequesterPSNWrap(t *testing.T) {
	const start = 0xFFFFF0
	p := newPair(t, nodeConfig{sqPSN: start, pathMTU: wire.MTU256}, nodeConfig{pathMTU: wire.MTU256})
	fill(p.A.mem[:40*256], 5)
	p.A.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 40*256)}, RemoteAddr: p.B.addr(1000), RKey: p.B.key})
	p.B.postRecv(p.B.recvWR(9, 0, 64))
	p.A.post(SendWR{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 8)}})
	p.pump()
	if len(p.ab.log) != 41 {
		t.Fatalf("A sent %d frames, want 41:\n%s", len(p.ab.log), p.ab.ops())
	}
	for i, r := range p.ab.log {
		if want := wire.PSN(start).Add(uint32(i)); r.psn != want {
			t.Errorf("frame %d: PSN %v, want %v", i, r.psn, want)
		}
	}
	if p.ab.log[15].psn != 0xFFFFFF || p.ab.log[16].psn != 0 {
		t.Errorf("no wrap between frames 15 and 16: %v %v", p.ab.log[15].psn, p.ab.log[16].psn)
	}
	if !bytes.Equal(p.B.mem[1000:1000+40*256], p.A.mem[:40*256]) {
		t.Error("WRITE data did not land")
	}
	expectWCs(t, p.A.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCRDMAWrite}, WC{WRID: 2, Status: WCSuccess, Opcode: WCSend})
	expectWCs(t, p.B.recvWCs(), WC{WRID: 9, Status: WCSuccess, Opcode: WCRecv})
	last := p.ba.log[len(p.ba.log)-1]
	expectFrame(t, last.bytes, opcode(wire.OpRCAck), psn(0x18), syndrome(synACK), msn(2))
	if st := p.B.e.Query(p.B.qp); st.State != QPSRTS {
		t.Fatalf("B in %v", st.State)
	}
}

// TestRequesterWindow checks the requester's window (MaxUnackedPSNs,
// rxe's RXE_MAX_UNACKED_PSNS): no more packets are outstanding than the
// window, and each ACK lets exactly as many new ones go.
func TestRequesterWindow(t *testing.T) {
	s := newSolo(t, nodeConfig{maxUnacked: 3, ackReqEvery: 1})
	s.n.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{s.n.sge(0, 8*1024)}, RemoteAddr: 0x1000, RKey: 1})
	expectFrames(t, s.run(), checks(psn(0)), checks(psn(1)), checks(psn(2)))
	expectFrames(t, s.send(hdrs{Op: wire.OpRCAck, PSN: 1, Syn: synACK}), checks(psn(3)), checks(psn(4)))
	if out := s.send(hdrs{Op: wire.OpRCAck, PSN: 1, Syn: synACK}); len(out) != 0 {
		t.Fatalf("a duplicate ACK opened the window: %s", describeAll(out))
	}
	expectFrames(t, s.send(hdrs{Op: wire.OpRCAck, PSN: 4, Syn: synACK}), checks(psn(5)), checks(psn(6)), checks(psn(7), opcode(wire.OpRCWriteLast)))
	s.send(hdrs{Op: wire.OpRCAck, PSN: 7, Syn: synACK, MSN: 1})
	expectWCs(t, s.n.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCRDMAWrite})
}

// TestRequesterWindowReads checks that the window counts request
// packets, not the PSNs READ responses will use: READs larger than the
// window go out back to back up to max_rd_atomic, while a WRITE behind them
// waits until the responses bring the outstanding PSNs under the window.
func TestRequesterWindowReads(t *testing.T) {
	s := newSolo(t, nodeConfig{maxUnacked: 8, maxRdAtomic: 3})
	n := s.n
	for i := range 4 {
		n.post(SendWR{WRID: uint64(i + 1), Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{n.sge(i*16*1024, 16*1024)}, RemoteAddr: 0x10000, RKey: 5})
	}
	n.post(SendWR{WRID: 5, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{n.sge(0, 8)}, RemoteAddr: 0x1000, RKey: 5})
	// Three READs of 16 PSNs each: the fourth waits for max_rd_atomic.
	expectFrames(t, s.run(),
		checks(opcode(wire.OpRCReadRequest), psn(0)),
		checks(opcode(wire.OpRCReadRequest), psn(16)),
		checks(opcode(wire.OpRCReadRequest), psn(32)))
	resp := func(first, i int) hdrs {
		h := hdrs{Op: wire.OpRCReadRespMiddle, PSN: wire.PSN(first + i), Payload: make([]byte, 1024)}
		switch i {
		case 0:
			h.Op, h.Syn = wire.OpRCReadRespFirst, synACK
		case 15:
			h.Op, h.Syn = wire.OpRCReadRespLast, synACK
		}
		return h
	}
	var out [][]byte
	for i := range 16 {
		out = append(out, s.send(resp(0, i))...)
	}
	// The first READ done: the fourth goes (PSN 48); the WRITE still
	// waits, 48 PSNs outstanding.
	expectFrames(t, out, checks(opcode(wire.OpRCReadRequest), psn(48)))
	out = nil
	for r := 1; r < 4; r++ {
		for i := range 16 {
			out = append(out, s.send(resp(r*16, i))...)
		}
	}
	expectFrames(t, out, checks(opcode(wire.OpRCWriteOnly), psn(64)))
	expectWCs(t, n.sendWCs(),
		WC{WRID: 1, Status: WCSuccess, Opcode: WCRDMARead}, WC{WRID: 2, Status: WCSuccess, Opcode: WCRDMARead},
		WC{WRID: 3, Status: WCSuccess, Opcode: WCRDMARead}, WC{WRID: 4, Status: WCSuccess, Opcode: WCRDMARead})
}

// TestRequesterUCUD checks the UC and UD requesters (IBTA §9.8
// unreliable services): UC cuts messages like RC with UC opcodes and never
// asks for ACKs; UD sends one SEND ONLY per message with a DETH naming
// the Q_Key and the source QP; both complete a WQE once it is sent.
func TestRequesterUCUD(t *testing.T) {
	t.Run("UC", func(t *testing.T) {
		s := newSolo(t, nodeConfig{qpType: UC})
		s.n.post(SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{s.n.sge(0, 2100)}},
			SendWR{WRID: 2, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, SGL: []SGE{s.n.sge(0, 5)}, RemoteAddr: 8, RKey: 9, ImmData: 3})
		expectFrames(t, s.run(),
			checks(opcode(wire.OpUCSendFirst), psn(0), ackReq(false)),
			checks(opcode(wire.OpUCSendMiddle), psn(1), ackReq(false)),
			checks(opcode(wire.OpUCSendLast), psn(2), ackReq(false), payloadLen(52), padCount(0)),
			checks(opcode(wire.OpUCWriteOnlyImm), psn(3), ackReq(false), rethIs(8, 9, 5), padCount(3)))
		expectWCs(t, s.n.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCSend}, WC{WRID: 2, Status: WCSuccess, Opcode: WCRDMAWrite})
	})
	t.Run("UD", func(t *testing.T) {
		n := newNode(t, "E", gidA, nodeConfig{qpType: UD})
		n.connect(wire.GID{}, 0)
		s := &solo{t: t, n: n}
		ah := n.newAH(wire.Route{Dst: gidPeer}, testPD)
		n.post(SendWR{WRID: 1, Opcode: WRSendWithImm, Flags: SendSignaled, SGL: []SGE{n.sge(0, 100)}, AH: ah, RemoteQPN: 0x77, RemoteQKey: 0x1234, ImmData: 5},
			SendWR{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 4096)}, AH: ah, RemoteQPN: 0x77, RemoteQKey: 0x80000000},
			SendWR{WRID: 3, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{n.sge(0, 4097)}, AH: ah, RemoteQPN: 0x77, RemoteQKey: 1})
		out := s.run()
		if len(out) != 2 {
			t.Fatalf("%d frames, want 2:\n%s", len(out), describeAll(out))
		}
		p := expectFrame(t, out[0], opcode(wire.OpUDSendOnlyImm), psn(0), destQP(0x77), payloadLen(100))
		if p.DETH.QKey() != 0x1234 || p.DETH.SrcQP() != n.qp.QPN || p.Dst != gidPeer {
			t.Errorf("DETH qkey %#x srcqp %#x, route to %v", p.DETH.QKey(), p.DETH.SrcQP(), p.Dst)
		}
		// A Q_Key with the high bit set means "use the QP's own" (IBTA §10.2.5).
		p = expectFrame(t, out[1], opcode(wire.OpUDSendOnly), psn(1), payloadLen(4096))
		if p.DETH.QKey() != testQKey {
			t.Errorf("DETH qkey %#x, want the QP's %#x", p.DETH.QKey(), testQKey)
		}
		// A UD message longer than the MTU fails locally (IBTA §9.8.3.1).
		expectWCs(t, n.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCSend}, WC{WRID: 2, Status: WCSuccess, Opcode: WCSend},
			WC{WRID: 3, Status: WCLocLenErr, Opcode: WCSend})
		if st := n.e.Query(n.qp).State; st != QPSSQE {
			t.Errorf("UD QP in %v after a local error, want SQE", st)
		}
	})
}

// TestUDSourceAddress checks that a UD datagram leaves from the address
// its address handle names as source (the port's GID; IBTA §11.2.4.4 /
// RoCEv2 A17.4: the SGID of the AH's GRH): the source IP is what the
// receiver puts in its GRH and what the ICRC covers.
func TestUDSourceAddress(t *testing.T) {
	n := newNode(t, "E", gidA, nodeConfig{qpType: UD})
	n.connect(wire.GID{}, 0)
	s := &solo{t: t, n: n}
	ah := n.newAH(wire.Route{Src: gidA, Dst: gidPeer}, testPD)
	n.post(SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{n.sge(0, 10)}, AH: ah, RemoteQPN: 0x77, RemoteQKey: 1})
	out := s.run()
	if len(out) != 1 {
		t.Fatalf("%d frames", len(out))
	}
	if p := parse(t, out[0]); p.Src != gidA {
		t.Fatalf("UD frame from %v, want %v", p.Src, gidA)
	}
}

// TestPostSendChecks checks the posting path's validation (ibv_post_send:
// bad_wr and an error naming the problem).
func TestPostSendChecks(t *testing.T) {
	s := newSolo(t, nodeConfig{sqDepth: 2})
	n := s.n
	ud := newNode(t, "U", gidA, nodeConfig{qpType: UD})
	ud.connect(wire.GID{}, 0)
	uc := newNode(t, "C", gidA, nodeConfig{qpType: UC})
	uc.connect(gidPeer, peerQPN)
	tests := []struct {
		name string
		qp   *QP
		wr   SendWR
		want error
	}{
		{"unknown opcode", n.qp, SendWR{Opcode: 42}, ErrInvalidWR},
		{"READ on UC", uc.qp, SendWR{Opcode: WRRDMARead}, ErrInvalidWR},
		{"atomic on UD", ud.qp, SendWR{Opcode: WRAtomicFetchAndAdd}, ErrInvalidWR},
		{"too many SGEs", n.qp, SendWR{Opcode: WRSend, SGL: make([]SGE, 5)}, ErrInvalidWR},
		{"atomic of 4 bytes", n.qp, SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{n.sge(0, 4)}}, ErrInvalidWR},
		{"inline too long", n.qp, SendWR{Opcode: WRSend, Flags: SendInline, SGL: []SGE{n.sge(0, 65)}}, ErrInvalidWR},
		{"inline READ", n.qp, SendWR{Opcode: WRRDMARead, Flags: SendInline}, ErrInvalidWR},
		{"inline bad lkey", n.qp, SendWR{Opcode: WRSend, Flags: SendInline, SGL: []SGE{{Addr: n.addr(0), Length: 4, LKey: 0x999}}}, ErrInvalidWR},
		{"UD without AH", ud.qp, SendWR{Opcode: WRSend}, ErrInvalidWR},
		{"UD AH of another PD", ud.qp, SendWR{Opcode: WRSend, AH: ud.newAH(wire.Route{}, otherPD)}, ErrInvalidWR},
		{"UD remote QPN of 25 bits", ud.qp, SendWR{Opcode: WRSend, AH: ud.newAH(wire.Route{}, testPD), RemoteQPN: 1 << 24}, ErrInvalidWR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.qp.PostSend([]SendWR{tc.wr})
			if k != 0 || !errors.Is(err, tc.want) {
				t.Fatalf("PostSend = %d, %v; want 0, %v", k, err, tc.want)
			}
		})
	}
	// A full queue refuses the rest and reports how many were posted.
	k, err := n.qp.PostSend([]SendWR{{Opcode: WRSend}, {Opcode: WRSend}, {Opcode: WRSend}})
	if k != 2 || !errors.Is(err, ErrQueueFull) {
		t.Fatalf("PostSend on a 2-deep queue = %d, %v; want 2, ErrQueueFull", k, err)
	}
	// Inline data is copied at post time: changing the buffer after
	// PostSend does not change what is sent.
	s2 := newSolo(t, nodeConfig{})
	fill(s2.n.mem[:16], 1)
	want := bytes.Clone(s2.n.mem[:16])
	s2.n.post(SendWR{WRID: 1, Opcode: WRSend, Flags: SendInline, SGL: []SGE{s2.n.sge(0, 16)}})
	clear(s2.n.mem[:16])
	expectFrames(t, s2.run(), checks(opcode(wire.OpRCSendOnly), payload(want)))
}
