package atu

// Regression tests for defects these tests found (all fixed): each names
// the rule it pins down.

import (
	"errors"
	"testing"
)

// TestBugDeallocMWStaleKey: DeallocMW must free only the window the key
// names. Its check "e.Key>>8 != idx" is always false (every entry at idx
// has a key whose index is idx), so the variant is never compared and a
// stale key frees whichever window now holds the index, e.g. after a
// second rnic.MW.Dealloc of an already freed window (MW has no "dead"
// flag). Linux rxe looks windows up by handle, and every other ATU
// entry point compares the whole key.
func TestRegressionDeallocMWStaleKey(t *testing.T) {
	u := newATU(t, 4, shapeNamed(t, "nic"))
	old := mustAllocMW(t, u, 1, KindMW2)
	if err := u.DeallocMW(old); err != nil {
		t.Fatal(err)
	}
	cur := mustAllocMW(t, u, 1, KindMW2)
	if cur>>8 != old>>8 {
		t.Fatalf("setup: the new window took index %d, not the freed %d", cur>>8, old>>8)
	}
	if err := u.DeallocMW(old); !errors.Is(err, ErrNoKey) {
		t.Errorf("DeallocMW(stale key %#x) = %v, want ErrNoKey", old, err)
	}
	if _, ok := u.Lookup(cur); !ok {
		t.Errorf("DeallocMW(stale key %#x) freed the live window %#x", old, cur)
	}
}

// TestBugBindMWType1StaleKey: BindMW compares the window's current key
// with Bind.MW only for type 2 windows; a type 1 window is bound through
// any key with the right index. Linux rxe (rxe_bind_mw) refuses a bind
// whose mw_rkey is not the window's current rkey, whatever the type.
func TestRegressionBindMWType1StaleKey(t *testing.T) {
	f := newMWFixture(t)
	k1 := nextVariant(f.w1)
	mustBind(t, f.u, Bind{MW: f.w1, NewKey: k1, MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead})
	stale := f.w1 // the key before the bind
	if got := f.u.BindMW(Bind{MW: stale, NewKey: nextVariant(k1), MR: f.mr, PD: 1, VA: fxVA, Length: 8, Access: RemoteRead}); got != FaultKey {
		t.Errorf("BindMW by type 1 window's stale key %#x (current %#x) = %v, want %v", stale, k1, got, FaultKey)
	}
}

// TestBugBindMWType1ZeroBased: a type 1 window cannot be zero-based
// (IBTA Vol 1 o10-36.2.2, as Linux rxe_check_bind_mw cites it: "attempt
// to bind a zero based type 1 MW"). BindMW accepts ZeroBased for both
// types.
func TestRegressionBindMWType1ZeroBased(t *testing.T) {
	f := newMWFixture(t)
	b := Bind{MW: f.w1, NewKey: nextVariant(f.w1), MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead | ZeroBased}
	if got := f.u.BindMW(b); got == OK {
		t.Errorf("BindMW(type 1, ZeroBased) = ok, want a bind error")
	}
}

// TestBugBindMWType2ZeroLength: a type 2 window cannot be bound with
// zero length (o10-37.2.40 as rxe cites it: "attempt to invalidate type 2
// MW by binding with NULL or zero length MR"); it is invalidated with
// LOCAL_INV or SEND with Invalidate instead. BindMW accepts it and leaves
// a valid zero-length window holding a reference on the region.
func TestRegressionBindMWType2ZeroLength(t *testing.T) {
	f := newMWFixture(t)
	b := Bind{MW: f.w2, NewKey: nextVariant(f.w2), MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 0, Access: RemoteRead}
	if got := f.u.BindMW(b); got == OK {
		t.Errorf("BindMW(type 2, length 0) = ok, want a bind error")
	}
}

// TestBugBindMWType1ZeroLengthUnbinds: binding a type 1 window with zero
// length is how it is invalidated (ibv_alloc_mw(3): "until invalidated
// by: ibv_bind_mw verb with zero length for type 1"; rxe drops the
// window's region reference when length is 0). BindMW instead binds an
// empty window that keeps a reference, so the region can never be
// deregistered until the window is freed.
func TestRegressionBindMWType1ZeroLengthUnbinds(t *testing.T) {
	f := newMWFixture(t)
	k1 := nextVariant(f.w1)
	mustBind(t, f.u, Bind{MW: f.w1, NewKey: k1, MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead})
	k2 := nextVariant(k1)
	if got := f.u.BindMW(Bind{MW: k1, NewKey: k2, MR: f.mr, PD: 1, VA: fxVA, Length: 0, Access: RemoteRead}); got != OK {
		t.Fatalf("zero-length type 1 bind = %v, want ok (it unbinds)", got)
	}
	if err := f.u.DeregMR(f.mr); err != nil {
		t.Errorf("DeregMR after the type 1 window was unbound by a zero-length bind = %v, want success", err)
	}
}

// TestBugInvalidateType1Local: LOCAL_INV applies to type 2 windows only;
// type 1 windows are invalidated by a zero-length bind (ibv_alloc_mw(3);
// o10-37.2.26 as rxe_check_invalidate_mw cites it, for local and remote
// invalidation alike). Invalidate refuses type 1 windows only when remote.
func TestRegressionInvalidateType1Local(t *testing.T) {
	f := newMWFixture(t)
	k1 := nextVariant(f.w1)
	mustBind(t, f.u, Bind{MW: f.w1, NewKey: k1, MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead})
	if got := f.u.Invalidate(k1, 1, 3, false); got != FaultKind {
		t.Errorf("local Invalidate of a type 1 window = %v, want %v", got, FaultKind)
	}
}

// TestBugAtomicThroughUnalignedZeroBasedWindow: the 8-byte alignment of an
// atomic (IBTA Vol 1 §9.4, atomic operations) is checked on the request's
// VA only. Through a zero-based window that VA is an offset, and the
// window may start at an unaligned address of its region, so an aligned
// offset can name 8 bytes that straddle a page boundary: Translate returns
// OK with two 4-byte segments. The responder (recvAtomic) passes segs[0] to
// dma.Cluster.Atomic, which panics on a segment that is not 8 bytes, so a
// peer's well-formed atomic crashes the NIC (DESIGN.md: bad input is data,
// not a crash). Translate should check the alignment of the region address
// (va + window VA), or BindMW refuse atomic rights on such a window.
func TestRegressionAtomicThroughUnalignedZeroBasedWindow(t *testing.T) {
	u := newATU(t, 4, shapeNamed(t, "nic"))
	mr := mustReg(t, u, MRSpec{PD: 1, Buf: make([]byte, 2*4096), IOVA: 0x1000, Access: LocalWrite | MWBind})
	w := mustAllocMW(t, u, 1, KindMW2)
	if f := u.BindMW(Bind{MW: w, NewKey: w, MR: mr, PD: 1, QPN: 3, VA: 0x1ffc, Length: 16, Access: RemoteAtomic | ZeroBased}); f != OK {
		return // refusing the bind is a fix too
	}
	segs, f := u.Translate(&Request{Key: w, PD: 1, QPN: 3, VA: 0, Len: 8, Access: RemoteAtomic, Remote: true}, nil)
	if f == OK && (len(segs) != 1 || segs[0].Len != 8) {
		t.Errorf("atomic at offset 0 of a zero-based window at region VA 0x1ffc: ok with %d segments, want one 8-byte segment or %v", len(segs), FaultAlign)
	}
}
