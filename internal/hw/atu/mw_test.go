package atu

import (
	"errors"
	"math"
	"testing"
)

// TestAllocMW checks window allocation (ibv_alloc_mw): only types 1 and 2,
// created unbound in their PD.
func TestAllocMW(t *testing.T) {
	u := newATU(t, 8, shapeNamed(t, "nic"))
	for _, k := range []Kind{KindFree, KindMR, KindMW2 + 1, 255} {
		if key, err := u.AllocMW(1, k); !errors.Is(err, ErrInvalid) {
			t.Errorf("AllocMW(kind %d) = %#x, %v; want ErrInvalid", k, key, err)
		}
	}
	for i, k := range []Kind{KindMW1, KindMW2} {
		key := mustAllocMW(t, u, 3, k)
		e, ok := u.Lookup(key)
		if !ok || e.Kind != k || e.Valid || e.PD != 3 || e.Key != key {
			t.Errorf("Lookup(new window %#x) = %+v, %v", key, e, ok)
		}
		if st := u.Stats(); st.MWs != i+1 || st.MRs != 0 || st.MTTEntries != 0 {
			t.Errorf("Stats after %d windows: %+v", i+1, st)
		}
		// Unbound windows grant nothing (IBTA Vol 1 §10.6).
		if _, f := u.Translate(&Request{Key: key, PD: 3, VA: 0, Len: 0, Access: RemoteRead, Remote: true}, nil); f != FaultKey {
			t.Errorf("Translate through unbound window = %v, want %v", f, FaultKey)
		}
	}
}

// mwFixture is the setup of the bind tests: regions in PD 1 with and
// without the rights windows need, one in PD 2, and a window of each type
// in PD 1.
type mwFixture struct {
	u                       *ATU
	mr, noBind, ro, zb, pd2 uint32
	buf                     []byte
	w1, w2                  uint32
}

const (
	fxVA  = 0x4000_0010
	fxLen = 2*4096 + 8
)

func newMWFixture(t *testing.T) *mwFixture {
	f := &mwFixture{u: newATU(t, 16, shapeNamed(t, "nic")), buf: pattern(fxLen, 7)}
	f.mr = mustReg(t, f.u, MRSpec{PD: 1, Buf: f.buf, IOVA: fxVA, Access: LocalWrite | RemoteRead | MWBind})
	f.noBind = mustReg(t, f.u, MRSpec{PD: 1, Buf: make([]byte, 4096), IOVA: fxVA, Access: LocalWrite | RemoteRead | RemoteWrite})
	f.ro = mustReg(t, f.u, MRSpec{PD: 1, Buf: make([]byte, 4096), IOVA: fxVA, Access: RemoteRead | MWBind})
	f.zb = mustReg(t, f.u, MRSpec{PD: 1, Buf: make([]byte, 4096), Access: LocalWrite | MWBind | ZeroBased})
	f.pd2 = mustReg(t, f.u, MRSpec{PD: 2, Buf: make([]byte, 4096), IOVA: fxVA, Access: LocalWrite | MWBind})
	f.w1 = mustAllocMW(t, f.u, 1, KindMW1)
	f.w2 = mustAllocMW(t, f.u, 1, KindMW2)
	return f
}

