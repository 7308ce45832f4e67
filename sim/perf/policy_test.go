package perf

import "testing"

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
		p.Engine.Units = 1 // a miss stalls the one unit: the rate follows the hit rate
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
