package transport

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rnic/rnic/internal/queue"
)

// A C program's QP: its send and receive rings and its CQs are its own
// memory, shared with the NIC (RingMem, CQMem), which its library writes
// in the one format (internal/queue) and the engine reads, trusting
// nothing: a malformed WQE or index is the program's error, its own QP's
// and nobody else's.

// program is the program's side of a node's rings (nodeConfig.program).
type program struct {
	sq, rq             []byte
	sqSlot, rqSlot     uint32
	sqDepth, rqDepth   uint32
	sqPI, sqCI         atomic.Uint32
	rqPI, rqCI, rqDone atomic.Uint32
	cqs                []*cqProgram // the send CQ's, then the receive CQ's
	sqPosted, rqPosted uint32
}

func newProgram(cfg nodeConfig) *program {
	p := &program{sqDepth: cfg.sqDepth, rqDepth: cfg.rqDepth,
		sqSlot: uint32(queue.WQESize(4, 64)), rqSlot: uint32(queue.RecvWQESize(4))}
	p.sq = make([]byte, p.sqDepth*p.sqSlot)
	p.rq = make([]byte, p.rqDepth*p.rqSlot)
	return p
}

func (p *program) ringMems(withRQ bool) (sq, rq *RingMem) {
	sq = &RingMem{Mem: p.sq, SlotLen: p.sqSlot, PI: &p.sqPI, CI: &p.sqCI}
	if withRQ {
		rq = &RingMem{Mem: p.rq, SlotLen: p.rqSlot, PI: &p.rqPI, CI: &p.rqCI, Done: &p.rqDone}
	}
	return sq, rq
}

func (p *program) newCQ(depth int) *cqProgram {
	c := newCQProgram(int(pow2(uint32(depth))))
	p.cqs = append(p.cqs, c)
	return c
}

// sendSlot and recvSlot return the slot of the next WQE.
func (p *program) sendSlot() []byte {
	o := (p.sqPI.Load() % p.sqDepth) * p.sqSlot
	return p.sq[o : o+p.sqSlot]
}

func (p *program) recvSlot() []byte {
	o := (p.rqPI.Load() % p.rqDepth) * p.rqSlot
	return p.rq[o : o+p.rqSlot]
}

// postSend writes w into the next slot, then lets spoil rewrite the
// slot's bytes (a malformed WQE), publishes it and rings the doorbell.
func (n *node) progSend(w queue.SendWQE, spoil func(slot []byte)) {
	n.t.Helper()
	p := n.prog
	s := p.sendSlot()
	if err := queue.EncodeSend(s, &w); err != nil {
		n.t.Fatal(err)
	}
	if spoil != nil {
		spoil(s)
	}
	p.sqPI.Add(1)
	n.qp.Doorbell(1)
}

// progRecv posts a receive WQE as the program's library does.
func (n *node) progRecv(w queue.RecvWQE, spoil func(slot []byte)) {
	n.t.Helper()
	p := n.prog
	s := p.recvSlot()
	if err := queue.EncodeRecv(s, &w); err != nil {
		n.t.Fatal(err)
	}
	if spoil != nil {
		spoil(s)
	}
	p.rqPI.Add(1)
	n.qp.RecvDoorbell()
}

func (n *node) qsge(off, length int) queue.SGE {
	return queue.SGE{Addr: n.addr(off), Length: uint32(length), LKey: n.key}
}

func newProgramPair(t testing.TB, ca, cb nodeConfig) *pair {
	ca.program, cb.program = true, true
	return newPair(t, ca, cb)
}