// TestBindMW checks every refusal of BindMW, for both window types (IBTA
// Vol 1 §10.6, binding windows: the region must allow binding (C10-73 as
// rxe cites it), a window granting remote write or atomic needs a region
// with local write (C10-74), the range must lie in the region (C10-75), the
// QP, window and region share one PD, and a type 2 window is bound only
// from the free state by its current key). A refused bind must change
// nothing: the window stays as it was and the region takes no reference.
func TestBindMW(t *testing.T) {
	type bindCase struct {
		name string
		b    func(f *mwFixture, w uint32) Bind
		want Fault
		only Kind // 0: both types
	}
	ok := func(f *mwFixture, w uint32) Bind {
		return Bind{MW: w, NewKey: nextVariant(w), MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: fxLen, Access: RemoteRead}
	}
	with := func(edit func(f *mwFixture, b *Bind)) func(f *mwFixture, w uint32) Bind {
		return func(f *mwFixture, w uint32) Bind {
			b := ok(f, w)
			edit(f, &b)
			return b
		}
	}
	tests := []bindCase{
		{"whole region", ok, OK, 0},
		{"sub-range", with(func(f *mwFixture, b *Bind) { b.VA, b.Length = fxVA+4000, 200 }), OK, 0},
		// Type 1 windows are never zero-based (TestBugBindMWType1ZeroBased).
		{"zero-based window", with(func(f *mwFixture, b *Bind) { b.Access |= ZeroBased }), OK, KindMW2},
		{"remote read window over a region without local write", with(func(f *mwFixture, b *Bind) { b.MR, b.Length = f.ro, 4096 }), OK, 0},
		{"same key (variant not advanced)", with(func(f *mwFixture, b *Bind) { b.NewKey = b.MW }), OK, 0},

		{"region without MW_BIND", with(func(f *mwFixture, b *Bind) { b.MR, b.Length = f.noBind, 100 }), FaultAccess, 0},
		{"remote write over a region without local write", with(func(f *mwFixture, b *Bind) { b.MR, b.Length, b.Access = f.ro, 100, RemoteWrite }), FaultAccess, 0},
		{"remote atomic over a region without local write", with(func(f *mwFixture, b *Bind) { b.MR, b.Length, b.Access = f.ro, 8, RemoteAtomic }), FaultAccess, 0},
		{"local write is ignored, as Linux's drivers do", with(func(f *mwFixture, b *Bind) { b.Access |= LocalWrite }), OK, 0},
		{"MW_BIND is not a window right", with(func(f *mwFixture, b *Bind) { b.Access |= MWBind }), FaultAccess, 0},
		{"unknown right", with(func(f *mwFixture, b *Bind) { b.Access |= 1 << 20 }), FaultAccess, 0},

		{"starts below the region", with(func(f *mwFixture, b *Bind) { b.VA, b.Length = fxVA-1, 10 }), FaultBounds, 0},
		{"ends past the region", with(func(f *mwFixture, b *Bind) { b.Length = fxLen + 1 }), FaultBounds, 0},
		{"starts past the region", with(func(f *mwFixture, b *Bind) { b.VA, b.Length = fxVA+fxLen+1, 0 }), FaultBounds, 0},
		{"length wraps 2^64", with(func(f *mwFixture, b *Bind) { b.VA, b.Length = fxVA+8, math.MaxUint64-7 }), FaultBounds, 0},

		{"QP in another PD than the window", with(func(f *mwFixture, b *Bind) { b.PD = 2 }), FaultPD, 0},
		{"region in another PD", with(func(f *mwFixture, b *Bind) { b.MR = f.pd2 }), FaultPD, 0},

		{"new key on another index", with(func(f *mwFixture, b *Bind) { b.NewKey = b.MW + 1<<8 }), FaultKey, 0},
		{"window key unknown", with(func(f *mwFixture, b *Bind) { b.MW, b.NewKey = 15<<8, 15<<8|1 }), FaultKey, 0},
		{"window key 0", with(func(f *mwFixture, b *Bind) { b.MW, b.NewKey = 0, 1 }), FaultKey, 0},
		{"a region's key as the window", with(func(f *mwFixture, b *Bind) { b.MW, b.NewKey = f.noBind, nextVariant(f.noBind) }), FaultKey, 0},
		{"region key with a wrong variant", with(func(f *mwFixture, b *Bind) { b.MR ^= 0x40 }), FaultKey, 0},
		{"a window's key as the region", with(func(f *mwFixture, b *Bind) { b.MR = f.w2 }), FaultKey, 0},
	}
	for _, kind := range []Kind{KindMW1, KindMW2} {
		for _, tt := range tests {
			if tt.only != 0 && tt.only != kind {
				continue
			}
			t.Run(map[Kind]string{KindMW1: "type1/", KindMW2: "type2/"}[kind]+tt.name, func(t *testing.T) {
				f := newMWFixture(t)
				w := f.w1
				if kind == KindMW2 {
					w = f.w2
				}
				b := tt.b(f, w)
				before, _ := f.u.Lookup(w)
				if got := f.u.BindMW(b); got != tt.want {
					t.Fatalf("BindMW(%+v) = %v, want %v", b, got, tt.want)
				}
				if tt.want != OK {
					if after, ok := f.u.Lookup(w); !ok || after != before {
						t.Fatalf("refused bind changed the window from %+v to %+v", before, after)
					}
					for _, mr := range []uint32{f.mr, f.ro, f.zb, f.pd2} {
						if err := f.u.DeregMR(mr); err != nil {
							t.Fatalf("refused bind left a reference on region %#x: %v", mr, err)
						}
					}
					return
				}
				e, ok := f.u.Lookup(b.NewKey)
				if !ok || !e.Valid || e.Kind != kind || e.VA != b.VA || e.Length != b.Length || e.Access != b.Access&^LocalWrite || e.Parent != b.MR>>8 || e.PD != 1 {
					t.Fatalf("Lookup(new key %#x) = %+v, %v", b.NewKey, e, ok)
				}
				if b.NewKey != w {
					if _, ok := f.u.Lookup(w); ok {
						t.Fatal("the window still answers to its old key")
					}
				}
				if err := f.u.DeregMR(b.MR); !errors.Is(err, ErrBusy) {
					t.Fatalf("DeregMR of the bound region = %v, want ErrBusy", err)
				}
			})
		}
	}
}

