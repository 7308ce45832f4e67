package nicmodel

import (
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/wire"
)

// testHost is one simulated NIC with a region, and the completions it saw.
type testHost struct {
	t    *testing.T
	nic  *NIC
	key  uint32
	base uint64
	seen map[*transport.CQ]int    // completions made visible, per CQ
	slot map[*transport.CQ]uint32 // table slot of each live CQ
}

func (h *testHost) CQEVisible(cq *transport.CQ, n int) { h.seen[cq] += n }

func newTestHosts(t *testing.T) (*sim.Sim, *testHost, *testHost) {
	t.Helper()
	prof, err := profile.Builtin("cx6")
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(1)
	fab, err := fabric.New(s, prof.FabricConfig())
	if err != nil {
		t.Fatal(err)
	}
	var hs [2]*testHost
	for i, a := range fabric.HostAddrs(2) {
		port, err := fab.AddHost(a)
		if err != nil {
			t.Fatal(err)
		}
		core := transport.CoreConfig{MaxQP: 64, MaxCQ: 64, MaxMR: 4}
		prof.Hardware(&core)
		n, err := New(s, Config{Profile: prof, Port: port, Core: core})
		if err != nil {
			t.Fatal(err)
		}
		h := &testHost{t: t, nic: n, base: 1 << 40, seen: map[*transport.CQ]int{}, slot: map[*transport.CQ]uint32{}}
		h.key, err = n.ATU.RegMR(atu.MRSpec{PD: 1, IOVA: h.base, Buf: make([]byte, 1<<16),
			Access: atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead | atu.RemoteAtomic})
		if err != nil {
			t.Fatal(err)
		}
		n.SetCQEHandler(h)
		hs[i] = h
	}
	return s, hs[0], hs[1]
}

func (h *testHost) newCQ() *transport.CQ {
	h.t.Helper()
	cqn, idx, ok := h.nic.CQs.Alloc()
	if !ok {
		h.t.Fatal("CQ table full")
	}
	cq := transport.NewCQ(cqn, 64)
	h.nic.CQs.Set(idx, cq)
	h.slot[cq] = idx
	return cq
}

// destroyCQ frees a CQ as the device does: its slot back to the table and
// its context out of the CQC cache.
func (h *testHost) destroyCQ(cq *transport.CQ) {
	h.nic.CQs.Release(h.slot[cq])
	h.nic.Engine.ForgetCQ(cq.CQN)
	delete(h.seen, cq)
	delete(h.slot, cq)
}

func (h *testHost) newQP(scq, rcq *transport.CQ) *transport.QP {
	h.t.Helper()
	qpn, slot, ok := h.nic.QPs.Alloc()
	if !ok {
		h.t.Fatal("QP table full")
	}
	qp, err := h.nic.Engine.CreateQP(&transport.QPInit{Type: transport.RC, PD: 1, SendCQ: scq, RecvCQ: rcq,
		Cap: transport.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}, qpn, slot)
	if err != nil {
		h.t.Fatal(err)
	}
	return qp
}

