package transport

import (
	"testing"

	"github.com/rnic/rnic/wire"
)

// TestBill checks that the engine bills the host-side work of a WRITE
// and a READ as the timing model expects: one WQE fetch per WQE, the
// payload as DMA reads on the sender and writes on the receiver, one CQE
// per signaled completion, and cache misses only the first time.
func TestBill(t *testing.T) {
	p := newPair(t, nodeConfig{pathMTU: wire.MTU1024, billing: true}, nodeConfig{pathMTU: wire.MTU1024, billing: true})
	p.A.e.TakeBill()
	p.B.e.TakeBill()
	const n = 3000 // three packets at MTU 1024
	p.A.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, n)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
	p.settle(4)
	a, b := p.A.e.TakeBill(), p.B.e.TakeBill()
	if a.WQEFetches != 1 || a.WQEBytes != 64 {
		t.Errorf("sender WQE fetches %d (%d bytes), want 1 (64)", a.WQEFetches, a.WQEBytes)
	}
	if a.DMAReadBytes != n || a.DMAReads != 3 || a.TxPackets != 3 {
		t.Errorf("sender DMA reads %d descriptors, %d bytes, %d packets; want 3, %d, 3", a.DMAReads, a.DMAReadBytes, a.TxPackets, n)
	}
	if b.DMAWriteBytes != n || b.DMAWrites != 3 || b.RxPackets != 3 {
		t.Errorf("receiver DMA writes %d descriptors, %d bytes, %d packets; want 3, %d, 3", b.DMAWrites, b.DMAWriteBytes, b.RxPackets, n)
	}
	if a.CQEWrites != 1 || b.CQEWrites != 0 {
		t.Errorf("CQE writes %d/%d, want 1/0", a.CQEWrites, b.CQEWrites)
	}
	// The receiver also checks the whole RETH range on the FIRST packet.
	if a.Translations != 3 || b.Translations != 4 {
		t.Errorf("translations %d/%d, want 3/4", a.Translations, b.Translations)
	}
	// The same again: the caches are warm now.
	p.A.post(SendWR{WRID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, n)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
	p.settle(4)
	a, b = p.A.e.TakeBill(), p.B.e.TakeBill()
	if a.QPCMisses+a.MPTMisses+a.MTTMisses+b.QPCMisses+b.MPTMisses+b.MTTMisses != 0 {
		t.Errorf("warm caches missed: sender %+v receiver %+v", a, b)
	}
}

// TestBillCQsCleared: a bill lists the CQs its completions went to in a
// scratch array that later bills reuse. Entries an older, longer bill
// left behind are cleared (a destroyed CQ must not stay reachable from
// it), and a bill TakeBill returned keeps its entries until the next call.
func TestBillCQsCleared(t *testing.T) {
	var e Engine
	cqs := []*CQ{{CQN: 1}, {CQN: 2}, {CQN: 3}}
	for _, cq := range cqs {
		e.bill.addCQE(cq)
	}
	three := e.TakeBill()
	if len(three.CQs) != 3 || three.CQs[2].CQ != cqs[2] {
		t.Fatalf("bill of three CQs: %+v", three.CQs)
	}
	e.bill.addCQE(cqs[0])
	one := e.TakeBill() // the three-CQ bill's entries 1 and 2 are stale now
	if len(one.CQs) != 1 || one.CQs[0].CQ != cqs[0] {
		t.Fatalf("bill of one CQ: %+v", one.CQs)
	}
	e.ResetBill()
	for i, c := range e.bill.CQs[:cap(e.bill.CQs)] {
		if i >= 1 && c.CQ != nil {
			t.Errorf("scratch entry %d still holds CQ %d", i, c.CQ.CQN)
		}
	}
}