// TestProgramRings: a SEND, a WRITE with immediate data and a READ
// between two programs' rings; the engine publishes each ring's consumer
// index (the slots the program may write again) and the receive WQEs
// retired, and writes the CQEs into the programs' CQ rings.
func TestProgramRings(t *testing.T) {
	p := newProgramPair(t, nodeConfig{memSize: 1 << 16}, nodeConfig{memSize: 1 << 16})
	A, B := p.A, p.B
	fill(A.mem[:4096], 1)
	fill(B.mem[8192:8192+512], 2)
	B.progRecv(queue.RecvWQE{WRID: 100, NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{B.qsge(0, 4096)}}, nil)
	B.progRecv(queue.RecvWQE{WRID: 101, NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{B.qsge(4096, 64)}}, nil)
	sig := uint8(SendSignaled)
	A.progSend(queue.SendWQE{WRID: 1, Opcode: uint8(WRSend), Flags: sig, NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 3000)}}, nil)
	A.progSend(queue.SendWQE{WRID: 2, Opcode: uint8(WRRDMAWriteWithImm), Flags: sig, Imm: 0x55, NumSGE: 1,
		RemoteAddr: B.addr(16384), RKey: B.key, SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 100)}}, nil)
	A.progSend(queue.SendWQE{WRID: 3, Opcode: uint8(WRRDMARead), Flags: sig, NumSGE: 1,
		RemoteAddr: B.addr(8192), RKey: B.key, SGL: [queue.MaxSGE]queue.SGE{A.qsge(32768, 512)}}, nil)
	p.pump()
	expectWCs(t, A.sendWCs(),
		WC{WRID: 1, Status: WCSuccess, Opcode: WCSend, QPNum: A.qp.QPN},
		WC{WRID: 2, Status: WCSuccess, Opcode: WCRDMAWrite, QPNum: A.qp.QPN},
		WC{WRID: 3, Status: WCSuccess, Opcode: WCRDMARead, ByteLen: 512, QPNum: A.qp.QPN})
	expectWCs(t, B.recvWCs(),
		WC{WRID: 100, Status: WCSuccess, Opcode: WCRecv, ByteLen: 3000, QPNum: B.qp.QPN, SrcQP: A.qp.QPN},
		WC{WRID: 101, Status: WCSuccess, Opcode: WCRecvRDMAWithImm, Flags: WCWithImm, ImmData: 0x55, QPNum: B.qp.QPN, SrcQP: A.qp.QPN})
	if !bytes.Equal(B.mem[:3000], A.mem[:3000]) || !bytes.Equal(B.mem[16384:16484], A.mem[:100]) ||
		!bytes.Equal(A.mem[32768:32768+512], B.mem[8192:8192+512]) {
		t.Error("the data did not land")
	}
	if ci := A.prog.sqCI.Load(); ci != 3 {
		t.Errorf("A's published SQ consumer index %d, want 3", ci)
	}
	if ci, done := B.prog.rqCI.Load(), B.prog.rqDone.Load(); ci != 2 || done != 2 {
		t.Errorf("B's RQ: consumer index %d, retired %d, want 2 and 2", ci, done)
	}
}

