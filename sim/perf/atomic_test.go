package perf

import (
	"errors"
	"testing"

	"github.com/rnic/rnic/sim/profile"
)

// atomicRun runs atomic_bw on cx6 with the atomic unit set by set.
func atomicRun(t *testing.T, set func(a *profile.Atomic), spec Spec) *Result {
	t.Helper()
	p := mustProfile(t, "cx6")
	set(&p.Atomic)
	spec.Test = AtomicBW
	if spec.Iters == 0 {
		spec.Iters, spec.Warmup = 1000, 100
	}
	res, err := Run(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAtomicsOneAddress: atomics to one address run one after another,
// each a PCIe read, the operation and the posted write that frees the
// lock, whichever QPs send them: the rate is one per read latency plus
// the ALU time, however many QPs and units there are; spread over the
// footprint's addresses the same QPs run as many at once as there are
// units.
func TestAtomicsOneAddress(t *testing.T) {
	p := mustProfile(t, "cx6")
	perAtomic := float64(p.PCIe.ReadLatency[0].Ns + 10) // 8-byte read; ALU 10 ns; the write's 32 TLP bytes take ~1 ns
	want := 1e3 / perAtomic
	units := func(a *profile.Atomic) { a.Units, a.ALUNs, a.LockBuckets = 16, 10, 0 }
	for _, c := range []struct {
		qps    int
		target string
	}{{1, AtomicPerQP}, {8, AtomicShared}, {64, AtomicShared}} {
		res := atomicRun(t, units, Spec{QPs: c.qps, AtomicTarget: c.target, Metadata: true})
		t.Logf("%d QPs, target %s: %.3f Mops (one address: %.3f), lock wait %d ns", c.qps, c.target, res.Mops, want, res.Server.AtomicLockWaitNs)
		// Below by up to a tenth: the measured window opens at the first
		// QP's warmup, while the others' unmeasured operations still
		// take their turns on the address.
		if res.Mops < 0.9*want || res.Mops > 1.02*want {
			t.Errorf("%d QPs to one address: %.3f Mops, want %.3f (one read-modify-write at a time)", c.qps, res.Mops, want)
		}
		if c.qps > 1 && res.Server.AtomicLockWaitNs == 0 {
			t.Errorf("%d QPs to one address waited for no lock", c.qps)
		}
	}
	spread := atomicRun(t, units, Spec{QPs: 64, Threads: 8, AtomicTarget: AtomicPerQP, Metadata: true}) // one thread posts and polls 12.5 M/s at most
	t.Logf("64 QPs, an address each: %.2f Mops", spread.Mops)
	if spread.Mops < 8*want {
		t.Errorf("64 QPs on their own addresses: %.2f Mops, want 8 times one address's %.2f at least", spread.Mops, want)
	}
}

// TestAtomicUnits: atomics to distinct addresses are bounded by the
// atomic units, each busy for a read-modify-write: the rate grows with
// the units until the rest of the NIC binds.
func TestAtomicUnits(t *testing.T) {
	var last float64
	for i, n := range []int{1, 2, 4} {
		res := atomicRun(t, func(a *profile.Atomic) { a.Units, a.ALUNs, a.LockBuckets = n, 10, 0 },
			Spec{QPs: 32, AtomicTarget: AtomicPerQP, Metadata: true})
		t.Logf("%d units: %.2f Mops, unit wait %d ns", n, res.Mops, res.Server.AtomicUnitWaitNs)
		if i > 0 && res.Mops < 1.8*last {
			t.Errorf("%d units: %.2f Mops, not 1.8 times the %.2f of half as many", n, res.Mops, last)
		}
		if res.Server.AtomicUnitWaitNs == 0 {
			t.Errorf("%d units: no atomic waited for a unit", n)
		}
		last = res.Mops
	}
}

// TestAtomicLockBuckets: with a region per QP, every QP's word is at
// offset 0 of its region. Hashed by the address's low bits into the lock
// table, they all share bucket 0 and run one at a time, as if on one
// address; hashed by all the bits (mix), or with a lock per address, they
// run at once.
func TestAtomicLockBuckets(t *testing.T) {
	spec := Spec{QPs: 16, AtomicTarget: AtomicPerQP, MRPerQP: true, Metadata: true}
	rate := map[string]float64{}
	for _, c := range []struct {
		name    string
		buckets int
		hash    string
	}{{"low_bits", 4096, profile.LockHashLowBits}, {"mix", 4096, profile.LockHashMix}, {"per address", 0, ""}} {
		res := atomicRun(t, func(a *profile.Atomic) {
			a.Units, a.ALUNs, a.LockBuckets, a.LockHash = 16, 10, c.buckets, c.hash
		}, spec)
		rate[c.name] = res.Mops
		t.Logf("%s: %.2f Mops, lock wait %d ns", c.name, res.Mops, res.Server.AtomicLockWaitNs)
	}
	if rate["mix"] < 4*rate["low_bits"] || rate["per address"] < 4*rate["low_bits"] {
		t.Errorf("rates %v: want the aliased low_bits buckets 4 times slower than mix and than a lock per address", rate)
	}
}

// TestAtomicResults checks the values the atomics leave in host memory
// (real bytes): fetch-and-add on one shared word ends at the number of
// adds of every QP, and each QP's chain of compare-and-swaps (n for n+1)
// on its own word at its iterations — each ran once, and a QP's in
// order, whatever the atomic unit's timing.
func TestAtomicResults(t *testing.T) {
	for _, c := range []struct {
		op, target string
	}{{FetchAndAdd, AtomicShared}, {FetchAndAdd, AtomicPerQP}, {CmpAndSwap, AtomicPerQP}} {
		res := atomicRun(t, func(a *profile.Atomic) { a.Units, a.ALUNs = 4, 10 },
			Spec{QPs: 8, Pairs: 2, Iters: 500, Warmup: 50, AtomicType: c.op, AtomicTarget: c.target})
		if res.Checked == 0 || res.Corrupt != 0 {
			t.Errorf("%s on %s: %d bytes checked, %d wrong", c.op, c.target, res.Checked, res.Corrupt)
		}
		if res.Errors != 0 {
			t.Errorf("%s on %s: %d failed completions", c.op, c.target, res.Errors)
		}
	}
}

// TestAtomicSpecRefused: only atomic_bw takes an atomic type or target,
// and only the ones perftest and the model know.
func TestAtomicSpecRefused(t *testing.T) {
	for _, s := range []Spec{
		{Test: WriteBW, AtomicType: FetchAndAdd},
		{Test: ReadLat, AtomicTarget: AtomicShared},
		{Test: AtomicBW, AtomicType: "SWAP"},
		{Test: AtomicBW, AtomicTarget: "everywhere"},
	} {
		var se *SpecError
		if err := s.Validate(); !errors.As(err, &se) {
			t.Errorf("%+v: %v, want a *SpecError", s, err)
		}
	}
}