// TestBindMWType2Twice checks that a bound type 2 window cannot be bound
// again until it is invalidated, and then only by its current key (IBTA
// Vol 1 §10.6: a type 2 window binds only from the free state; rxe cites
// o10-37.2.30), while a type 1 window may be rebound at any time.
func TestBindMWType2Twice(t *testing.T) {
	f := newMWFixture(t)
	k1 := nextVariant(f.w2)
	b := Bind{MW: f.w2, NewKey: k1, MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 64, Access: RemoteRead}
	mustBind(t, f.u, b)
	for _, again := range []Bind{
		{MW: k1, NewKey: nextVariant(k1), MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 64, Access: RemoteRead},
		{MW: k1, NewKey: k1, MR: f.mr, PD: 1, QPN: 4, VA: fxVA, Length: 64, Access: RemoteRead},
		{MW: f.w2, NewKey: nextVariant(k1), MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 64, Access: RemoteRead},
	} {
		if got := f.u.BindMW(again); got != FaultKey {
			t.Fatalf("BindMW of a bound type 2 window (%+v) = %v, want %v", again, got, FaultKey)
		}
	}
	if e, _ := f.u.Lookup(k1); e.QPN != 3 || !e.Valid {
		t.Fatalf("refused rebind changed the window: %+v", e)
	}
	if got := f.u.Invalidate(k1, 1, 3, false); got != OK {
		t.Fatalf("Invalidate = %v", got)
	}
	// Free again: the stale (pre-bind) key does not name it, the current one does.
	if got := f.u.BindMW(Bind{MW: f.w2, NewKey: nextVariant(k1), MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 64, Access: RemoteRead}); got != FaultKey {
		t.Fatalf("BindMW by the stale key = %v, want %v", got, FaultKey)
	}
	k2 := nextVariant(k1)
	mustBind(t, f.u, Bind{MW: k1, NewKey: k2, MR: f.mr, PD: 1, QPN: 4, VA: fxVA + 8, Length: 64, Access: RemoteRead})
	if _, got := f.u.Translate(&Request{Key: k2, PD: 1, QPN: 4, VA: fxVA + 8, Len: 64, Access: RemoteRead, Remote: true}, nil); got != OK {
		t.Fatalf("Translate through the rebound window = %v", got)
	}

	// Type 1: rebinding a bound window is how it moves.
	j1 := nextVariant(f.w1)
	mustBind(t, f.u, Bind{MW: f.w1, NewKey: j1, MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead})
	mustBind(t, f.u, Bind{MW: j1, NewKey: nextVariant(j1), MR: f.mr, PD: 1, VA: fxVA + 64, Length: 64, Access: RemoteRead})
}