// TestProgramBadSendWQE: a send WQE the fetch refuses completes with a
// local QP operation error (IBV_WC_LOC_QP_OP_ERR) and puts the
// program's QP in error, its later WQEs flushed; the peer's QP goes on.
func TestProgramBadSendWQE(t *testing.T) {
	// The error CQE's opcode is the WQE's (libibverbs leaves it
	// undefined on an error; an opcode no QP takes gives 0).
	cases := []struct {
		name  string
		spoil func(s []byte)
		op    WCOpcode
	}{
		{"more SGEs than max_send_sge", func(s []byte) { s[queue.WQENumSGE] = 5 }, WCRDMAWrite},
		{"more SGEs than the slot", func(s []byte) { s[queue.WQENumSGE] = 255 }, WCRDMAWrite},
		{"unknown opcode", func(s []byte) { s[queue.WQEOpcode] = 200 }, 0},
		{"an opcode between the defined ones", func(s []byte) { s[queue.WQEOpcode] = 11 }, 0},
		{"inline beyond max_inline_data", func(s []byte) {
			s[queue.WQEFlags] |= uint8(SendInline)
			s[queue.WQENumSGE] = 0
			le.PutUint32(s[queue.WQEInlineLen:], 1000)
		}, WCRDMAWrite},
		{"inline length without the flag", func(s []byte) { le.PutUint32(s[queue.WQEInlineLen:], 8) }, WCRDMAWrite},
		{"an atomic of two SGEs", func(s []byte) {
			s[queue.WQEOpcode] = uint8(WRAtomicFetchAndAdd)
			s[queue.WQENumSGE] = 2
		}, WCFetchAdd},
		{"a message beyond the largest", func(s []byte) {
			le.PutUint32(s[queue.WQEHeaderLen+queue.SGELength:], 0xffffffff)
		}, WCRDMAWrite},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProgramPair(t, nodeConfig{memSize: 1 << 16}, nodeConfig{memSize: 1 << 16})
			A, B := p.A, p.B
			sig := uint8(SendSignaled)
			w := queue.SendWQE{Opcode: uint8(WRRDMAWrite), Flags: sig, NumSGE: 1, RemoteAddr: B.addr(0), RKey: B.key,
				SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 8), A.qsge(8, 8)}}
			w.WRID = 1
			A.progSend(w, nil)
			w.WRID = 2
			A.progSend(w, c.spoil)
			w.WRID = 3
			A.progSend(w, nil)
			p.pump()
			expectWCs(t, A.sendWCs(),
				WC{WRID: 1, Status: WCSuccess, Opcode: WCRDMAWrite, QPNum: A.qp.QPN},
				WC{WRID: 2, Status: WCLocQPOpErr, Opcode: c.op, QPNum: A.qp.QPN},
				WC{WRID: 3, Status: WCWRFlushErr, Opcode: WCRDMAWrite, QPNum: A.qp.QPN})
			if A.qp.State() != QPSErr || B.qp.State() != QPSRTS {
				t.Errorf("states A %v, B %v: want A in ERR, B in RTS", A.qp.State(), B.qp.State())
			}
			if ci := A.prog.sqCI.Load(); ci != 3 {
				t.Errorf("A's SQ consumer index %d, want 3 (every WQE retired)", ci)
			}
		})
	}
}

// TestProgramBadRecvWQE: a receive WQE of more SGEs than the ring's
// slots hold completes, when a message needs it, with a local QP
// operation error; the QP goes to error, the sender sees its SEND fail.
func TestProgramBadRecvWQE(t *testing.T) {
	p := newProgramPair(t, nodeConfig{memSize: 1 << 16, retryCnt: 1}, nodeConfig{memSize: 1 << 16})
	A, B := p.A, p.B
	B.progRecv(queue.RecvWQE{WRID: 100, NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{B.qsge(0, 64)}},
		func(s []byte) { s[queue.RecvNumSGE] = 9 })
	B.progRecv(queue.RecvWQE{WRID: 101, NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{B.qsge(0, 64)}}, nil)
	A.progSend(queue.SendWQE{WRID: 1, Opcode: uint8(WRSend), Flags: uint8(SendSignaled), NumSGE: 1,
		SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 16)}}, nil)
	p.settle(50)
	rwc := B.recvWCs()
	if len(rwc) != 2 || rwc[0].WRID != 100 || rwc[0].Status != WCLocQPOpErr || rwc[1].Status != WCWRFlushErr {
		t.Fatalf("B's receive completions %s: want wr_id 100 LOC_QP_OP_ERR, then 101 flushed", wcString(rwc))
	}
	if B.qp.State() != QPSErr {
		t.Errorf("B's QP in %v, want ERR", B.qp.State())
	}
	if swc := A.sendWCs(); len(swc) != 1 || swc[0].Status == WCSuccess {
		t.Errorf("A's SEND completed %s: want an error (the responder failed it)", wcString(swc))
	}
	if done := B.prog.rqDone.Load(); done != 2 {
		t.Errorf("B's retired receive WQEs %d, want 2", done)
	}
}

