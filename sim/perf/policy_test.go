package perf

import (
	"testing"

	"github.com/rnic/rnic/sim"
)

// TestCachePolicyCliff runs, in virtual time, 64-byte WRITEs with one
// outstanding on each of 80 QPs, served in turn through a fully
// associative QPC cache of 64 entries and one processing unit. LRU (and
// FIFO: no hit reorders anything here) evicts exactly the context needed
// next, so the first lookup of every QP's turn misses (the second, for its
// ACK, hits): half the lookups. Random replacement keeps most contexts,
// and with one unit stalling on each miss the message rate follows.
func TestCachePolicyCliff(t *testing.T) {
	type result struct{ hit, mops float64 }
	got := map[string]result{}
	for _, policy := range []string{"lru", "fifo", "random"} {
		p := mustProfile(t, "cx6")
		p.Caches.QPC.CapacityBytes, p.Caches.QPC.Ways, p.Caches.QPC.Policy = 64*256, 0, policy
		p.Engine.Units, p.Engine.MissesInFlight = 1, 0 // a miss stalls the one unit: the rate follows the hit rate
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, QPs: 80, Iters: 400, Warmup: 100, TxDepth: 1, Threads: 1, CQMod: 1, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Client
		got[policy] = result{c.QPCHit / (c.QPCHit + c.QPCMiss), res.Mops}
		t.Logf("%s: client QPC hit rate %.3f, %.1f Mops", policy, got[policy].hit, res.Mops)
	}
	if lru, rnd := got["lru"], got["random"]; lru.hit > 0.55 || rnd.hit < lru.hit+0.15 || rnd.mops < 1.3*lru.mops {
		t.Errorf("LRU %+v, random %+v: want LRU's hit rate at most 0.55, random's 0.15 above it and its rate 1.3 times LRU's", lru, rnd)
	}
}

// TestMissesInFlight: the same thrashing workload with one unit, with
// steps waiting for their reads parked (engine.misses_in_flight) instead
// of stalling the unit: the unit serves other QPs meanwhile, so the rate
// grows with the steps allowed in flight, and with none it is the
// blocking model's.
func TestMissesInFlight(t *testing.T) {
	var last float64
	for i, n := range []int{0, 1, 4, 16} {
		p := mustProfile(t, "cx6")
		p.Caches.QPC.CapacityBytes, p.Caches.QPC.Ways = 64*256, 0
		p.Engine.Units, p.Engine.MissesInFlight = 1, n
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, QPs: 80, Iters: 400, Warmup: 100, TxDepth: 1, Threads: 1, CQMod: 1, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("misses_in_flight %d: %.2f Mops, client QPC hit rate %.3f", n, res.Mops, res.Client.QPCHit/(res.Client.QPCHit+res.Client.QPCMiss))
		if i > 0 && res.Mops < 1.2*last {
			t.Errorf("misses_in_flight %d: %.2f Mops, not 1.2 times the %.2f with fewer", n, res.Mops, last)
		}
		last = res.Mops
	}
}

// TestMissTable: with 16 steps allowed to park, the QPC cache's miss table
// bounds how many of their context reads are in flight: one entry makes
// the misses queue behind each other (little better than a unit that
// stalls), more entries let them overlap.
func TestMissTable(t *testing.T) {
	var rates []float64
	for _, depth := range []int{1, 4, 0} {
		p := mustProfile(t, "cx6")
		p.Caches.QPC.CapacityBytes, p.Caches.QPC.Ways, p.Caches.QPC.OutstandingMisses = 64*256, 0, depth
		p.Engine.Units, p.Engine.MissesInFlight = 1, 16
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, QPs: 80, Iters: 400, Warmup: 100, TxDepth: 1, Threads: 1, CQMod: 1, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("QPC miss table of %d entries (0: unbounded): %.2f Mops", depth, res.Mops)
		rates = append(rates, res.Mops)
	}
	if rates[1] < 1.2*rates[0] || rates[2] < 1.2*rates[1] {
		t.Errorf("rates %.2f Mops with 1, 4 and unbounded miss table entries: want each 1.2 times the one before", rates)
	}
}

