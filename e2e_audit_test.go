package rnic_test

import (
	"bytes"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// Tests of what an audit of everything reachable from the API found:
// calls a program can make that crashed the process, or gave a new object
// the rights of a destroyed one.

// TestOpenRefusesBadLimits: limits out of range are an error from Open.
// MaxQP -1 panicked in a make(); 2^16 WRs of 2^16 SGEs wrapped a QP's
// SGE ring size to 0 (uint32) and panicked the engine at the first send.
func TestOpenRefusesBadLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    rnic.Options
	}{
		{"MaxQP -1", rnic.Options{MaxQP: -1}},
		{"MaxCQ -1", rnic.Options{MaxCQ: -1}},
		{"MaxQP 2^24", rnic.Options{MaxQP: 1 << 24}},
		{"MaxQPWR 2^16+1", rnic.Options{MaxQPWR: 1<<16 + 1}},
		{"MaxSGE 2^16", rnic.Options{MaxQPWR: 1 << 16, MaxSGE: 1 << 16}},
		{"MaxInline 2^16", rnic.Options{MaxQPWR: 1 << 16, MaxInline: 1 << 16}},
		{"MaxCQE -5", rnic.Options{MaxCQE: -5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, _, err := mem.Pipe(netip.MustParseAddr("10.0.4.1"), netip.MustParseAddr("10.0.4.2"), mem.Faults{}, mem.Faults{})
			if err != nil {
				t.Fatal(err)
			}
			defer port.Close()
			tc.o.Link = port
			d, err := rnic.Open(tc.o)
			if err == nil {
				d.Close()
				t.Fatal("Open accepted it")
			}
			t.Log(err)
		})
	}
}

// TestWriteAtHugeOffset: MR.WriteAt at an offset near MaxInt64 passed the
// bounds check (off+len overflowed) and panicked with the engine's lock
// held, wedging the device.
func TestWriteAtHugeOffset(t *testing.T) {
	p := newPair(t, pairOpts{})
	mr := must(p.pda.RegMR(make([]byte, 64), rnic.AccessLocalWrite))
	for _, off := range []int64{math.MaxInt64, math.MaxInt64 - 3, 65, -1} {
		if _, err := mr.WriteAt([]byte("abcd"), off); err == nil {
			t.Errorf("WriteAt at %d accepted", off)
		}
		if _, err := mr.ReadAt(make([]byte, 4), off); err == nil {
			t.Errorf("ReadAt at %d accepted", off)
		}
	}
	if _, err := mr.WriteAt([]byte("abcd"), 60); err != nil {
		t.Fatal(err)
	}
	if len(p.a.Counters()) == 0 { // the device still answers
		t.Fatal("no counters")
	}
}

// TestMW2DiesWithItsQP: a type 2 window is bound through a QP and checked
// against the number of the QP a request arrives on. When that QP is
// destroyed, a new QP may get its number: the window must not grant the
// new QP's peer access (it did: the WRITE succeeded and the data landed).
func TestMW2DiesWithItsQP(t *testing.T) {
	p := newPair(t, pairOpts{conn: rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite}})
	buf := make([]byte, 4096)
	mrb := must(p.pdb.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessMWBind))
	mw := must(p.pdb.AllocMW(rnic.MWType2))
	key := mw.NextRKey()
	if err := p.qpb.PostSend(rnic.SendWR{Opcode: rnic.WRBindMW, Flags: rnic.SendSignaled,
		Bind: rnic.MWBindInfo{MW: mw.RKey(), NewKey: key, MR: mrb.LKey(), Addr: mrb.Addr(), Length: 4096, Access: rnic.AccessRemoteWrite}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, p.cqb, 1, 5*time.Second); wc[0].Status != rnic.WCSuccess {
		t.Fatalf("bind: %v", wc[0].Status)
	}
	old := p.qpb.QPN()
	if err := p.qpb.Destroy(); err != nil {
		t.Fatal(err)
	}
	qcap := rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	qb := must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: qcap}))
	qa := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: qcap}))
	if qb.QPN() != old {
		t.Logf("the new QP did not get the old number (%#x, %#x): the test proves less", qb.QPN(), old)
	}
	cp := rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite}
	if err := qb.Connect(qa.Endpoint(cp), cp); err != nil {
		t.Fatal(err)
	}
	if err := qa.Connect(qb.Endpoint(cp), cp); err != nil {
		t.Fatal(err)
	}
	src := must(p.pda.RegMR([]byte("through a window of a destroyed QP"), rnic.AccessLocalWrite))
	if err := qa.PostSend(rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, src.Len())}, RemoteAddr: mrb.Addr(), RKey: key}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, p.cqa, 1, 5*time.Second); wc[0].Status != rnic.WCRemAccessErr {
		t.Errorf("WRITE through the window: %v, want %v", wc[0].Status, rnic.WCRemAccessErr)
	}
	if !bytes.Equal(buf, make([]byte, 4096)) {
		t.Error("the WRITE landed")
	}
}

