package atu

import (
	"testing"
)

// TestStaleKeyAfterReuse deregisters a region whose MPT and MTT entries are
// cached, registers a new region that takes the same MPT index and the same
// MTT entries, and checks that the old key faults (IBTA Vol 1 §10.6: after
// deregistration the key is invalid; §9.4: an invalid R_Key is a remote
// access error) and that the new key reaches only the new buffer. With the
// big caches a stale entry would still be resident if deregistration did
// not invalidate it; with the tiny ones every entry is evicted and refilled
// from the host tables.
func TestStaleKeyAfterReuse(t *testing.T) {
	for _, cs := range cacheShapes {
		t.Run(cs.name, func(t *testing.T) {
			u := newATU(t, 8, cs)
			const iova, n = 0x7000_0100, 3*4096 + 50
			oldBuf, newBuf := pattern(n, 1), pattern(n, 2)
			acc := LocalWrite | RemoteRead | RemoteWrite
			old := mustReg(t, u, MRSpec{PD: 1, Buf: oldBuf, IOVA: iova, Access: acc})
			full := func(key uint32) *Request {
				return &Request{Key: key, PD: 1, VA: iova, Len: n, Access: RemoteRead, Remote: true}
			}
			for range 2 { // the second pass hits wherever the cache holds the entries
				if _, f := u.Translate(full(old), nil); f != OK {
					t.Fatalf("Translate(old) = %v", f)
				}
			}
			if err := u.DeregMR(old); err != nil {
				t.Fatal(err)
			}
			if _, f := u.Translate(full(old), nil); f != FaultKey {
				t.Fatalf("Translate(deregistered key) = %v, want %v", f, FaultKey)
			}
			if f := u.Read(1, old, iova, make([]byte, 1)); f != FaultKey {
				t.Fatalf("Read(deregistered key) = %v, want %v", f, FaultKey)
			}
			// Freed entries are not cached, so a miss on the freed index
			// must not leave an entry the new region would hit either.
			if _, ok := u.mptCache.Peek(old >> 8); ok {
				t.Fatal("the MPT cache still holds the deregistered entry")
			}
			for i := range uint32(4) {
				if _, ok := u.mttCache.Peek(i); ok {
					t.Fatalf("the MTT cache still holds entry %d of the deregistered region", i)
				}
			}

			cur := mustReg(t, u, MRSpec{PD: 1, Buf: newBuf, IOVA: iova, Access: acc})
			if cur>>8 != old>>8 || cur == old {
				t.Fatalf("new key %#x: want index %d under a new variant (old %#x)", cur, old>>8, old)
			}
			if _, f := u.Translate(full(old), nil); f != FaultKey {
				t.Fatalf("Translate(stale key after its index was reused) = %v, want %v", f, FaultKey)
			}
			if err := u.DeregMR(old); err == nil {
				t.Fatal("DeregMR(stale key) deregistered the new region")
			}
			segs, f := u.Translate(full(cur), nil)
			if f != OK {
				t.Fatalf("Translate(new key) = %v", f)
			}
			at := 0
			for _, s := range segs {
				if at >= n {
					t.Fatalf("segments run past the region's %d bytes", n)
				}
				if b := segBytes(t, u, s); &b[0] != &newBuf[at] {
					t.Fatalf("segment at byte %d does not alias the new buffer (old buffer aliased: %v)", at, &b[0] == &oldBuf[at])
				}
				at += int(s.Len)
			}
			if at != n {
				t.Fatalf("segments cover %d bytes, want %d", at, n)
			}
		})
	}
}

// TestStaleMTTAfterShapeChange reuses the MTT entries of a deregistered
// region for a region with another page size and alignment, so the same MTT
// indices now map other page offsets; a stale cached MTT entry would put
// the new region's bytes at the wrong offsets or in the old buffer.
func TestStaleMTTAfterShapeChange(t *testing.T) {
	for _, cs := range cacheShapes {
		t.Run(cs.name, func(t *testing.T) {
			u := newATU(t, 8, cs)
			a := pattern(5*4096, 1)
			ka := mustReg(t, u, MRSpec{PD: 1, Buf: a, IOVA: 0x10_0000_0800})
			if _, f := u.Translate(&Request{Key: ka, PD: 1, VA: 0x10_0000_0800, Len: uint64(len(a))}, nil); f != OK {
				t.Fatal(f)
			}
			if err := u.DeregMR(ka); err != nil {
				t.Fatal(err)
			}
			// A small buffer starting 100 bytes before a 2 MiB boundary,
			// with 2 MiB pages: MTT entries 0 and 1, which held the old
			// region's first two 4 KiB pages; the next region takes 2..4.
			b := pattern(300, 2)
			const ivb = 7<<21 - 100
			kb := mustReg(t, u, MRSpec{PD: 1, Buf: b, IOVA: ivb, PageShift: 21})
			c := pattern(3*4096, 3)
			kc := mustReg(t, u, MRSpec{PD: 1, Buf: c, IOVA: 0x20_0000_0000})
			m := newModel(8)
			m.addObj(kb, &mobj{kind: KindMR, pd: 1, buf: b, iova: ivb, shift: 21})
			m.addObj(kc, &mobj{kind: KindMR, pd: 1, buf: c, iova: 0x20_0000_0000, shift: 12})
			for _, r := range []Request{
				{Key: kb, PD: 1, VA: ivb, Len: 300},
				{Key: kb, PD: 1, VA: ivb + 99, Len: 2},
				{Key: kc, PD: 1, VA: 0x20_0000_0000, Len: 3 * 4096},
				{Key: kc, PD: 1, VA: 0x20_0000_0ffe, Len: 4},
			} {
				want := m.translate(&r)
				segs, f := u.Translate(&r, nil)
				if f != OK || want.f != OK {
					t.Fatalf("Translate(%+v) = %v (oracle %v)", r, f, want.f)
				}
				checkSegs(t, u, &r, segs, want)
			}
		})
	}
}