// TestProgramGarbageIndices: producer indices the rings never had
// (more than the ring's depth past its consumer index, or behind what
// the engine took): the QP goes to error with a fatal QP event, no
// completion names a WQE that was never posted, nothing outside the ring
// is read, and the peer goes on. RESET makes the rings usable again.
func TestProgramGarbageIndices(t *testing.T) {
	for _, c := range []struct {
		name string
		sq   bool // the send queue's index (else the receive queue's)
		pi   uint32
	}{
		{"send queue far ahead", true, 1 << 30},
		{"send queue behind", true, ^uint32(0)},
		{"receive queue far ahead", false, 1 << 31},
		{"receive queue behind", false, ^uint32(0)},
		{"send queue one past its depth", true, 1 + 8 + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProgramPair(t, nodeConfig{memSize: 1 << 16, sqDepth: 8, retryCnt: 1}, nodeConfig{memSize: 1 << 16, rqDepth: 8})
			A, B := p.A, p.B
			// One good WQE first, taken by the engine.
			B.progRecv(queue.RecvWQE{WRID: 100, NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{B.qsge(0, 64)}}, nil)
			A.progSend(queue.SendWQE{WRID: 1, Opcode: uint8(WRSend), Flags: uint8(SendSignaled), NumSGE: 1,
				SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 16)}}, nil)
			p.pump()
			expectWCs(t, A.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCSend, QPNum: A.qp.QPN})
			B.recvWCs()
			victim, other := A, B
			if c.sq {
				A.prog.sqPI.Store(c.pi)
				A.qp.Doorbell(1)
			} else {
				victim, other = B, A
				B.prog.rqPI.Store(c.pi)
				B.qp.RecvDoorbell()
				A.progSend(queue.SendWQE{WRID: 2, Opcode: uint8(WRSend), Flags: uint8(SendSignaled), NumSGE: 1,
					SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 16)}}, nil)
			}
			p.settle(50)
			if victim.qp.State() != QPSErr {
				t.Errorf("%s's QP in %v, want ERR", victim.name, victim.qp.State())
			}
			if !containsEvent(victim.eventTypes(), EventQPFatal) {
				t.Errorf("%s's events %v: want a fatal QP event", victim.name, victim.eventTypes())
			}
			var wcs []WC
			if c.sq {
				wcs = A.sendWCs()
			} else {
				wcs = B.recvWCs()
			}
			if len(wcs) != 0 {
				t.Errorf("completions for WQEs never posted: %s", wcString(wcs))
			}
			if c.sq && other.qp.State() != QPSRTS {
				t.Errorf("the peer's QP in %v, want RTS: the garbage was A's", other.qp.State())
			}
			// RESET and back: the program posts from its index again.
			if err := victim.e.Modify(victim.qp, &QPAttr{State: QPSReset}, AttrState); err != nil {
				t.Fatal(err)
			}
			if c.sq && A.prog.sqCI.Load() != c.pi || !c.sq && B.prog.rqCI.Load() != c.pi {
				t.Errorf("after RESET the consumer index is not the program's producer index %d", c.pi)
			}
		})
	}
}

// TestProgramRewriteAfterFetch: a program that rewrites a WQE after the
// engine fetched it changes nothing: the engine works from its own copy
// (here a retransmission after a lost packet, with the slot garbage by
// then), and the WRITE lands as posted.
func TestProgramRewriteAfterFetch(t *testing.T) {
	p := newProgramPair(t, nodeConfig{memSize: 1 << 16}, nodeConfig{memSize: 1 << 16})
	A, B := p.A, p.B
	fill(A.mem[:8192], 5)
	p.ab.set(drop, 1) // the WRITE's second packet: the requester sends again
	slot := A.prog.sendSlot()
	A.progSend(queue.SendWQE{WRID: 1, Opcode: uint8(WRRDMAWrite), Flags: uint8(SendSignaled), NumSGE: 1,
		RemoteAddr: B.addr(0), RKey: B.key, SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 8192)}}, nil)
	p.pump() // fetched and sent, one packet lost
	for i := range slot {
		slot[i] = 0xA5
	}
	p.settle(50)
	expectWCs(t, A.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCRDMAWrite, QPNum: A.qp.QPN})
	if !bytes.Equal(B.mem[:8192], A.mem[:8192]) {
		t.Error("the WRITE did not land as posted")
	}
	if p.ab.n < 9 {
		t.Errorf("%d frames: the lost packet was not sent again", p.ab.n)
	}
}