// TestMWTranslate checks translation through windows: the window's range,
// rights and (type 2) QP apply, zero-based windows are addressed from 0,
// and the bytes are the region's (IBTA Vol 1 §10.6 windows; §9.4 R_Key
// checks).
func TestMWTranslate(t *testing.T) {
	f := newMWFixture(t)
	// A window's rights are those of its bind, not the region's remote
	// rights: f.mr grants no remote write, yet the type 2 window may, as
	// the region has local write (C10-74 as rxe cites it).
	k1 := nextVariant(f.w1)
	mustBind(t, f.u, Bind{MW: f.w1, NewKey: k1, MR: f.mr, PD: 1, VA: fxVA + 100, Length: 5000, Access: RemoteRead})
	k2 := nextVariant(f.w2)
	mustBind(t, f.u, Bind{MW: f.w2, NewKey: k2, MR: f.mr, PD: 1, QPN: 3, VA: fxVA + 4000, Length: 200, Access: RemoteRead | RemoteWrite | ZeroBased})
	rd := func(key, qpn uint32, va, n uint64) Request {
		return Request{Key: key, PD: 1, QPN: qpn, VA: va, Len: n, Access: RemoteRead, Remote: true}
	}
	tests := []struct {
		name string
		r    Request
		want Fault
		off  int // offset into the region's buffer on OK
	}{
		{"type 1 whole window", rd(k1, 0, fxVA+100, 5000), OK, 100},
		{"type 1 inside", rd(k1, 0, fxVA+4100, 10), OK, 4100},
		{"type 1 past its end", rd(k1, 0, fxVA+100+4999, 2), FaultBounds, 0},
		{"type 1 below its start", rd(k1, 0, fxVA+99, 2), FaultBounds, 0},
		{"type 1 from any QP", rd(k1, 77, fxVA+100, 1), OK, 100},
		{"write through a read window", Request{Key: k1, PD: 1, VA: fxVA + 100, Len: 1, Access: RemoteWrite, Remote: true}, FaultAccess, 0},
		{"zero-based type 2 from 0", Request{Key: k2, PD: 1, QPN: 3, VA: 0, Len: 200, Access: RemoteWrite, Remote: true}, OK, 4000},
		{"zero-based type 2 inside", rd(k2, 3, 100, 10), OK, 4100},
		{"zero-based type 2 at its end", rd(k2, 3, 199, 2), FaultBounds, 0},
		{"zero-based type 2 addressed by VA", rd(k2, 3, fxVA+4000, 1), FaultBounds, 0},
		{"zero-based type 2, length wraps", rd(k2, 3, 8, math.MaxUint64-7), FaultBounds, 0},
		{"type 2 from another QP", rd(k2, 4, 0, 200), FaultQP, 0},
		{"PD mismatch", Request{Key: k2, PD: 2, QPN: 3, VA: 0, Len: 1, Access: RemoteRead, Remote: true}, FaultPD, 0},
		{"window key as an lkey", Request{Key: k2, PD: 1, QPN: 3, VA: 0, Len: 1, Access: LocalWrite}, FaultKind, 0},
		{"pre-bind key", rd(f.w2, 3, 0, 1), FaultKey, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs, got := f.u.Translate(&tt.r, nil)
			if got != tt.want {
				t.Fatalf("Translate(%+v) = %v, want %v", tt.r, got, tt.want)
			}
			if got != OK {
				return
			}
			at := tt.off
			for _, s := range segs {
				if at >= len(f.buf) || &segBytes(t, f.u, s)[0] != &f.buf[at] {
					t.Fatalf("segment at region byte %d does not alias it", at)
				}
				at += int(s.Len)
			}
			if uint64(at-tt.off) != tt.r.Len {
				t.Fatalf("segments cover %d bytes, want %d", at-tt.off, tt.r.Len)
			}
		})
	}
}