// TestWindowRebindInvalidatesCache checks that a window's cached MPT entry
// is dropped when it is rebound, invalidated or freed: the old key must
// fault and the new binding must be the one used (IBTA Vol 1 §10.6: binding
// a window gives it a new R_Key and range; invalidation makes its R_Key
// invalid).
func TestWindowRebindInvalidatesCache(t *testing.T) {
	for _, cs := range cacheShapes {
		t.Run(cs.name, func(t *testing.T) {
			u := newATU(t, 8, cs)
			a, b := pattern(8192, 1), pattern(8192, 2)
			acc := LocalWrite | RemoteRead | RemoteWrite | MWBind
			ka := mustReg(t, u, MRSpec{PD: 1, Buf: a, IOVA: 0x1000, Access: acc})
			kb := mustReg(t, u, MRSpec{PD: 1, Buf: b, IOVA: 0x9000, Access: acc})
			rd := func(key uint32, va uint64) (Seg, Fault) {
				segs, f := u.Translate(&Request{Key: key, PD: 1, QPN: 5, VA: va, Len: 16, Access: RemoteRead, Remote: true}, nil)
				if f != OK {
					return Seg{}, f
				}
				return segs[0], f
			}

			// Type 1: rebind from region a to region b under a new key.
			w0 := mustAllocMW(t, u, 1, KindMW1)
			w1 := nextVariant(w0)
			mustBind(t, u, Bind{MW: w0, NewKey: w1, MR: ka, PD: 1, VA: 0x1000, Length: 8192, Access: RemoteRead})
			for range 2 {
				if s, f := rd(w1, 0x1100); f != OK || &segBytes(t, u, s)[0] != &a[0x100] {
					t.Fatalf("window over a: %v", f)
				}
			}
			w2 := nextVariant(w1)
			mustBind(t, u, Bind{MW: w1, NewKey: w2, MR: kb, PD: 1, VA: 0x9000, Length: 8192, Access: RemoteRead})
			if _, f := rd(w1, 0x1100); f != FaultKey {
				t.Fatalf("old key after rebind = %v, want %v", f, FaultKey)
			}
			if s, f := rd(w2, 0x9100); f != OK || &segBytes(t, u, s)[0] != &b[0x100] {
				t.Fatalf("window after rebind over b: %v", f)
			}
			if _, f := rd(w2, 0x1100); f != FaultBounds {
				t.Fatalf("rebound window at the old range = %v, want %v", f, FaultBounds)
			}
			// The reference moved with the binding.
			if err := u.DeregMR(ka); err != nil {
				t.Fatalf("DeregMR(a) after its window moved to b: %v", err)
			}

			// Type 2: invalidate, then the cached entry must not serve.
			v0 := mustAllocMW(t, u, 1, KindMW2)
			v1 := nextVariant(v0)
			mustBind(t, u, Bind{MW: v0, NewKey: v1, MR: kb, PD: 1, QPN: 5, VA: 0x9000, Length: 4096, Access: RemoteRead})
			for range 2 {
				if _, f := rd(v1, 0x9000); f != OK {
					t.Fatalf("type 2 window: %v", f)
				}
			}
			if f := u.Invalidate(v1, 1, 5, true); f != OK {
				t.Fatalf("remote Invalidate = %v", f)
			}
			if _, f := rd(v1, 0x9000); f != FaultKey {
				t.Fatalf("invalidated window = %v, want %v", f, FaultKey)
			}
			// Free the type 1 window while its entry is cached.
			if _, f := rd(w2, 0x9000); f != OK {
				t.Fatal(f)
			}
			if err := u.DeallocMW(w2); err != nil {
				t.Fatal(err)
			}
			if _, f := rd(w2, 0x9000); f != FaultKey {
				t.Fatalf("freed window = %v, want %v", f, FaultKey)
			}
			if err := u.DeregMR(kb); err != nil {
				t.Fatalf("DeregMR(b) with no window bound: %v", err)
			}
		})
	}
}
