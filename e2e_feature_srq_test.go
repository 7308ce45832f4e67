package rnic_test

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// openOnSwitch opens a device on a new port of sw.
func openOnSwitch(t testing.TB, sw *mem.Switch, addr, name string, f mem.Faults) (*rnic.Device, *mem.Port) {
	t.Helper()
	port, err := sw.Port(netip.MustParseAddr(addr), f)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rnic.Open(rnic.Options{Link: port, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, port
}

// connectRC connects two RC QPs to each other with cp.
func connectRC(t testing.TB, x, y *rnic.QP, cp rnic.ConnParams) {
	t.Helper()
	cp = testConn(cp)
	cy := cp
	cy.PSN = (cp.PSN + 0x55555) & 0xFFFFFF
	must0(t, x.Connect(y.Endpoint(cy), cp))
	must0(t, y.Connect(x.Endpoint(cp), cy))
}

// TestFeatureSRQ: one shared receive queue serving three RC QPs connected
// to two peer devices (IBTA §10.2.9.1, ibv_create_srq(3)).
func TestFeatureSRQ(t *testing.T) {
	checkGoroutines(t)
	sw := mem.NewSwitch()
	b, _ := openOnSwitch(t, sw, "10.0.0.2", "b", mem.Faults{})
	a1, _ := openOnSwitch(t, sw, "10.0.0.1", "a1", mem.Faults{})
	a2, _ := openOnSwitch(t, sw, "10.0.0.3", "a2", mem.Faults{})
	pdb := must(b.AllocPD())
	cqb := must(b.CreateCQ(1024))
	const depth = 64
	srq := must(pdb.CreateSRQ(rnic.SRQInitAttr{MaxWR: depth, MaxSGE: 2}))
	qcap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	cp := rnic.ConnParams{Timeout: 10, MinRNRTimer: 1}

	type peer struct {
		dev *rnic.Device
		pd  *rnic.PD
		cq  *rnic.CQ
		qp  *rnic.QP // on the peer device
		qb  *rnic.QP // on b, with the SRQ
		src *rnic.MR
	}
	pdOf := map[*rnic.Device]*rnic.PD{}
	cqOf := map[*rnic.Device]*rnic.CQ{}
	var peers []*peer
	for _, d := range []*rnic.Device{a1, a1, a2} {
		if pdOf[d] == nil {
			pdOf[d], cqOf[d] = must(d.AllocPD()), must(d.CreateCQ(256))
		}
		pr := &peer{dev: d, pd: pdOf[d], cq: cqOf[d]}
		pr.qp = must(pr.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: pr.cq, RecvCQ: pr.cq, Cap: qcap}))
		pr.qb = must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, SRQ: srq, Cap: qcap}))
		connectRC(t, pr.qp, pr.qb, cp)
		buf := make([]byte, 64*1024)
		pr.src = must(pr.pd.RegMR(buf, rnic.AccessLocalWrite))
		peers = append(peers, pr)
	}

	// A QP attached to an SRQ has no receive queue of its own.
	if err := peers[0].qb.PostRecv(rnic.RecvWR{WRID: 1}); err == nil {
		t.Error("PostRecv on a QP that uses an SRQ succeeded; ibv_post_recv must refuse it")
	}

	const slot = 1024
	rbuf := make([]byte, depth*slot)
	rmr := must(pdb.RegMR(rbuf, rnic.AccessLocalWrite))
	postSRQ := func(first, n int) {
		t.Helper()
		for i := first; i < first+n; i++ {
			// Two SGEs per WQE: the first 100 bytes, then the rest.
			must0(t, srq.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{
				rmr.SGE((i%depth)*slot, 100), rmr.SGE((i%depth)*slot+100, slot-100)}}))
		}
	}
	send := func(pr *peer, k int) {
		t.Helper()
		n := 200 + k
		copy(pr.src.Bytes(), pattern(k, n))
		must0(t, pr.qp.PostSend(rnic.SendWR{WRID: uint64(k), Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{pr.src.SGE(0, n)}}))
		wc := waitWC(t, pr.cq, 1, 5*time.Second)[0]
		if wc.Status != rnic.WCSuccess || wc.WRID != uint64(k) {
			t.Fatalf("send %d: %+v", k, wc)
		}
	}

	t.Run("wqes-consumed-in-order", func(t *testing.T) {
		// Messages from both peers over three QPs, one at a time: the SRQ
		// hands out its WQEs in posting order whatever QP receives.
		const n = 12
		postSRQ(0, n)
		if got := srq.Posted(); got != n {
			t.Fatalf("Posted() = %d, want %d", got, n)
		}
		order := []int{0, 2, 1, 1, 2, 0, 2, 2, 0, 1, 0, 2}
		for k := 0; k < n; k++ {
			send(peers[order[k]], k)
		}
		wcs := waitWC(t, cqb, n, 5*time.Second)
		for k, wc := range wcs {
			want := peers[order[k]].qb
			if wc.Status != rnic.WCSuccess || wc.WRID != uint64(k) || wc.Opcode != rnic.WCRecv || wc.ByteLen != uint32(200+k) || wc.QPNum != want.QPN() {
				t.Errorf("receive %d: %+v; want WRID %d, %d bytes, on QP %#x", k, wc, k, 200+k, want.QPN())
				continue
			}
			if !bytes.Equal(rbuf[k*slot:k*slot+200+k], pattern(k, 200+k)) {
				t.Errorf("receive %d: data differs (scattered over two SGEs)", k)
			}
		}
		if got := srq.Posted(); got != 0 {
			t.Errorf("Posted() = %d after consuming all, want 0", got)
		}
	})

	t.Run("concurrent-senders", func(t *testing.T) {
		// All three QPs at once: every WQE used exactly once, and each
		// QP's messages land in increasing WQEs (a QP takes WQEs in its
		// own message order).
		const per = 12 // < max_send_wr 16, with room for BUG(sq-slot-after-cqe)
		base := 100
		postSRQ(base, 3*per)
		var wg sync.WaitGroup
		for i, pr := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < per; j++ {
					k := 1000*(i+1) + j
					n := 50 + j
					off := j * 256
					copy(pr.src.Bytes()[off:], pattern(k, n))
					if err := pr.qp.PostSend(rnic.SendWR{WRID: uint64(k), Opcode: rnic.WRSendWithImm, ImmData: uint32(k), Flags: rnic.SendSignaled,
						SGL: []rnic.SGE{pr.src.SGE(off, n)}}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, pr := range peers {
			for _, wc := range waitWC(t, pr.cq, per, 5*time.Second) {
				if wc.Status != rnic.WCSuccess {
					t.Fatalf("send: %+v", wc)
				}
			}
		}
		wcs := waitWC(t, cqb, 3*per, 5*time.Second)
		used := map[uint64]bool{}
		last := map[uint32]uint64{}
		for _, wc := range wcs {
			if wc.Status != rnic.WCSuccess || wc.WRID < uint64(base) || wc.WRID >= uint64(base+3*per) || used[wc.WRID] {
				t.Fatalf("receive %+v: bad status or WQE used twice", wc)
			}
			used[wc.WRID] = true
			if prev, ok := last[wc.QPNum]; ok && wc.WRID <= prev {
				t.Errorf("QP %#x took WQE %d after WQE %d", wc.QPNum, wc.WRID, prev)
			}
			last[wc.QPNum] = wc.WRID
			s := int(wc.WRID) % depth
			j := int(wc.ImmData) % 1000
			if wc.ByteLen != uint32(50+j) || !bytes.Equal(rbuf[s*slot:s*slot+50+j], pattern(int(wc.ImmData), 50+j)) {
				t.Errorf("receive WQE %d: message %d garbled (%d bytes)", wc.WRID, wc.ImmData, wc.ByteLen)
			}
		}
	})

	t.Run("limit-event-once", func(t *testing.T) {
		// ibv_modify_srq(IBV_SRQ_LIMIT): the event fires when fewer than
		// srq_limit WQEs remain, once; the SRQ is then disarmed.
		drainEvents(b, 10*time.Millisecond)
		postSRQ(200, 8)
		if err := srq.Arm(depth + 1); err == nil {
			t.Error("Arm above max_wr accepted")
		}
		must0(t, srq.Arm(4))
		if srq.Limit() != 4 {
			t.Fatalf("Limit() = %d after Arm(4)", srq.Limit())
		}
		for k := 0; k < 8; k++ {
			send(peers[k%3], 300+k)
			evs := drainEvents(b, 20*time.Millisecond)
			remaining := 8 - (k + 1)
			fired := 0
			for _, ev := range evs {
				if ev.Type == rnic.EventSRQLimitReached {
					fired++
					if ev.SRQ != srq {
						t.Errorf("limit event names SRQ %p, want %p", ev.SRQ, srq)
					}
				} else {
					t.Errorf("unexpected event %s", evString([]rnic.AsyncEvent{ev}))
				}
			}
			want := 0
			if remaining == 3 { // the first time fewer than 4 remain
				want = 1
			}
			if fired != want {
				t.Errorf("after message %d (%d WQEs left, limit 4): %d limit events, want %d", k+1, remaining, fired, want)
			}
			if remaining <= 3 && srq.Limit() != 0 {
				t.Errorf("Limit() = %d after the event, want 0 (disarmed)", srq.Limit())
			}
		}
		waitWC(t, cqb, 8, 5*time.Second)
	})

	t.Run("last-wqe-reached", func(t *testing.T) {
		// IBTA §11.6.3 / o11-5.2.5: a QP attached to an SRQ that enters
		// Error raises IBV_EVENT_QP_LAST_WQE_REACHED; the SRQ's WQEs are
		// not flushed (they belong to the other QPs too).
		postSRQ(400, 5)
		before := srq.Posted()
		qb := peers[2].qb
		must0(t, qb.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState))
		waitQPEvent(t, b, qb, rnic.EventQPLastWQEReached)
		quiet(t, cqb, 20*time.Millisecond, "SRQ QP moved to ERR")
		if got := srq.Posted(); got != before {
			t.Errorf("SRQ went from %d to %d WQEs when one of its QPs went to ERR", before, got)
		}
		// The other QPs keep receiving from the SRQ.
		send(peers[0], 500)
		wc := waitWC(t, cqb, 1, 5*time.Second)[0]
		if wc.Status != rnic.WCSuccess || wc.WRID != 400 || wc.QPNum != peers[0].qb.QPN() {
			t.Errorf("receive after the other QP's error: %+v", wc)
		}
	})

	t.Run("destroy-busy", func(t *testing.T) {
		err := srq.Destroy()
		if !errors.Is(err, rnic.ErrBusy) {
			t.Fatalf("Destroy of an SRQ with 3 QPs attached: %v, want ErrBusy", err)
		}
		for i, pr := range peers {
			must0(t, pr.qb.Destroy())
			if err := srq.Destroy(); i < len(peers)-1 && !errors.Is(err, rnic.ErrBusy) {
				t.Fatalf("Destroy with %d QPs attached: %v, want ErrBusy", len(peers)-1-i, err)
			} else if i == len(peers)-1 && err != nil {
				t.Fatalf("Destroy of an unused SRQ: %v", err)
			}
		}
		if err := srq.Destroy(); err == nil {
			t.Error("second Destroy of an SRQ succeeded")
		}
	})
}
