package rnic_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestFeatureScale: a device with max_qp 16384 and max_mr 65536 creates
// exactly that many QPs and MRs and refuses one more with an error naming
// the limit (ENOMEM in libibverbs); then 64 of the QPs, connected to a
// peer, run WRITEs concurrently. With -short the limits are scaled down
// (1024 QPs, 4096 MRs): the same checks, faster.
func TestFeatureScale(t *testing.T) {
	maxQP, maxMR := 16384, 65536
	if testing.Short() {
		maxQP, maxMR = 1024, 4096
	}
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	a := must(rnic.Open(rnic.Options{Link: pa, Name: "a", MaxQP: maxQP, MaxMR: maxMR}))
	b := must(rnic.Open(rnic.Options{Link: pb, Name: "b"}))
	t.Cleanup(func() { a.Close(); b.Close() })
	if got := a.Attr().MaxQP; got != maxQP {
		t.Fatalf("Attr().MaxQP = %d, want %d", got, maxQP)
	}
	pda, pdb := must(a.AllocPD()), must(b.AllocPD())
	cqa, cqb := must(a.CreateCQ(1<<16)), must(b.CreateCQ(1<<16))
	qcap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}

	// QPs.
	h0 := heapInUse()
	start := time.Now()
	qps := make([]*rnic.QP, 0, maxQP)
	seen := make(map[uint32]bool, maxQP)
	for i := 0; i < maxQP; i++ {
		qp, err := pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: qcap})
		if err != nil {
			t.Fatalf("CreateQP %d of %d: %v", i+1, maxQP, err)
		}
		if seen[qp.QPN()] || qp.QPN() > 0xFFFFFF || qp.QPN() < 2 {
			t.Fatalf("QP %d: QPN %#x reused or out of range", i, qp.QPN())
		}
		seen[qp.QPN()] = true
		qps = append(qps, qp)
	}
	dt := time.Since(start)
	h1 := heapInUse()
	t.Logf("%d QPs: created in %v (%v per QP), heap +%d KiB (%d bytes per QP)", maxQP, dt, dt/time.Duration(maxQP),
		(int64(h1)-int64(h0))/1024, (int64(h1)-int64(h0))/int64(maxQP))
	_, err = pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: qcap})
	errContains(t, err, fmt.Sprintf("QP %d of %d", maxQP+1, maxQP), fmt.Sprint(maxQP))
	// A freed slot is reusable.
	must0(t, qps[maxQP-1].Destroy())
	qps[maxQP-1] = must(pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: qcap}))

	// MRs.
	const mrSize = 64
	backing := make([]byte, maxMR*mrSize)
	h2 := heapInUse()
	start = time.Now()
	mrs := make([]*rnic.MR, 0, maxMR)
	for i := 0; i < maxMR; i++ {
		mr, err := pda.RegMR(backing[i*mrSize:(i+1)*mrSize:(i+1)*mrSize], rnic.AccessLocalWrite)
		if err != nil {
			t.Fatalf("RegMR %d of %d: %v", i+1, maxMR, err)
		}
		mrs = append(mrs, mr)
	}
	dt = time.Since(start)
	h3 := heapInUse()
	t.Logf("%d MRs of %d B: registered in %v (%v per MR), heap +%d KiB (%d bytes per MR)", maxMR, mrSize, dt, dt/time.Duration(maxMR),
		(int64(h3)-int64(h2))/1024, (int64(h3)-int64(h2))/int64(maxMR))
	_, err = pda.RegMR(make([]byte, 8), rnic.AccessLocalWrite)
	errContains(t, err, fmt.Sprintf("MR %d of %d", maxMR+1, maxMR), fmt.Sprint(maxMR))
	// Free some for the traffic below.
	start = time.Now()
	for _, mr := range mrs[:256] {
		must0(t, mr.Dereg())
	}
	t.Logf("256 Dereg in %v", time.Since(start))

	// 64 connected pairs, WRITEs on all at once.
	const pairs, per, size = 64, 4, 16 << 10
	type conn struct {
		qa, qb   *rnic.QP
		src, dst []byte
		ms, md   *rnic.MR
	}
	conns := make([]*conn, pairs)
	for i := range conns {
		c := &conn{qa: qps[i*(maxQP/pairs)], src: pattern(i, per*size), dst: make([]byte, per*size+guardLen)}
		c.qb = must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, Cap: qcap}))
		connectRC(t, c.qa, c.qb, rnic.ConnParams{PSN: rnic.PSN(i * 1000)})
		c.ms = must(pda.RegMR(c.src, rnic.AccessLocalWrite))
		c.md = must(pdb.RegMR(c.dst, allAccess))
		conns[i] = c
	}
	start = time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < per; k++ {
				if err := c.qa.PostSend(rnic.SendWR{WRID: uint64(i<<8 | k), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{c.ms.SGE(k*size, size)}, RemoteAddr: c.md.Addr() + uint64(k*size), RKey: c.md.RKey()}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	next := make([]int, pairs)
	for _, wc := range waitWC(t, cqa, pairs*per, 30*time.Second) {
		i, k := int(wc.WRID>>8), int(wc.WRID&0xFF)
		if wc.Status != rnic.WCSuccess || i >= pairs || wc.QPNum != conns[i].qa.QPN() || k != next[i] {
			t.Fatalf("completion %+v (QP %d expects WR %d)", wc, i, next[i])
		}
		next[i]++
	}
	t.Logf("%d pairs × %d WRITEs of %d KiB: %v", pairs, per, size>>10, time.Since(start))
	for i, c := range conns {
		if !bytes.Equal(c.dst[:per*size], c.src) || !bytes.Equal(c.dst[per*size:], make([]byte, guardLen)) {
			t.Errorf("pair %d: data differs", i)
		}
	}
	start = time.Now()
	for _, qp := range qps {
		must0(t, qp.Destroy())
	}
	t.Logf("%d Destroy in %v", maxQP, time.Since(start))
}

// TestFeatureConcurrentPosting: ibv_post_send, ibv_post_recv and
// ibv_poll_cq are thread safe (libibverbs threading model): four
// goroutines post WRITEs and SENDs on four QPs of the same two devices,
// sharing one send CQ, while one goroutine polls it and another polls the
// receive CQ. Per QP, completions come in posting order (IBTA §10.8.6);
// every byte lands. Run under -race.
func TestFeatureConcurrentPosting(t *testing.T) {
	checkGoroutines(t)
	const nqp, per, slot, depth = 4, 300, 512, 32
	p := newPair(t, pairOpts{mtu: rnic.MTU1024})
	qcap := rnic.QPCap{MaxSendWR: depth, MaxRecvWR: per, MaxSendSGE: 1, MaxRecvSGE: 1}
	type q struct {
		a, b    *rnic.QP
		src     *rnic.MR
		wdst    *rnic.MR // WRITE targets on b
		rdst    *rnic.MR // receive buffers on b
		credits chan struct{}
	}
	qs := make([]*q, nqp)
	for i := range qs {
		x := &q{credits: make(chan struct{}, depth)}
		x.a = must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: qcap}))
		x.b = must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: qcap}))
		connectRC(t, x.a, x.b, rnic.ConnParams{})
		src := make([]byte, per*slot)
		for k := 0; k < per; k++ {
			copy(src[k*slot:], pattern(i*1000+k, slot))
		}
		x.src = must(p.pda.RegMR(src, rnic.AccessLocalWrite))
		x.wdst = must(p.pdb.RegMR(make([]byte, per*slot), allAccess))
		x.rdst = must(p.pdb.RegMR(make([]byte, per*slot), rnic.AccessLocalWrite))
		for k := 0; k < depth; k++ {
			x.credits <- struct{}{}
		}
		qs[i] = x
	}
	byQPN := map[uint32]int{}
	for i, x := range qs {
		byQPN[x.a.QPN()] = i
		byQPN[x.b.QPN()] = i
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
		cancel()
	}
	var slotLag atomic.Int64
	// Receivers post as they go too: half of each QP's WRs are SENDs.
	for i, x := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < per; k++ {
				select {
				case <-x.credits:
				case <-ctx.Done():
					return
				}
				wr := rnic.SendWR{WRID: uint64(i<<16 | k), Flags: rnic.SendSignaled, SGL: []rnic.SGE{x.src.SGE(k*slot, slot)}}
				if k%2 == 0 {
					wr.Opcode, wr.RemoteAddr, wr.RKey = rnic.WRRDMAWrite, x.wdst.Addr()+uint64(k*slot), x.wdst.RKey()
				} else {
					wr.Opcode, wr.ImmData = rnic.WRSendWithImm, uint32(k)
					if err := x.b.PostRecv(rnic.RecvWR{WRID: uint64(k), SGL: []rnic.SGE{x.rdst.SGE(k*slot, slot)}}); err != nil {
						fail(err)
						return
					}
				}
				err := x.a.PostSend(wr)
				// BUG(sq-slot-after-cqe), see TestFeatureSendSlotFreeAfterPoll:
				// the slot of a polled completion may still be taken for
				// a moment. Retry briefly so the rest of this test runs.
				for tries := 0; err != nil && strings.Contains(err.Error(), "queue full") && tries < 1000; tries++ {
					slotLag.Add(1)
					time.Sleep(10 * time.Microsecond)
					err = x.a.PostSend(wr)
				}
				if err != nil {
					fail(fmt.Errorf("QP %d WR %d: %w", i, k, err))
					return
				}
			}
		}()
	}
	// Send-side poller: checks order per QP and returns credits.
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := make([]int, nqp)
		buf := make([]rnic.WC, 16)
		for done := 0; done < nqp*per; {
			n, err := p.cqa.Wait(ctx, buf)
			if err != nil {
				fail(fmt.Errorf("send CQ after %d completions: %w", done, err))
				return
			}
			for _, wc := range buf[:n] {
				i, k := int(wc.WRID>>16), int(wc.WRID&0xFFFF)
				if wc.Status != rnic.WCSuccess || i >= nqp || byQPN[wc.QPNum] != i || k != next[i] {
					fail(fmt.Errorf("send completion %+v (%v); QP %d expects WR %d", wc, wc.Status, i, next[i]))
					return
				}
				next[i]++
				qs[i].credits <- struct{}{}
			}
			done += n
		}
	}()
	// Receive-side poller.
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := make([]int, nqp)
		for i := range next {
			next[i] = 1
		}
		buf := make([]rnic.WC, 16)
		for done := 0; done < nqp*per/2; {
			n, err := p.cqb.Wait(ctx, buf)
			if err != nil {
				fail(fmt.Errorf("receive CQ after %d completions: %w", done, err))
				return
			}
			for _, wc := range buf[:n] {
				i := byQPN[wc.QPNum]
				if wc.Status != rnic.WCSuccess || int(wc.WRID) != next[i] || wc.ImmData != uint32(wc.WRID) || wc.ByteLen != slot {
					fail(fmt.Errorf("receive completion %+v on QP %d, expected WRID %d", wc, i, next[i]))
					return
				}
				next[i] += 2
			}
			done += n
		}
	}()
	wg.Wait()
	if n := slotLag.Load(); n > 0 {
		t.Logf("%d posts found the slot of an already polled completion still taken (BUG sq-slot-after-cqe)", n)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, x := range qs {
		for k := 0; k < per; k++ {
			b := x.wdst.Bytes()
			if k%2 == 1 {
				b = x.rdst.Bytes()
			}
			if !bytes.Equal(b[k*slot:(k+1)*slot], pattern(i*1000+k, slot)) {
				t.Fatalf("QP %d message %d: data differs", i, k)
			}
		}
	}

	// Two goroutines posting on the same QP.
	x := qs[0]
	var ids sync.Map
	var wg2 sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			for k := 0; k < depth/2; k++ {
				id := uint64(1<<20 | g<<8 | k)
				if err := x.a.PostSend(rnic.SendWR{WRID: id, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{x.src.SGE(k*slot, slot)}, RemoteAddr: x.wdst.Addr() + uint64((g*depth/2+k)*slot), RKey: x.wdst.RKey()}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg2.Wait()
	for _, wc := range waitWC(t, p.cqa, depth, 10*time.Second) {
		if _, dup := ids.LoadOrStore(wc.WRID, true); dup || wc.Status != rnic.WCSuccess {
			t.Fatalf("completion %+v duplicated or failed", wc)
		}
	}
	quiet(t, p.cqa, 10*time.Millisecond, "after the two posters")
}

// TestFeatureSendSlotFreeAfterPoll: once a send completion has been
// polled, its WR is no longer outstanding and its send queue slot is free
// (ibv_post_send(3): at most max_send_wr WRs outstanding, i.e. posted and
// not yet completed-and-polled). With max_send_wr 1, post → poll → post
// must never find the queue full.
func TestFeatureSendSlotFreeAfterPoll(t *testing.T) {
	p := newPair(t, pairOpts{cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	src := newGuarded(t, p.pda, 64, rnic.AccessLocalWrite, 1)
	dst := newGuarded(t, p.pdb, 64, allAccess, 2)
	for i := 0; i < 3000; i++ {
		if err := p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(0, 8)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}); err != nil {
			t.Fatalf("post %d, right after polling the completion of post %d: %v", i, i-1, err)
		}
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.WRID != uint64(i) || wc.Status != rnic.WCSuccess {
			t.Fatalf("completion %+v", wc)
		}
	}
}