// TestHugeClaimedLengthIsCheap: the responder checks a WRITE's or READ's
// whole range before its first packet. It used to translate the range
// through the MTT, page by page, so a packet claiming 1 GiB of a 1 GiB
// region cost 262,144 MTT reads (and kept a scratch array that size for
// the device's life). It now checks bounds and rights against the MPT
// entry alone, as a NIC does: a flood of such packets costs no more than
// small ones.
func TestHugeClaimedLengthIsCheap(t *testing.T) {
	p := newPair(t, pairOpts{typ: rnic.UC, conn: rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite}})
	const size = 1 << 30
	// 4 KiB MTT pages, as the test counts them (a region registered
	// without a page size gets the largest its length calls for).
	big := must(p.pdb.RegMRPageSize(make([]byte, size), 1<<32, rnic.AccessLocalWrite|rnic.AccessRemoteWrite, 4096))
	src := must(p.pda.RegMR(make([]byte, 2<<20), rnic.AccessLocalWrite))
	before := mttLookups(p.b)
	// 2 MiB WRITEs each claim 2 MiB of the region: 512 pages checked per
	// message used to be 512 MTT reads at its first packet, on top of the
	// 512 the packets themselves need.
	const n = 8
	for i := range n {
		if err := p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.SGE(0, 2<<20)},
			RemoteAddr: big.Addr() + uint64(i)*(64<<20), RKey: big.RKey()}); err != nil {
			t.Fatal(err)
		}
	}
	waitWC(t, p.cqa, n, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for mttLookups(p.b)-before < n*512 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := mttLookups(p.b) - before; got != n*512 {
		t.Errorf("%d MTT lookups for %d WRITEs of 512 pages, want %d (one per page placed)", got, n, n*512)
	}
}

func mttLookups(d *rnic.Device) uint64 {
	c := interesting(d)
	return c["mtt_cache_hit"] + c["mtt_cache_miss"]
}

// TestPDNumbersDoNotRepeat: PD numbers are what protection checks compare;
// after 2^32 AllocPD calls the counter wraps, and a number still in use
// must not be handed out again (a region of one PD would then be usable
// from the other).
func TestPDNumbersDoNotRepeat(t *testing.T) {
	p := newPair(t, pairOpts{})
	live := p.pda.Handle()
	rnic.SetNextPD(p.a, live-1)
	pd := must(p.a.AllocPD())
	if pd.Handle() == live {
		t.Fatalf("PD number %d given twice", live)
	}
	rnic.SetNextPD(p.a, math.MaxUint32)
	if pd := must(p.a.AllocPD()); pd.Handle() == 0 || pd.Handle() == live {
		t.Fatalf("after the wrap: PD number %d", pd.Handle())
	}
}

// TestDestroyCQRacesCreateQP: destroying a CQ while a QP is being created
// on it either fails (busy) or the QP creation fails; never both succeed
// (the QP would then write its completions to a CQ number that the next
// CQ gets).
func TestDestroyCQRacesCreateQP(t *testing.T) {
	p := newPair(t, pairOpts{})
	qcap := rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	for range 200 {
		cq := must(p.a.CreateCQ(4))
		done := make(chan error, 1)
		var qp *rnic.QP
		go func() {
			var err error
			qp, err = p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: qcap})
			done <- err
		}()
		derr := cq.Destroy()
		qerr := <-done
		if derr == nil && qerr == nil {
			t.Fatal("the CQ was destroyed and a QP created on it")
		}
		if qerr == nil {
			must(0, qp.Destroy())
			must(0, cq.Destroy())
		}
	}
}
