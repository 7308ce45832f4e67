package atu

import (
	"errors"
	"testing"
)

// TestDeregMRErrors checks the keys DeregMR must refuse with ErrNoKey
// (ibv_dereg_mr on something that is not a registered region) and that a
// refused call leaves the region registered.
func TestDeregMRErrors(t *testing.T) {
	u := newATU(t, 8, shapeNamed(t, "nic"))
	buf := make([]byte, 4096)
	mr := mustReg(t, u, MRSpec{PD: 1, Buf: buf, Access: MWBind})
	gone := mustReg(t, u, MRSpec{PD: 1, Buf: buf})
	if err := u.DeregMR(gone); err != nil {
		t.Fatal(err)
	}
	mw := mustAllocMW(t, u, 1, KindMW1)
	tests := []struct {
		name string
		key  uint32
	}{
		{"key 0", 0},
		{"index 0 with a variant", 0x12},
		{"index never used", 7 << 8},
		{"index past MaxMR", 100 << 8},
		{"wrong variant", mr ^ 1},
		{"already deregistered", gone},
		{"a window's key", mw},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := u.DeregMR(tt.key); !errors.Is(err, ErrNoKey) {
				t.Fatalf("DeregMR(%#x) = %v, want ErrNoKey", tt.key, err)
			}
			if _, f := u.Translate(&Request{Key: mr, PD: 1, Len: 1}, nil); f != OK {
				t.Fatalf("the region stopped translating (%v) after a refused DeregMR", f)
			}
			if _, ok := u.Lookup(mw); !ok {
				t.Fatal("the window disappeared after a refused DeregMR")
			}
		})
	}
	if err := u.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
	if err := u.DeregMR(mr); !errors.Is(err, ErrNoKey) {
		t.Fatalf("second DeregMR = %v, want ErrNoKey", err)
	}
}