// connect moves qp to RTS, connected to peer on host to.
func (h *testHost) connect(qp *transport.QP, to *testHost, peer *transport.QP) {
	h.t.Helper()
	steps := []struct {
		a    transport.QPAttr
		mask transport.AttrMask
	}{
		{transport.QPAttr{State: transport.QPSInit, Port: 1, AccessFlags: atu.LocalWrite | atu.RemoteWrite},
			transport.AttrState | transport.AttrPKeyIndex | transport.AttrPort | transport.AttrAccessFlags},
		{transport.QPAttr{State: transport.QPSRTR, AV: wire.Route{Dst: to.nic.GID()}, PathMTU: wire.MTU1024, DestQPN: peer.QPN,
			MaxDestRdAtomic: 16, MinRNRTimer: 12},
			transport.AttrState | transport.AttrAV | transport.AttrPathMTU | transport.AttrDestQPN | transport.AttrRQPSN |
				transport.AttrMaxDestRdAtomic | transport.AttrMinRNRTimer},
		{transport.QPAttr{State: transport.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			transport.AttrState | transport.AttrSQPSN | transport.AttrTimeout | transport.AttrRetryCnt |
				transport.AttrRNRRetry | transport.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := h.nic.Engine.Modify(qp, &s.a, s.mask); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestManyCQsOverLife is the hardening issue's first defect in virtual
// time: QPs each with their own send and receive CQs, created and
// destroyed over the NIC's life (thousands of CQs in all) with traffic on
// each, and in every round several QPs flushed in error at once, so that
// one step of the engine writes completions to more CQs than a QP has.
func TestManyCQsOverLife(t *testing.T) {
	s, a, b := newTestHosts(t)
	const perRound = 6
	rounds := 250
	if testing.Short() {
		rounds = 50
	}
	type qpCQs struct {
		qp, peer           *transport.QP
		scq, rcq, peerCQ   *transport.CQ
		wantSend, wantRecv int
	}
	for r := range rounds {
		qs := make([]qpCQs, perRound)
		for i := range qs {
			q := &qs[i]
			q.scq, q.rcq, q.peerCQ = a.newCQ(), a.newCQ(), b.newCQ()
			q.qp, q.peer = a.newQP(q.scq, q.rcq), b.newQP(q.peerCQ, q.peerCQ)
			a.connect(q.qp, b, q.peer)
			b.connect(q.peer, a, q.qp)
			off := uint64(i) * 64
			wr := transport.SendWR{WRID: uint64(r), Opcode: transport.WRRDMAWrite, Flags: transport.SendSignaled,
				SGL:        []transport.SGE{{Addr: a.base + off, Length: 64, LKey: a.key}},
				RemoteAddr: b.base + off, RKey: b.key}
			if _, err := q.qp.PostSend([]transport.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			q.wantSend = 1
		}
		s.RunUntil(s.Now() + 1e9) // 1 ms: every WRITE is done
		// Then every QP gets a receive and a send posted and goes to ERR:
		// the next engine steps flush them, two CQs per QP.
		for i := range qs {
			q := &qs[i]
			rwr := transport.RecvWR{WRID: 1, SGL: []transport.SGE{{Addr: a.base, Length: 64, LKey: a.key}}}
			if _, err := q.qp.PostRecv([]transport.RecvWR{rwr}); err != nil {
				t.Fatal(err)
			}
			if err := a.nic.Engine.Modify(q.qp, &transport.QPAttr{State: transport.QPSErr}, transport.AttrState); err != nil {
				t.Fatal(err)
			}
			q.wantRecv = 1
		}
		// A control-path call wakes the NIC, as in real time.
		s.Schedule(sim.Event{At: s.Now(), Kind: evProgress, H: a.nic})
		s.RunUntil(s.Now() + 1e9)
		var wcs [8]transport.WC
		for i := range qs {
			q := &qs[i]
			if got := a.seen[q.scq]; got != q.wantSend {
				t.Fatalf("round %d QP %d: %d send completions visible, want %d", r, i, got, q.wantSend)
			}
			if got := a.seen[q.rcq]; got != q.wantRecv {
				t.Fatalf("round %d QP %d: %d receive completions visible, want %d", r, i, got, q.wantRecv)
			}
			if n := q.scq.Poll(wcs[:]); n != 1 || wcs[0].Status != transport.WCSuccess {
				t.Fatalf("round %d QP %d: send CQ polled %d (%v)", r, i, n, wcs[0].Status)
			}
			if n := q.rcq.Poll(wcs[:]); n != 1 || wcs[0].Status != transport.WCWRFlushErr {
				t.Fatalf("round %d QP %d: receive CQ polled %d (%v), want a flushed receive", r, i, n, wcs[0].Status)
			}
			a.nic.Engine.DestroyQP(q.qp)
			b.nic.Engine.DestroyQP(q.peer)
			a.destroyCQ(q.scq)
			a.destroyCQ(q.rcq)
			b.destroyCQ(q.peerCQ)
		}
	}
}
