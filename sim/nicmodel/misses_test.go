package nicmodel

import (
	"slices"
	"testing"

	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
)

// TestMissTableQueues: with a QPC miss table of two entries, two misses at
// the same time read the host together and a third waits for the first
// entry to free; without a table all three go at once.
func TestMissTableQueues(t *testing.T) {
	_, a, _ := newTestHosts(t)
	n := a.nic
	bytes := n.prof.Caches.QPC.EntryBytes
	one := n.pcie.Read(0, bytes) // an idle link's read: the latency alone
	start := sim.Time(10 * one)  // past that read, on an idle link again
	n.mshr[qpcCache] = make([]sim.Time, 2)
	r1 := n.missRead(qpcCache, start, bytes)
	r2 := n.missRead(qpcCache, start, bytes)
	r3 := n.missRead(qpcCache, start, bytes)
	if r1 > start+2*one || r2 > start+2*one {
		t.Errorf("the first two misses back at %v and %v, want about %v", r1, r2, start+one)
	}
	if r3 < min(r1, r2)+one/2 {
		t.Errorf("the third miss back at %v: it did not wait for an entry (the first two at %v, %v)", r3, r1, r2)
	}
	if n.costs.MissTableWait == 0 {
		t.Error("no wait for a miss table entry counted")
	}
}

// TestMergedQPCMiss: a step of a QP whose context is still being read for
// another step (qpcFill in the future) starts its work when that read is
// back, even though the cache already says hit.
func TestMergedQPCMiss(t *testing.T) {
	s, n, qp, slot := oneQP(t)
	back := s.Now() + 5000
	n.qpcFill[slot] = back
	unit, now := n.units.Earliest(s.Now())
	n.chargeBill(unit, now, &transport.Bill{QP: qp.QPN, TxPackets: 1})
	if done := n.qpAt[txSide][slot]; done < back+sim.Time(n.prof.Engine.TxPacketNs) {
		t.Errorf("step done at %v, before the context read back at %v plus its processing", done, back)
	}
	if n.costs.MergedMisses != 1 {
		t.Errorf("%d merged misses counted, want 1", n.costs.MergedMisses)
	}
}

// TestMergedTranslationMiss: a step that finds its region's MPT entry
// and MTT entries in the cache while another step's read of them is
// still on its way waits for that read; one that misses them records
// when its read is back.
func TestMergedTranslationMiss(t *testing.T) {
	s, a, _ := newTestHosts(t)
	n := a.nic
	cq := a.newCQ()
	q1, q2 := a.newQP(cq, cq), a.newQP(cq, cq)
	unit, now := n.units.Earliest(s.Now())
	miss := transport.Bill{QP: q1.QPN, TxPackets: 1, MPTLookups: 1, MPTMisses: 1, MTTLookups: 1, MTTMisses: 1, MPTIndex: 7, MTTIndex: 40}
	n.chargeBill(unit, now, &miss)
	back := n.mttFill[40]
	if back <= now || n.mptFill[7] <= now || n.mptFill[7] > back {
		t.Fatalf("fills recorded: MPT %v, MTT %v (now %v)", n.mptFill[7], back, now)
	}
	// Another QP's step, at once, hits the same entries (the functional
	// cache has them): it must not start its work before they are back.
	unit, now = n.units.Earliest(s.Now())
	hit := transport.Bill{QP: q2.QPN, TxPackets: 1, MPTLookups: 1, MTTLookups: 1, MPTIndex: 7, MTTIndex: 40}
	n.chargeBill(unit, now, &hit)
	slot, _ := n.slot(q2.QPN)
	if done := n.qpAt[txSide][slot]; done < back+sim.Time(n.prof.Engine.TxPacketNs) {
		t.Errorf("the hitting step done at %v, before the entries are back at %v plus its processing", done, back)
	}
	if n.costs.MergedMisses != 2 {
		t.Errorf("%d merged misses, want 2 (its MPT entry, then its MTT entries)", n.costs.MergedMisses)
	}
}

// TestSlotCountersOwned: WQEs a destroyed QP left read ahead (or sent by
// BlueFlame) in its slot are not used by the next QP in that slot: its
// first doorbell clears them.
func TestSlotCountersOwned(t *testing.T) {
	_, n, old, slot := oneQP(t)
	n.doorbell(old, 1, 64)
	n.wqePF[slot], n.wqeMM[slot] = 5, 2 // left unused when old goes
	next := &transport.QP{QPN: old.QPN} // the slot's next QP
	n.doorbell(next, 1, 1024)           // no BlueFlame for 1 KiB
	if n.wqePF[slot] != 0 || n.wqeMM[slot] != 0 {
		t.Errorf("the next QP inherits %d prefetched and %d BlueFlame WQEs", n.wqePF[slot], n.wqeMM[slot])
	}
	n.wqePF[slot] = 3
	n.doorbell(next, 1, 1024)
	if n.wqePF[slot] != 3 {
		t.Error("a second doorbell of the same QP cleared its counters")
	}
}

// oneQP returns a NIC of the test hosts with one QP, and the QP's slot.
func oneQP(t *testing.T) (*sim.Sim, *NIC, *transport.QP, int) {
	t.Helper()
	s, a, _ := newTestHosts(t)
	cq := a.newCQ()
	qp := a.newQP(cq, cq)
	slot, _ := a.nic.slot(qp.QPN)
	return s, a.nic, qp, slot
}

// TestParkedStepTraced: a step parked for its reads shows in the stage
// trace (the latency breakdown) where it parks and where its reads are
// back, and finishes after them.
func TestParkedStepTraced(t *testing.T) {
	s, n, qp, slot := oneQP(t)
	n.prof.Engine.MissesInFlight = 4
	var stages []string
	n.SetTracer(func(at sim.Time, _ *NIC, stage string, _ uint32) { stages = append(stages, stage) })
	unit, now := n.units.Earliest(s.Now())
	n.chargeBill(unit, now, &transport.Bill{QP: qp.QPN, TxPackets: 1, QPCLookups: 1, QPCMisses: 1})
	if n.inFlight != 1 || n.costs.Parked != 1 {
		t.Fatalf("%d steps in flight, %d parked; want the step parked", n.inFlight, n.costs.Parked)
	}
	s.Run()
	want := []string{"TX unit starts", "parked for its reads", "parked step's reads back", "TX unit done (processing)"}
	for _, w := range want {
		if !slices.Contains(stages, w) {
			t.Errorf("stages %q lack %q", stages, w)
		}
	}
	if n.inFlight != 0 || n.qpAt[txSide][slot] == sim.Never {
		t.Errorf("after the run: %d in flight, the QP's side still parked", n.inFlight)
	}
}