// TestDeregMRBusy checks that a region cannot be deregistered while a
// window is bound to it (IBTA Vol 1 §10.6: deregistering a region with
// bound windows fails; ibv_dereg_mr returns EBUSY), for every way a
// window's binding ends: local and remote invalidation (type 2), rebinding
// elsewhere (type 1), freeing the window.
func TestDeregMRBusy(t *testing.T) {
	acc := LocalWrite | RemoteRead | MWBind
	tests := []struct {
		name   string
		kind   Kind
		unbind func(u *ATU, w, other uint32) error
	}{
		{"type 2, local invalidate", KindMW2, func(u *ATU, w, _ uint32) error {
			return faultErr(u.Invalidate(w, 1, 9, false))
		}},
		{"type 2, remote invalidate on its QP", KindMW2, func(u *ATU, w, _ uint32) error {
			return faultErr(u.Invalidate(w, 1, 9, true))
		}},
		{"type 2, dealloc", KindMW2, func(u *ATU, w, _ uint32) error { return u.DeallocMW(w) }},
		{"type 1, dealloc", KindMW1, func(u *ATU, w, _ uint32) error { return u.DeallocMW(w) }},
		{"type 1, rebind to another region", KindMW1, func(u *ATU, w, other uint32) error {
			return faultErr(u.BindMW(Bind{MW: w, NewKey: nextVariant(w), MR: other, PD: 1, VA: 0, Length: 10, Access: RemoteRead}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newATU(t, 8, shapeNamed(t, "nic"))
			mr := mustReg(t, u, MRSpec{PD: 1, Buf: make([]byte, 3*4096), IOVA: 0x5000, Access: acc})
			other := mustReg(t, u, MRSpec{PD: 1, Buf: make([]byte, 4096), Access: acc})
			w := mustAllocMW(t, u, 1, tt.kind)
			mustBind(t, u, Bind{MW: w, NewKey: w, MR: mr, PD: 1, QPN: 9, VA: 0x5000, Length: 100, Access: RemoteRead})
			// A second window on the same region: both must go.
			w2 := mustAllocMW(t, u, 1, KindMW2)
			mustBind(t, u, Bind{MW: w2, NewKey: w2, MR: mr, PD: 1, QPN: 9, VA: 0x6000, Length: 100, Access: RemoteRead})
			if err := u.DeregMR(mr); !errors.Is(err, ErrBusy) {
				t.Fatalf("DeregMR with two windows bound = %v, want ErrBusy", err)
			}
			if f := u.Invalidate(w2, 1, 9, false); f != OK {
				t.Fatalf("Invalidate(w2) = %v", f)
			}
			if err := u.DeregMR(mr); !errors.Is(err, ErrBusy) {
				t.Fatalf("DeregMR with one window bound = %v, want ErrBusy", err)
			}
			// The refused deregistration left the region and window working.
			if _, f := u.Translate(&Request{Key: w, PD: 1, QPN: 9, VA: 0x5000, Len: 100, Access: RemoteRead, Remote: true}, nil); f != OK {
				t.Fatalf("window after refused DeregMR: %v", f)
			}
			if _, f := u.Translate(&Request{Key: mr, PD: 1, VA: 0x5000, Len: 3 * 4096}, nil); f != OK {
				t.Fatalf("region after refused DeregMR: %v", f)
			}
			if err := tt.unbind(u, w, other); err != nil {
				t.Fatalf("unbind: %v", err)
			}
			if err := u.DeregMR(mr); err != nil {
				t.Fatalf("DeregMR after the windows were unbound: %v", err)
			}
			if st := u.Stats(); st.MRs != 1 {
				t.Fatalf("%d MRs left, want 1", st.MRs)
			}
		})
	}
}

// faultErr turns a fault into an error for the table above.
func faultErr(f Fault) error {
	if f != OK {
		return errors.New(f.String())
	}
	return nil
}

// TestDeregMRReusesMTT checks that deregistration returns a region's MTT
// entries, that a later region of the same size reuses them instead of
// growing the table, and that the table shrinks back to empty.
func TestDeregMRReusesMTT(t *testing.T) {
	u := newATU(t, 8, shapeNamed(t, "nic"))
	reg := func(pages int) uint32 { return mustReg(t, u, MRSpec{PD: 1, Buf: make([]byte, pages*4096)}) }
	check := func(used, top uint32) {
		t.Helper()
		if st := u.Stats(); st.MTTEntries != used {
			t.Fatalf("Stats().MTTEntries = %d, want %d", st.MTTEntries, used)
		}
		if u.mttAlloc.top != top || uint32(len(u.mtt)) != top {
			t.Fatalf("MTT high-water mark %d, host table %d entries; want %d", u.mttAlloc.top, len(u.mtt), top)
		}
	}
	a, b, c := reg(3), reg(2), reg(4)
	check(9, 9)
	if err := u.DeregMR(b); err != nil {
		t.Fatal(err)
	}
	check(7, 9)
	d := reg(2) // fits exactly where b was
	check(9, 9)
	if e, _ := u.Lookup(d); e.MTTBase != 3 {
		t.Fatalf("region d at MTT %d, want 3 (b's entries)", e.MTTBase)
	}
	if err := u.DeregMR(c); err != nil { // the top region: the table shrinks
		t.Fatal(err)
	}
	check(5, 5)
	if err := u.DeregMR(a); err != nil {
		t.Fatal(err)
	}
	check(2, 5)
	e := reg(1) // first fit: a's old entries
	if l, _ := u.Lookup(e); l.MTTBase != 0 {
		t.Fatalf("region e at MTT %d, want 0", l.MTTBase)
	}
	for _, k := range []uint32{d, e} {
		if err := u.DeregMR(k); err != nil {
			t.Fatal(err)
		}
	}
	check(0, 0)
	// The host table's freed entries are cleared: they name no host
	// memory the region had.
	for i, me := range u.mtt[:cap(u.mtt)] {
		if me != (MTTEntry{}) {
			t.Fatalf("freed MTT entry %d is %+v, want the zero entry", i, me)
		}
	}
}
