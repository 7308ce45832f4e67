package rnic_test

import (
	"testing"
	"time"

	"github.com/rnic/rnic"
)

// Tests of the defects the hardening issue found, one per defect, each
// failing on the code before its fix.

// TestManyCQsOverLife gives every QP its own send and receive CQs and
// creates and destroys them over the device's life, with traffic on each:
// the NIC once kept a list of the CQs it wrote completions to that only the
// simulator ever reset, and panicked at the fifth CQ.
func TestManyCQsOverLife(t *testing.T) {
	checkGoroutines(t)
	p := newPair(t, pairOpts{conn: rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite}})
	buf := make([]byte, 4096)
	mra := must(p.pda.RegMR(buf, rnic.AccessLocalWrite))
	dst := make([]byte, 4096)
	mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	cap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	conn := rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite}

	type qpCQs struct {
		qp       *rnic.QP
		scq, rcq *rnic.CQ
		peer     *rnic.QP
		peerCQ   *rnic.CQ
	}
	create := func() qpCQs {
		var q qpCQs
		q.scq, q.rcq = must(p.a.CreateCQ(16)), must(p.a.CreateCQ(16))
		q.qp = must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: q.scq, RecvCQ: q.rcq, Cap: cap}))
		q.peerCQ = must(p.b.CreateCQ(16))
		q.peer = must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: q.peerCQ, RecvCQ: q.peerCQ, Cap: cap}))
		if err := q.qp.Connect(q.peer.Endpoint(conn), conn); err != nil {
			t.Fatal(err)
		}
		if err := q.peer.Connect(q.qp.Endpoint(conn), conn); err != nil {
			t.Fatal(err)
		}
		return q
	}
	destroy := func(q qpCQs) {
		for _, err := range []error{q.qp.Destroy(), q.peer.Destroy(), q.scq.Destroy(), q.rcq.Destroy(), q.peerCQ.Destroy()} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	write := func(q qpCQs, i int) {
		off := uint64(i%64) * 64
		err := q.qp.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{mra.SGE(int(off), 64)}, RemoteAddr: mrb.Addr() + off, RKey: mrb.RKey()})
		if err != nil {
			t.Fatal(err)
		}
	}

	// The reproduction: five QPs, each with its own send CQ, one
	// WRITE on each in turn.
	var live []qpCQs
	for i := range 5 {
		live = append(live, create())
		write(live[i], i)
		if wc := waitWC(t, live[i].scq, 1, 10*time.Second); wc[0].Status != rnic.WCSuccess {
			t.Fatalf("QP %d: %v", i, wc[0].Status)
		}
	}
	// Then thousands of CQs over the device's life, a few alive at a time,
	// with WRITEs on all live QPs at once so that completions for several
	// CQs arrive together.
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	for r := range rounds {
		destroy(live[r%len(live)])
		live[r%len(live)] = create()
		for i, q := range live {
			write(q, r*len(live)+i)
		}
		for i, q := range live {
			if wc := waitWC(t, q.scq, 1, 10*time.Second); wc[0].Status != rnic.WCSuccess {
				t.Fatalf("round %d QP %d: %v", r, i, wc[0].Status)
			}
		}
	}
	for _, q := range live {
		destroy(q)
	}
}