// TestInvalidate checks LOCAL_INV and SEND with Invalidate (IBTA Vol 1
// §10.6: a type 2 window is invalidated locally or by the peer, the latter
// only on the QP it is bound to; type 1 windows are never invalidated
// remotely; regions registered through the verbs are not invalidatable).
func TestInvalidate(t *testing.T) {
	type setup struct {
		f      *mwFixture
		k1, k2 uint32 // bound windows: type 1, type 2 (QP 3)
		unb    uint32 // an unbound type 2 window
	}
	mk := func(t *testing.T) setup {
		f := newMWFixture(t)
		k1, k2 := nextVariant(f.w1), nextVariant(f.w2)
		mustBind(t, f.u, Bind{MW: f.w1, NewKey: k1, MR: f.mr, PD: 1, VA: fxVA, Length: 64, Access: RemoteRead})
		mustBind(t, f.u, Bind{MW: f.w2, NewKey: k2, MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 64, Access: RemoteRead})
		return setup{f: f, k1: k1, k2: k2, unb: mustAllocMW(t, f.u, 1, KindMW2)}
	}
	tests := []struct {
		name   string
		key    func(s setup) uint32
		pd     uint32
		qpn    uint32
		remote bool
		want   Fault
	}{
		{"type 2 local", func(s setup) uint32 { return s.k2 }, 1, 99, false, OK},
		{"type 2 remote on its QP", func(s setup) uint32 { return s.k2 }, 1, 3, true, OK},
		{"type 2 remote from another QP", func(s setup) uint32 { return s.k2 }, 1, 4, true, FaultQP},
		{"type 2 wrong PD", func(s setup) uint32 { return s.k2 }, 2, 3, true, FaultPD},
		{"type 2 pre-bind key", func(s setup) uint32 { return s.f.w2 }, 1, 3, false, FaultKey},
		{"type 2 wrong variant", func(s setup) uint32 { return s.k2 ^ 0x80 }, 1, 3, false, FaultKey},
		{"type 1 remote", func(s setup) uint32 { return s.k1 }, 1, 3, true, FaultKind},
		{"region key", func(s setup) uint32 { return s.f.mr }, 1, 3, false, FaultKind},
		{"region key remote", func(s setup) uint32 { return s.f.mr }, 1, 3, true, FaultKind},
		{"unbound window", func(s setup) uint32 { return s.unb }, 1, 3, false, FaultKey},
		{"key 0", func(s setup) uint32 { return 0 }, 1, 3, false, FaultKey},
		{"unused index", func(s setup) uint32 { return 15 << 8 }, 1, 3, true, FaultKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mk(t)
			key := tt.key(s)
			if got := s.f.u.Invalidate(key, tt.pd, tt.qpn, tt.remote); got != tt.want {
				t.Fatalf("Invalidate(%#x, pd %d, qp %d, remote %v) = %v, want %v", key, tt.pd, tt.qpn, tt.remote, got, tt.want)
			}
			// After a successful invalidation the key is dead, a second
			// invalidation fails, and the region can go.
			r := &Request{Key: s.k2, PD: 1, QPN: 3, VA: fxVA, Len: 8, Access: RemoteRead, Remote: true}
			_, xf := s.f.u.Translate(r, nil)
			if tt.want == OK {
				if xf != FaultKey {
					t.Fatalf("Translate through the invalidated window = %v, want %v", xf, FaultKey)
				}
				if got := s.f.u.Invalidate(key, tt.pd, tt.qpn, tt.remote); got != FaultKey {
					t.Fatalf("second Invalidate = %v, want %v", got, FaultKey)
				}
				if e, ok := s.f.u.Lookup(key); !ok || e.Valid {
					t.Fatalf("invalidated window: Lookup = %+v, %v; want present and not valid", e, ok)
				}
			} else if xf != OK {
				t.Fatalf("refused Invalidate broke the type 2 window: %v", xf)
			}
			if _, xf := s.f.u.Translate(&Request{Key: s.k1, PD: 1, VA: fxVA, Len: 8, Access: RemoteRead, Remote: true}, nil); xf != OK {
				t.Fatalf("type 1 window after Invalidate(%#x): %v", key, xf)
			}
		})
	}
}

// TestDeallocMW checks ibv_dealloc_mw: it unbinds a bound window (so the
// region can then be deregistered) and frees its index, and refuses keys
// that name no window.
func TestDeallocMW(t *testing.T) {
	for _, kind := range []Kind{KindMW1, KindMW2} {
		f := newMWFixture(t)
		w := f.w1
		if kind == KindMW2 {
			w = f.w2
		}
		k := nextVariant(w)
		mustBind(t, f.u, Bind{MW: w, NewKey: k, MR: f.mr, PD: 1, QPN: 3, VA: fxVA, Length: 64, Access: RemoteRead})
		if err := f.u.DeregMR(f.mr); !errors.Is(err, ErrBusy) {
			t.Fatalf("kind %d: DeregMR = %v, want ErrBusy", kind, err)
		}
		mws := f.u.Stats().MWs
		for _, bad := range []uint32{0, f.mr, 15 << 8} {
			if err := f.u.DeallocMW(bad); !errors.Is(err, ErrNoKey) {
				t.Fatalf("kind %d: DeallocMW(%#x) = %v, want ErrNoKey", kind, bad, err)
			}
		}
		if err := f.u.DeallocMW(k); err != nil {
			t.Fatalf("kind %d: DeallocMW(bound window) = %v", kind, err)
		}
		if st := f.u.Stats(); st.MWs != mws-1 {
			t.Fatalf("kind %d: %d windows after DeallocMW, want %d", kind, st.MWs, mws-1)
		}
		if _, got := f.u.Translate(&Request{Key: k, PD: 1, QPN: 3, VA: fxVA, Len: 8, Access: RemoteRead, Remote: true}, nil); got != FaultKey {
			t.Fatalf("kind %d: Translate through a freed window = %v", kind, got)
		}
		if err := f.u.DeallocMW(k); !errors.Is(err, ErrNoKey) {
			t.Fatalf("kind %d: second DeallocMW = %v, want ErrNoKey", kind, err)
		}
		if err := f.u.DeregMR(f.mr); err != nil {
			t.Fatalf("kind %d: DeregMR after DeallocMW of its window: %v", kind, err)
		}
		// The index is reused, under a key the freed window never had.
		n := mustAllocMW(t, f.u, 1, kind)
		if n == k || n == w {
			t.Fatalf("kind %d: new window reuses key %#x", kind, n)
		}
	}
}
