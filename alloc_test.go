package rnic_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestDataPathAllocs: the steady data path allocates nothing. The public
// types are converted into the NIC's at the boundary (convert.go): one
// work request at a time into a stack value, SGLs shared, completions
// through a stack array. testing.AllocsPerRun counts every allocation in
// the process while it runs, the NICs' engine goroutines included, so
// each case is a whole operation: post, the NICs' work, the completion.
func TestDataPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if testing.Short() {
		t.Skip("short")
	}
	p := newPair(t, pairOpts{})
	ctx := context.Background()
	src := must(p.pda.RegMR(make([]byte, 1<<16), rnic.AccessLocalWrite))
	dst := must(p.pdb.RegMR(make([]byte, 1<<16), rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	wcs := make([]rnic.WC, 40) // more than Poll's 16-entry chunk
	wait := func(cq *rnic.CQ, n int) {
		for got := 0; got < n; {
			k, err := cq.Wait(ctx, wcs[:n-got])
			if err != nil {
				t.Fatal(err)
			}
			for _, wc := range wcs[:k] {
				if wc.Status != rnic.WCSuccess {
					t.Fatalf("completion %+v", wc)
				}
			}
			got += k
		}
	}
	poll := func(cq *rnic.CQ, n int) {
		for got := 0; got < n; {
			k, err := cq.Poll(wcs[:n-got])
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
	}
	write := rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, 64)}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	list := make([]rnic.SendWR, 20)
	for i := range list {
		list[i] = rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.SGE(i*64, 32), src.SGE(i*64+32, 32)}, RemoteAddr: dst.Addr() + uint64(i*64), RKey: dst.RKey()}
	}
	inline := rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled | rnic.SendInline, SGL: []rnic.SGE{src.SGE(0, 32)}}
	recv := rnic.RecvWR{SGL: []rnic.SGE{dst.SGE(0, 4096)}}
	send := rnic.SendWR{Opcode: rnic.WRSendWithImm, Flags: rnic.SendSignaled, ImmData: 7, SGL: []rnic.SGE{src.SGE(0, 256)}}

	// SRQ: a second QP on b takes its receives from an SRQ.
	srq := must(p.pdb.CreateSRQ(rnic.SRQInitAttr{MaxWR: 64, MaxSGE: 1}))
	qcap := rnic.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}
	sqa := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: qcap}))
	sqb := must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqb, RecvCQ: p.cqb, SRQ: srq, Cap: qcap}))
	connectRC(t, sqa, sqb, rnic.ConnParams{})

	// UC and UD, whose frames go by reference and whose sends complete
	// once their frames are consumed.
	uca := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.UC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: qcap}))
	ucb := must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.UC, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: qcap}))
	connectRC(t, uca, ucb, rnic.ConnParams{})
	uda := must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.UD, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: qcap}))
	udb := must(p.pdb.CreateQP(rnic.QPInitAttr{Type: rnic.UD, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: qcap}))
	connectRC(t, uda, udb, rnic.ConnParams{})
	ah := must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
	ucWrite := rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, 256)}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	udSend := rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.SGE(0, 256)},
		AH: ah, RemoteQPN: udb.QPN(), RemoteQKey: 0x11111111}
	udRecv := rnic.RecvWR{SGL: []rnic.SGE{dst.SGE(0, 40+256)}}

	cases := []struct {
		name string
		op   func()
	}{
		{"PostSend+Wait", func() { must0(t, p.qpa.PostSend(write)); wait(p.cqa, 1) }},
		{"PostSend+Poll", func() { must0(t, p.qpa.PostSend(write)); poll(p.cqa, 1) }},
		{"PostSend-list-of-20+Wait", func() { must0(t, p.qpa.PostSend(list...)); wait(p.cqa, len(list)) }},
		{"PostSend-inline", func() {
			must0(t, p.qpb.PostRecv(recv))
			must0(t, p.qpa.PostSend(inline))
			wait(p.cqa, 1)
			wait(p.cqb, 1)
		}},
		{"PostRecv+SEND-with-imm", func() {
			must0(t, p.qpb.PostRecv(recv))
			must0(t, p.qpa.PostSend(send))
			wait(p.cqb, 1)
			wait(p.cqa, 1)
		}},
		{"SRQ.PostRecv+SEND", func() {
			must0(t, srq.PostRecv(recv))
			must0(t, sqa.PostSend(send))
			wait(p.cqb, 1)
			wait(p.cqa, 1)
		}},
		{"UC-WRITE-by-reference", func() { must0(t, uca.PostSend(ucWrite)); wait(p.cqa, 1) }},
		{"UD-SEND-by-reference", func() {
			must0(t, udb.PostRecv(udRecv))
			must0(t, uda.PostSend(udSend))
			wait(p.cqb, 1)
			wait(p.cqa, 1)
		}},
		{"Poll-empty", func() {
			if n, err := p.cqa.Poll(wcs); n != 0 || err != nil {
				t.Fatal(n, err)
			}
		}},
	}
	for _, c := range cases {
		refs := counter(t, p.a, "tx_payload_refs")
		for range 50 { // warm up: pools, rings, caches
			c.op()
		}
		if avg := testing.AllocsPerRun(500, c.op); avg != 0 {
			t.Errorf("%s: %v allocations per operation, want 0", c.name, avg)
		}
		if strings.HasSuffix(c.name, "by-reference") && counter(t, p.a, "tx_payload_refs")-refs < 550 {
			t.Errorf("%s: not sent by reference", c.name)
		}
	}
}

// TestDataPathAllocsDCQCN: with DCQCN on and a tenth of the frames
// marked CE on the wire, the data path — ECN-capable frames, CNPs, rate
// cuts, pacing through the arbiter's gate and its wake timers — still
// allocates nothing per operation.
func TestDataPathAllocsDCQCN(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if testing.Short() {
		t.Skip("short")
	}
	cfg := rnic.DefaultDCQCN(10e9)
	cfg.CNPInterval = 20 * time.Microsecond
	f := mem.Faults{Seed: 3, MarkCE: 0.1}
	p := newPair(t, pairOpts{fa: f, fb: f, devOpts: rnic.Options{DCQCN: &cfg}})
	src := must(p.pda.RegMR(make([]byte, 1<<16), rnic.AccessLocalWrite))
	dst := must(p.pdb.RegMR(make([]byte, 1<<16), rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	wcs := make([]rnic.WC, 8)
	write := rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, 16<<10)}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	op := func() {
		must0(t, p.qpa.PostSend(write))
		if n, err := p.cqa.Wait(context.Background(), wcs[:1]); err != nil || n != 1 || wcs[0].Status != rnic.WCSuccess {
			t.Fatalf("WRITE: %d %v %+v", n, err, wcs[0])
		}
	}
	for range 200 {
		op()
	}
	before := qpCounter(t, p.qpa, "rp_cnp_handled")
	if avg := testing.AllocsPerRun(500, op); avg != 0 {
		t.Errorf("%v allocations per 16 KiB WRITE with DCQCN, want 0", avg)
	}
	handled := qpCounter(t, p.qpa, "rp_cnp_handled") - before
	t.Logf("CNPs the sender handled while measured: %d", handled)
	if handled == 0 {
		t.Error("no CNP reached the sender while measured: the rate cuts and pacing were not exercised")
	}
}