// TestProgramForeignKeys: a WQE that names keys the program does not own
// (a region in another protection domain, as another program's are) is
// refused by the translation unit: a local key fails with a local
// protection error, a remote one with a remote access error; neither
// reads or writes the other region.
func TestProgramForeignKeys(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		p := newProgramPair(t, nodeConfig{memSize: 1 << 16}, nodeConfig{memSize: 1 << 16})
		A, B := p.A, p.B
		other := pattern(4096, 9)
		key := A.regMR(otherPD, other, 0x7e0000000000, 0x7)
		A.progSend(queue.SendWQE{WRID: 1, Opcode: uint8(WRRDMAWrite), Flags: uint8(SendSignaled), NumSGE: 1,
			RemoteAddr: B.addr(0), RKey: B.key, SGL: [queue.MaxSGE]queue.SGE{{Addr: 0x7e0000000000, Length: 4096, LKey: key}}}, nil)
		p.settle(50)
		expectWCs(t, A.sendWCs(), WC{WRID: 1, Status: WCLocProtErr, Opcode: WCRDMAWrite, QPNum: A.qp.QPN})
		if bytes.Contains(B.mem, other[:64]) {
			t.Error("the other domain's bytes reached the peer")
		}
	})
	t.Run("remote", func(t *testing.T) {
		p := newProgramPair(t, nodeConfig{memSize: 1 << 16, retryCnt: 1}, nodeConfig{memSize: 1 << 16})
		A, B := p.A, p.B
		other := make([]byte, 4096)
		key := B.regMR(otherPD, other, 0x7e0000000000, 0x7)
		fill(A.mem[:4096], 3)
		A.progSend(queue.SendWQE{WRID: 1, Opcode: uint8(WRRDMAWrite), Flags: uint8(SendSignaled), NumSGE: 1,
			RemoteAddr: 0x7e0000000000, RKey: key, SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 4096)}}, nil)
		p.settle(50)
		expectWCs(t, A.sendWCs(), WC{WRID: 1, Status: WCRemAccessErr, Opcode: WCRDMAWrite, QPNum: A.qp.QPN})
		if !bytes.Equal(other, make([]byte, 4096)) {
			t.Error("the WRITE reached the other domain's region")
		}
	})
}

// TestProgramResetRetires: RESET empties a program's queues; their
// consumer indices and the receive WQEs retired are its producer
// indices, published, so that it posts again from there.
func TestProgramResetRetires(t *testing.T) {
	p := newProgramPair(t, nodeConfig{memSize: 1 << 16}, nodeConfig{memSize: 1 << 16})
	B := p.B
	for i := range 5 {
		B.progRecv(queue.RecvWQE{WRID: uint64(i), NumSGE: 1, SGL: [queue.MaxSGE]queue.SGE{B.qsge(0, 64)}}, nil)
	}
	if err := B.e.Modify(B.qp, &QPAttr{State: QPSReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	if ci, done := B.prog.rqCI.Load(), B.prog.rqDone.Load(); ci != 5 || done != 5 {
		t.Errorf("after RESET: RQ consumer index %d, retired %d, want 5 and 5", ci, done)
	}
	if wcs := B.recvWCs(); len(wcs) != 0 {
		t.Errorf("RESET wrote completions: %s", wcString(wcs))
	}
}

// TestProgramCQOverrun: a program that does not poll its CQ: the CQE
// that finds the ring full is lost, the CQ goes to error (EventCQErr)
// and the QP with it (EventQPFatal).
func TestProgramCQOverrun(t *testing.T) {
	p := newProgramPair(t, nodeConfig{memSize: 1 << 16, cqDepth: 4}, nodeConfig{memSize: 1 << 16})
	A, B := p.A, p.B
	for i := range 6 {
		A.progSend(queue.SendWQE{WRID: uint64(i), Opcode: uint8(WRRDMAWrite), Flags: uint8(SendSignaled), NumSGE: 1,
			RemoteAddr: B.addr(0), RKey: B.key, SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 8)}}, nil)
	}
	p.pump()
	ev := A.eventTypes()
	if !containsEvent(ev, EventCQErr) || !containsEvent(ev, EventQPFatal) {
		t.Errorf("events %v: want a CQ error and a fatal QP", ev)
	}
	if wcs := A.sendWCs(); len(wcs) != 4 {
		t.Errorf("%d CQEs in a ring of 4 the program never polled, want 4", len(wcs))
	}
	// Every WQE is retired (the last ones flushed), none twice: the
	// published consumer index is the producer's.
	if ci := A.prog.sqCI.Load(); ci != 6 {
		t.Errorf("A's published SQ consumer index %d, want 6", ci)
	}
}

