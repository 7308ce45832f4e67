package nicmodel

import (
	"math/bits"

	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/timing"
)

// atomicUnit is the responder's atomic execution (profile.Atomic): a pool
// of atomic units, each running one read-modify-write of host memory at a
// time, and the lock table that runs atomics to one address — or to
// addresses that share a bucket — one after another.
//
//	step done ─▶ [bucket lock] ─▶ [atomic unit] ─ PCIe read ─ ALU ─ posted write ─▶ lock free
//	                                                          └─▶ response leaves
//
// The engine has executed the atomic when the step ran (the value is in
// host memory and in the response); the unit decides when.
type atomicUnit struct {
	units *timing.Pool
	alu   sim.Time
	shift uint // log2 of the lock granule
	// With lock_buckets: when each bucket's last atomic gave it back.
	buckets []sim.Time
	mix     bool
	// Without: when each address's last atomic gave its lock back; the
	// entries of locks given back before now are pruned as it grows.
	addrs map[uint64]sim.Time
}

// pruneLocks is the size past which the per-address lock table drops the
// locks no atomic holds.
const pruneLocks = 1 << 14

func newAtomicUnit(a *profile.Atomic) *atomicUnit {
	if a.Units == 0 {
		return nil
	}
	u := &atomicUnit{units: timing.NewPool(a.Units), alu: sim.Time(a.ALUNs), shift: 3}
	if a.LockGranuleBytes > 0 {
		u.shift = uint(bits.TrailingZeros(uint(a.LockGranuleBytes)))
	}
	if a.LockBuckets > 0 {
		u.buckets = make([]sim.Time, a.LockBuckets)
		u.mix = a.LockHash == profile.LockHashMix
	} else {
		u.addrs = make(map[uint64]sim.Time)
	}
	return u
}

// lockAddr names an atomic's host memory for the lock table. The model
// places each region at its own 1 TiB-aligned base (regions without host
// memory all start at bus address 0 of one space), so the low bits of an
// address are its offset in the region, as they are in a page-aligned
// buffer's physical address.
func lockAddr(b *transport.Bill) uint64 { return uint64(b.AtomicMR)<<40 | b.AtomicAddr&(1<<40-1) }

// bucket returns the lock-table bucket of granule g.
func (u *atomicUnit) bucket(g uint64) int {
	if u.mix {
		// splitmix64's finaliser: every bit of g reaches every bit.
		g = (g ^ g>>30) * 0xbf58476d1ce4e5b9
		g = (g ^ g>>27) * 0x94d049bb133111eb
		g ^= g >> 31
	}
	return int(g % uint64(len(u.buckets)))
}

// lockFree returns when the lock of granule g is free.
func (u *atomicUnit) lockFree(g uint64) sim.Time {
	if u.buckets != nil {
		return u.buckets[u.bucket(g)]
	}
	return u.addrs[g]
}

// hold records that granule g's lock is held until t.
func (u *atomicUnit) hold(g uint64, t, now sim.Time) {
	if u.buckets != nil {
		u.buckets[u.bucket(g)] = t
		return
	}
	pruneDone(u.addrs, pruneLocks, now)
	u.addrs[g] = t
}

// pruneDone drops, once tbl holds limit entries or more, the entries whose
// time has passed (a read back, a lock given back): tables keyed by
// address stay bounded by what is in flight.
func pruneDone[K comparable](tbl map[K]sim.Time, limit int, now sim.Time) {
	if len(tbl) < limit {
		return
	}
	for k, at := range tbl {
		if at <= now {
			delete(tbl, k)
		}
	}
}

// atomics runs a step's atomics (done: when its unit finished processing
// the request) through the atomic unit: each takes its lock, then a
// unit, reads the word, operates and writes it back; the lock is free
// again when the write has left. It returns when the last one's original
// value is known (its response can leave) and when its write has left.
func (n *NIC) atomics(done sim.Time, b *transport.Bill) (resp, written sim.Time) {
	u := n.atom
	g := lockAddr(b) >> u.shift
	t := done
	for range b.Atomics {
		locked := max(t, u.lockFree(g))
		unit, start := u.units.Earliest(locked)
		n.costs.AtomicLockWait += locked - t
		n.costs.AtomicUnitWait += start - locked
		r := n.pcie.Read(start, 8)
		resp = r + u.alu
		written, _ = n.pcie.Write(resp, 8)
		u.units.ServeOn(unit, start, written-start)
		u.hold(g, written, n.s.Now())
		n.costs.Atomics++
		t = written
	}
	n.tracef(resp, "atomic read-modify-write done", b.QP)
	return resp, written
}
