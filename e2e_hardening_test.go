package rnic_test

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
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

// slowIntake is a responder's link whose NIC takes in at most burst frames
// per millisecond, as an emulated peer (rxe in a VM) does: what it cannot
// take waits in the requester's lossy port (mem.WithBuffer) or is dropped.
type slowIntake struct {
	*mem.Port
	burst  int
	mu     sync.Mutex
	tokens int
	stop   chan struct{}
	done   chan struct{}
}

func newSlowIntake(p *mem.Port, burst int) *slowIntake {
	s := &slowIntake{Port: p, burst: burst, tokens: burst, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			s.mu.Lock()
			s.tokens = s.burst
			s.mu.Unlock()
			s.Port.Drained()
		}
	}()
	return s
}

func (s *slowIntake) Attach(d link.Dispatcher) {
	if d == nil {
		s.Port.Attach(nil)
		return
	}
	s.Port.Attach(&slowDispatcher{s: s, d: d, r: d.(link.Receiver)})
}

func (s *slowIntake) Close() error {
	close(s.stop)
	<-s.done
	return s.Port.Close()
}

type slowDispatcher struct {
	s *slowIntake
	d link.Dispatcher
	r link.Receiver
}

func (d *slowDispatcher) Deliver(bufs []*link.Buf) { d.d.Deliver(bufs) }

func (d *slowDispatcher) TryDeliver(bufs []*link.Buf) int {
	d.s.mu.Lock()
	n := min(len(bufs), d.s.tokens)
	d.s.tokens -= n
	d.s.mu.Unlock()
	k := d.r.TryDeliver(bufs[:n])
	if k < n {
		d.s.mu.Lock()
		d.s.tokens += n - k
		d.s.mu.Unlock()
	}
	return k
}

// TestSlowResponder is the hardening issue's sixth defect over link/mem: 64
// RC QPs with 16 READs of 64 KiB each against a responder that takes in 40
// frames a millisecond and drops what does not fit a small buffer in front
// of it. The requester used to ask for everything at once (16,384 response
// packets), lose most requests to the responder's intake, and every 67 ms
// resend all 16 of every QP, flooding it again until the QPs died of
// RETRY_EXC_ERR. Now the NIC bounds what it asks for across QPs (the read
// budget) and, after a timeout, resends one request and widens the window
// as answers come, so the connections survive and every READ completes.
func TestSlowResponder(t *testing.T) {
	checkGoroutines(t)
	const qps, depth, size = 64, 16, 64 << 10
	// The requester's frames that the responder cannot take wait in a
	// buffer of 32 and are dropped beyond it; the responses go back on a
	// lossless port.
	sw := mem.NewSwitch()
	pa, err := sw.Port(netip.MustParseAddr("10.0.3.1"), mem.Faults{}, mem.WithBuffer(32))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := sw.Port(netip.MustParseAddr("10.0.3.2"), mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	slow := newSlowIntake(pb, 40)
	a := must(rnic.Open(rnic.Options{Link: pa}))
	b := must(rnic.Open(rnic.Options{Link: slow}))
	t.Cleanup(func() { a.Close(); b.Close() })
	pda, pdb := must(a.AllocPD()), must(b.AllocPD())
	src := must(pdb.RegMR(make([]byte, size), rnic.AccessLocalWrite|rnic.AccessRemoteRead))
	dst := must(pda.RegMR(make([]byte, qps*size), rnic.AccessLocalWrite))
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	conn := rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteRead} // timeout 14 (67 ms), retry_cnt 7
	cq := must(a.CreateCQ(qps * depth))
	bcq := must(b.CreateCQ(qps))
	qcap := rnic.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	var reqs []*rnic.QP
	for i := range qps {
		qa := must(pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: qcap}))
		qb := must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: bcq, RecvCQ: bcq, Cap: qcap}))
		if err := qa.Connect(qb.Endpoint(conn), conn); err != nil {
			t.Fatal(err)
		}
		if err := qb.Connect(qa.Endpoint(conn), conn); err != nil {
			t.Fatal(err)
		}
		for j := range depth {
			err := qa.PostSend(rnic.SendWR{WRID: uint64(i*depth + j), Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{dst.SGE(i*size, size)}, RemoteAddr: src.Addr(), RKey: src.RKey()})
			if err != nil {
				t.Fatal(err)
			}
		}
		reqs = append(reqs, qa)
	}
	start := time.Now()
	for i, wc := range waitWC(t, cq, qps*depth, 60*time.Second) {
		if wc.Status != rnic.WCSuccess {
			t.Fatalf("completion %d of %d: WR %d %v; counters %v", i, qps*depth, wc.WRID, wc.Status, interesting(a))
		}
	}
	for i := range qps {
		if !bytes.Equal(dst.Bytes()[i*size:(i+1)*size], src.Bytes()) {
			t.Fatalf("QP %d: READ data wrong", i)
		}
	}
	c := interesting(a)
	t.Logf("%d READs in %v; requester: read_budget_waits %d, local_ack_timeout_err %d, retry_window_cuts %d, roce_retrans_packets %d; dropped at the responder's intake: %d",
		qps*depth, time.Since(start), c["read_budget_waits"], c["local_ack_timeout_err"], c["retry_window_cuts"], c["roce_retrans_packets"], pa.Stats().Overflow)
}