func containsEvent(evs []EventType, e EventType) bool {
	for _, v := range evs {
		if v == e {
			return true
		}
	}
	return false
}

// FuzzProgramRings: the engine's ring reader against whatever a program
// writes into its send and receive rings and its producer indices. Input:
// A's send queue producer index (4 bytes, little endian), B's receive
// queue's (4 bytes), then the bytes of A's send ring (8 slots) and B's
// receive ring (8 slots), A sending to B. For every input: no panic; the
// engine settles; it never writes into a ring it reads (the slots are
// the program's); each send queue consumer index it publishes is at most
// the ring's depth past where it started; no more completions than the
// rings held WQEs.
func FuzzProgramRings(f *testing.F) {
	seed := func(sends []queue.SendWQE, recvs []queue.RecvWQE) []byte {
		p := newProgram(nodeConfig{sqDepth: 8, rqDepth: 8})
		for i := range sends {
			o := uint32(i) * p.sqSlot
			if err := queue.EncodeSend(p.sq[o:o+p.sqSlot], &sends[i]); err != nil {
				f.Fatal(err)
			}
		}
		for i := range recvs {
			o := uint32(i) * p.rqSlot
			if err := queue.EncodeRecv(p.rq[o:o+p.rqSlot], &recvs[i]); err != nil {
				f.Fatal(err)
			}
		}
		b := le.AppendUint32(nil, uint32(len(sends)))
		b = le.AppendUint32(b, uint32(len(recvs)))
		return append(append(b, p.sq...), p.rq...)
	}
	// The seeds' keys and addresses are the pair's (deterministic).
	env := newProgramPair(f, nodeConfig{memSize: 1 << 16, sqDepth: 8}, nodeConfig{memSize: 1 << 16, rqDepth: 8})
	A, B := env.A, env.B
	sig := uint8(SendSignaled)
	one := func(s queue.SGE) [queue.MaxSGE]queue.SGE { return [queue.MaxSGE]queue.SGE{s} }
	f.Add(seed([]queue.SendWQE{
		{WRID: 1, Opcode: uint8(WRSend), Flags: sig, NumSGE: 1, SGL: one(A.qsge(0, 100))},
		{WRID: 2, Opcode: uint8(WRRDMAWrite), Flags: sig, NumSGE: 1, RemoteAddr: B.addr(4096), RKey: B.key, SGL: one(A.qsge(0, 5000))},
		{WRID: 3, Opcode: uint8(WRRDMARead), Flags: sig, NumSGE: 1, RemoteAddr: B.addr(0), RKey: B.key, SGL: one(A.qsge(8192, 2000))},
		{WRID: 4, Opcode: uint8(WRAtomicFetchAndAdd), Flags: sig, NumSGE: 1, RemoteAddr: B.addr(64), RKey: B.key, CompareAdd: 5, SGL: one(A.qsge(16384, 8))},
		{WRID: 5, Opcode: uint8(WRSendWithImm), Flags: sig | uint8(SendInline), Imm: 9, Inline: []byte("inline payload")},
	}, []queue.RecvWQE{
		{WRID: 100, NumSGE: 1, SGL: one(B.qsge(0, 4096))},
		{WRID: 101, NumSGE: 2, SGL: [queue.MaxSGE]queue.SGE{B.qsge(8192, 8), B.qsge(16384, 4096)}},
	}))
	f.Add(seed(nil, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 8 {
			return
		}
		p := newProgramPair(t, nodeConfig{memSize: 1 << 16, sqDepth: 8, retryCnt: 1, rnrRetry: 1},
			nodeConfig{memSize: 1 << 16, rqDepth: 8})
		A, B := p.A, p.B
		sqPI, rqPI := le.Uint32(data), le.Uint32(data[4:])
		n := copy(A.prog.sq, data[8:])
		copy(B.prog.rq, data[8+n:])
		sq, rq := bytes.Clone(A.prog.sq), bytes.Clone(B.prog.rq)
		B.prog.rqPI.Store(rqPI)
		B.qp.RecvDoorbell()
		A.prog.sqPI.Store(sqPI)
		A.qp.Doorbell(1)
		start := time.Now()
		p.settle(200)
		if d := time.Since(start); d > fuzzSlow {
			t.Fatalf("the engine took %v to settle", d)
		}
		if !bytes.Equal(sq, A.prog.sq) || !bytes.Equal(rq, B.prog.rq) {
			t.Fatal("the engine wrote into a ring it reads")
		}
		if ci := A.prog.sqCI.Load(); ci > 8 {
			t.Errorf("A's send queue consumer index %d: more than the ring's 8 WQEs retired", ci)
		}
		if ci := B.prog.rqCI.Load(); ci > 8 {
			t.Errorf("B's receive queue consumer index %d: more than the ring's 8 WQEs taken", ci)
		}
		if k := len(A.sendWCs()); k > 8 {
			t.Errorf("%d send completions from 8 slots", k)
		}
		if k := len(B.recvWCs()); k > 8 {
			t.Errorf("%d receive completions from 8 slots", k)
		}
	})
}

