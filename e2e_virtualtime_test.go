package rnic_test

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestVirtualTimeREADME is the README's "Testing in virtual time": a
// user's test of RDMA code, written against the public API only, run in a
// testing/synctest bubble over link/mem with 5 % loss. The NICs' ACK
// timeouts run on the bubble's clock, which jumps ahead whenever every
// goroutine is blocked: the 16 timeouts the seeded losses cause take
// exactly 16 × 67.1 ms of virtual time and none of wall time, the same on
// every run.
func TestVirtualTimeREADME(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mem.Faults{Loss: 0.05, Seed: 7}
		pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), f, f)
		if err != nil {
			t.Fatal(err)
		}
		a, err := rnic.Open(rnic.Options{Link: pa})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := rnic.Open(rnic.Options{Link: pb})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		pda, _ := a.AllocPD()
		pdb, _ := b.AllocPD()
		cqa, _ := a.CreateCQ(64)
		cqb, _ := b.CreateCQ(64)
		qa, err := pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		qb, err := pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		table := make([]byte, 1<<16)
		for i := range table {
			table[i] = byte(i * 7)
		}
		mrb, err := pdb.RegMR(table, rnic.AccessLocalWrite|rnic.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		mra, _ := pda.RegMR(buf, rnic.AccessLocalWrite)
		pa2 := rnic.ConnParams{Timeout: 14, RetryCnt: 7}
		pb2 := rnic.ConnParams{Access: rnic.AccessRemoteRead, Timeout: 14, RetryCnt: 7}
		ea, eb := qa.Endpoint(pa2), qb.Endpoint(pb2)
		if err := qa.Connect(eb, pa2); err != nil {
			t.Fatal(err)
		}
		if err := qb.Connect(ea, pb2); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		wcs := make([]rnic.WC, 1)
		for i := range 200 {
			off := (i * 251) % (len(table) - 256)
			if err := qa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mra.SGE(0, 256)}, RemoteAddr: mrb.Addr() + uint64(off), RKey: mrb.RKey()}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := cqa.Wait(ctx, wcs)
			cancel()
			if err != nil || wcs[0].Status != rnic.WCSuccess {
				t.Fatalf("READ %d: %v %v", i, err, wcs[0].Status)
			}
			for j := range buf {
				if buf[j] != table[off+j] {
					t.Fatalf("READ %d: byte %d differs", i, j)
				}
			}
		}
		if el := time.Since(start); el != 16*ackTimeout(14) {
			t.Errorf("200 READs at 5%% loss took %v of virtual time, want 16 ACK timeouts of %v", el, ackTimeout(14))
		}
	})
}
