package atu

// Tests of behaviour the ATU gets wrong today. Each is skipped with a
// "BUG:" message naming the defect (see knownBug); ATU_BUGS=1 runs them.

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
func TestBugDeallocMWStaleKey(t *testing.T) {
	knownBug(t, "DeallocMW ignores the key variant: a stale key frees the window that reused its index")
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
func TestBugBindMWType1StaleKey(t *testing.T) {
	knownBug(t, "BindMW does not check Bind.MW's variant for type 1 windows")
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
func TestBugBindMWType1ZeroBased(t *testing.T) {
	knownBug(t, "BindMW accepts a zero-based type 1 window (o10-36.2.2)")
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
func TestBugBindMWType2ZeroLength(t *testing.T) {
	knownBug(t, "BindMW accepts a zero-length type 2 bind (o10-37.2.40)")
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
func TestBugBindMWType1ZeroLengthUnbinds(t *testing.T) {
	knownBug(t, "a zero-length type 1 bind does not unbind: the region stays ErrBusy")
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
func TestBugInvalidateType1Local(t *testing.T) {
	knownBug(t, "Invalidate (LOCAL_INV) accepts a type 1 window (o10-37.2.26)")
	f := newMWFixture(t)
	k1 := nextVariant(f.w1)
	mustBind(t, f.u, Bind{MW: f.w1, NewKey: k1, MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead})
	if got := f.u.Invalidate(k1, 1, 3, false); got != FaultKind {
		t.Errorf("local Invalidate of a type 1 window = %v, want %v", got, FaultKind)
	}
}