// TestWQEPrefetch: one QP posting 64-byte WRITEs without BlueFlame fetches
// a WQE per step, each a PCIe round trip its unit waits out. Posted in
// lists of 8 with one doorbell each (perftest -l 8) and read ahead in one
// go at the doorbell (engine.wqe_prefetch), the steps find their WQEs
// there; a prefetch without lists changes nothing.
func TestWQEPrefetch(t *testing.T) {
	rate := func(list, prefetch int) float64 {
		p := mustProfile(t, "cx6")
		p.Engine.WQEByMMIO, p.Engine.WQEPrefetch = false, prefetch
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, QPs: 1, Iters: 2000, Warmup: 200, TxDepth: 64, CQMod: 8, PostList: list, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("post list %d, prefetch %d: %.2f Mops", list, prefetch, res.Mops)
		return res.Mops
	}
	base, lists, prefetchOnly, both := rate(1, 0), rate(8, 0), rate(1, 8), rate(8, 8)
	if prefetchOnly != base || lists < base*0.9 {
		t.Errorf("a prefetch without lists %.2f or lists without prefetch %.2f differ from %.2f", prefetchOnly, lists, base)
	}
	if both < 2*base {
		t.Errorf("lists of 8 read ahead: %.2f Mops, want at least twice %.2f", both, base)
	}
}

// TestRNRInVirtualTime: a send_bw server that keeps fewer receives posted
// than the client has SENDs in flight runs dry; its responder answers
// with RNR NAKs, the client waits out the RNR timer in virtual time and
// sends again (rnr_retry 7: forever), so every SEND still completes, at a
// fraction of the rate. With receives enough for the window, none.
func TestRNRInVirtualTime(t *testing.T) {
	run := func(rx int) (*Result, error) {
		return Run(mustProfile(t, "cx6"), Spec{Test: SendBW, Size: 64, QPs: 1, Iters: 1000, Warmup: 100, TxDepth: 64, RxDepth: rx, Metadata: true})
	}
	full, err := run(128)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := run(4)
	if err != nil {
		t.Fatal(err)
	}
	sent, got := dry.Server.Counters["rnr_nak_sent"], dry.Client.Counters["rnr_nak_retry_err"]
	t.Logf("rx_depth 128: %.2f Mops, %d RNR NAKs; rx_depth 4: %.3f Mops, %d RNR NAKs sent, %d received, %d WC errors",
		full.Mops, full.Server.Counters["rnr_nak_sent"], dry.Mops, sent, got, dry.Errors)
	switch {
	case full.Server.Counters["rnr_nak_sent"] != 0:
		t.Error("RNR NAKs with receives enough for the window")
	case sent == 0 || sent != got:
		t.Errorf("rx_depth 4: %d RNR NAKs sent, %d received; want some, all received", sent, got)
	case dry.Errors != 0 || dry.Ops == 0:
		t.Errorf("rx_depth 4: %d completion errors, %d operations measured", dry.Errors, dry.Ops)
	case dry.Mops > full.Mops/10:
		t.Errorf("rx_depth 4: %.3f Mops, not a tenth of %.2f: the RNR timer cost nothing", dry.Mops, full.Mops)
	}
}

// TestRecvAtARate: a send_bw server whose receives are posted by a thread
// of their own at a rate (RecvEvery) keeps up while it posts faster than
// the SENDs come, and runs dry when slower: RNR NAKs, the RNR timer, and
// the SENDs read again across the client's PCIe (the NIC's cost of each
// RNR NAK: the WQE and the payload fetched once more).
func TestRecvAtARate(t *testing.T) {
	run := func(every sim.Time) *Result {
		res, err := Run(mustProfile(t, "cx6"), Spec{Test: SendBW, Size: 64, Iters: 3000, Warmup: 300, RxDepth: 256, RecvEvery: every, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("a receive every %v: %.3f Mops, %d RNR NAKs, client PCIe to NIC %d B", every, res.Mops,
			res.Server.Counters["rnr_nak_sent"], res.Client.PCIeToDeviceBytes)
		return res
	}
	fast, slow := run(50), run(400)
	switch {
	case fast.Server.Counters["rnr_nak_sent"] != 0:
		t.Errorf("posting every 50 ns (20 M/s) ran dry")
	case slow.Server.Counters["rnr_nak_sent"] == 0 || slow.Errors != 0:
		t.Errorf("posting every 400 ns: %d RNR NAKs, %d errors; want some and none", slow.Server.Counters["rnr_nak_sent"], slow.Errors)
	case slow.Mops > fast.Mops/2:
		t.Errorf("posting every 400 ns: %.3f Mops, not below half of %.3f", slow.Mops, fast.Mops)
	case slow.Client.PCIeToDeviceBytes <= fast.Client.PCIeToDeviceBytes:
		t.Errorf("the client read no more across PCIe with RNR NAKs (%d vs %d B)", slow.Client.PCIeToDeviceBytes, fast.Client.PCIeToDeviceBytes)
	}
	if err := (Spec{Test: WriteBW, RecvEvery: 100}).Validate(); err == nil {
		t.Errorf("write_bw with recv_every: no error")
	}
}