// TestProgramResetReuse: a program's QP that sent, was moved to RESET and
// connected again sends from where its ring is: the engine's requester
// starts at the ring's indices (the program's producer index, which RESET
// leaves where it is), not at 0. (It started at 0 while the consumer
// index was the program's: the completer then walked from there to 0
// around the whole 32-bit index space, completing stale slots, with the
// engine lock held for minutes: an rdma-core test that reset and reused a
// QP hung its NIC; where the indices were small, the WQEs posted before
// RESET were sent again.)
func TestProgramResetReuse(t *testing.T) {
	p := newProgramPair(t, nodeConfig{memSize: 1 << 16}, nodeConfig{memSize: 1 << 16})
	A, B := p.A, p.B
	fill(A.mem[:4096], 3)
	write := func(wrid uint64, off int) queue.SendWQE {
		return queue.SendWQE{WRID: wrid, Opcode: uint8(WRRDMAWrite), Flags: uint8(SendSignaled), NumSGE: 1,
			RemoteAddr: B.addr(off), RKey: B.key, SGL: [queue.MaxSGE]queue.SGE{A.qsge(0, 64)}}
	}
	for i := range 3 {
		A.progSend(write(uint64(i), i*64), nil)
	}
	p.pump()
	if wcs := A.sendWCs(); len(wcs) != 3 {
		t.Fatalf("before RESET: %d completions, want 3", len(wcs))
	}
	// Two more the QP never sends: RESET comes first.
	A.progSend(write(3, 192), nil)
	A.progSend(write(4, 256), nil)
	if err := A.e.Modify(A.qp, &QPAttr{State: QPSReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	if err := B.e.Modify(B.qp, &QPAttr{State: QPSReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	clear(B.mem[:5*64]) // where the WRITEs before RESET went, or would have: none is sent again
	A.cfg.sqPSN, B.cfg.rqPSN = 1000, 1000
	A.connect(gidB, B.qp.QPN)
	B.connect(gidA, A.qp.QPN)
	A.progSend(write(7, 4096), nil)
	done := make(chan struct{})
	go func() { p.pump(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not settle after the QP was reused: its completer runs away")
	}
	expectWCs(t, A.sendWCs(), WC{WRID: 7, Status: WCSuccess, Opcode: WCRDMAWrite, QPNum: A.qp.QPN})
	if !bytes.Equal(B.mem[4096:4096+64], A.mem[:64]) {
		t.Error("the WRITE after RESET did not land")
	}
	if !bytes.Equal(B.mem[:5*64], make([]byte, 5*64)) {
		t.Error("WQEs posted before RESET were sent again after it")
	}
	if ci := A.prog.sqCI.Load(); ci != 6 {
		t.Errorf("A's published SQ consumer index %d, want 6", ci)
	}
}
