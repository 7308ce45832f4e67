package atu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// populate fills u (and m) with regions in every PD, type 1 and type 2
// windows bound to some of them, windows left unbound, and stale keys: regions
// deregistered after their entries were cached, their indices reused by new
// regions, and windows rebound under new keys.
func populate(tb testing.TB, rng *rand.Rand, u *ATU, m *model) {
	tb.Helper()
	for i := range 14 {
		pd := 1 + uint32(i%numPD)
		s := randSpec(rng, pd)
		if i < numPD {
			// Every PD has a region to bind windows to.
			s.Access = s.Access&^ZeroBased | MWBind | LocalWrite
		}
		if _, err := register(tb, u, m, s); err != nil {
			tb.Fatal(err)
		}
	}
	var windows []uint32
	for i := range 10 {
		k, err := allocMW(tb, u, m, 1+uint32(i%numPD), KindMW1+Kind(i%2))
		if err != nil {
			tb.Fatal(err)
		}
		windows = append(windows, k)
	}
	// Bind all but the last two windows; rebind (type 1) or invalidate
	// and rebind (type 2) half of them, leaving stale window keys.
	for i, k := range windows[:len(windows)-2] {
		w := m.objs[k>>8]
		for try := 0; !w.bound && try < 50; try++ {
			mrs := m.regionsIn(w.pd)
			if b := randBind(rng, w, mrs[rng.IntN(len(mrs))]); !m.contested(b) {
				bind(tb, u, m, b)
			}
		}
		if !w.bound {
			tb.Fatalf("window %#x never bound", k)
		}
		if i%2 == 1 {
			if w.kind == KindMW2 {
				if f := u.Invalidate(w.key, w.pd, w.qpn, false); f != OK {
					tb.Fatalf("Invalidate(%#x) = %v", w.key, f)
				}
				w.bound = false
			}
			for try := 0; try < 50; try++ {
				mrs := m.regionsIn(w.pd)
				if b := randBind(rng, w, mrs[rng.IntN(len(mrs))]); !m.contested(b) && bind(tb, u, m, b) == OK {
					break
				}
			}
		}
	}
	// Cache everything, then deregister three regions without windows
	// and register two new ones, which take their indices.
	var segs []Seg
	for _, k := range m.liveKeys() {
		o := m.objs[k>>8]
		r := Request{Key: k, PD: o.pd, QPN: o.qpn, VA: o.iova, Len: uint64(len(o.buf)), Remote: o.kind != KindMR}
		if o.kind != KindMR {
			r.VA, r.Len, r.Access = o.va, o.length, RemoteRead
			if o.access.Has(ZeroBased) {
				r.VA = 0
			}
		}
		segs, _ = u.Translate(&r, segs[:0])
	}
	dropped := 0
	for _, k := range m.liveKeys() {
		if o := m.objs[k>>8]; dropped < 3 && o.kind == KindMR && m.refs(k>>8) == 0 {
			if err := u.DeregMR(k); err != nil {
				tb.Fatalf("DeregMR(%#x): %v", k, err)
			}
			delete(m.objs, k>>8)
			m.retire(k)
			dropped++
		}
	}
	for range 2 {
		if _, err := register(tb, u, m, randSpec(rng, 1+rng.Uint32N(numPD))); err != nil {
			tb.Fatal(err)
		}
	}
	m.checkStats(tb, u)
}

// TestTranslateDifferential compares Translate with the oracle on random
// requests against a population of regions (4 KiB and 2 MiB pages,
// unaligned IOVAs, zero-based regions, regions at the top of the address
// space), bound and unbound windows of both types and stale keys. Every
// check of IBTA Vol 1 §9.4 (R_Key: key, PD, bounds, rights, atomic
// alignment) and §10.6 (regions and windows, type 2 QP binding, lkeys
// naming regions only) is exercised; TestTranslateDifferential fails if
// some fault never occurs, so a generator that stops producing one is
// caught.
func TestTranslateDifferential(t *testing.T) {
	const requests = 20000
	for _, cs := range cacheShapes {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", cs.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0xa70))
				u := newATU(t, 64, cs)
				m := newModel(64)
				populate(t, rng, u, m)
				live := m.liveKeys()
				before := u.Stats()
				var got [FaultKind + 1]int
				sentinel := Seg{Addr: 0x5e47, Space: 0xdead, Len: 1}
				dst := make([]Seg, 0, 8)
				for i := range requests {
					r := randRequest(rng, m, live, m.stale)
					want := m.translate(&r)
					out, f := u.Translate(&r, append(dst[:0], sentinel))
					if f != want.f {
						o := m.objs[r.Key>>8]
						t.Fatalf("request %d %+v: fault %v, want %v (index holds %+v)", i, r, f, want.f, o)
					}
					got[f]++
					if len(out) == 0 || out[0] != sentinel {
						t.Fatalf("request %d %+v: Translate did not keep dst's first element", i, r)
					}
					if f != OK {
						if len(out) != 1 {
							t.Fatalf("request %d %+v: fault %v but %d segments appended", i, r, f, len(out)-1)
						}
						continue
					}
					checkSegs(t, u, &r, out[1:], want)
					if i%16 == 0 {
						writeThrough(t, u, out[1:], want.mr, want.off, rng)
					}
				}
				for f, n := range got {
					if n < requests/1000 {
						t.Errorf("%v occurred %d times in %d requests: the generator no longer exercises it", Fault(f), n, requests)
					}
				}
				st := u.Stats()
				if d := st.Translations - before.Translations; d != requests {
					t.Errorf("Stats().Translations grew by %d, want %d", d, requests)
				}
				for f, n := range got {
					if d := st.Faults[f] - before.Faults[f]; d != uint64(n) {
						t.Errorf("Stats().Faults[%v] grew by %d, want %d", Fault(f), d, n)
					}
				}
				t.Logf("faults: %v", got)
			})
		}
	}
}

// regions used by the table tests: one 4 KiB-page region at an unaligned
// IOVA and one 2 MiB-page region straddling a 2 MiB boundary.
const (
	tIOVA  = 0x10000123
	tLen   = 3*4096 + 100
	tIOVA2 = 5<<21 - 1000
	tLen2  = 3000
)

// TestTranslateFaults checks each fault on its own, in the table form the
// spec lists the checks (IBTA Vol 1 §9.4: R_Key, PD, bounds, rights,
// alignment; §10.6: windows).
func TestTranslateFaults(t *testing.T) {
	u := newATU(t, 16, shapeNamed(t, "nic"))
	all := LocalWrite | RemoteRead | RemoteWrite | RemoteAtomic | MWBind
	buf := pattern(tLen, 1)
	mr := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: tIOVA, Access: all})
	ro := mustReg(t, u, MRSpec{PD: 1, Buf: pattern(100, 2), IOVA: 0x1000, Access: RemoteRead})
	big := mustReg(t, u, MRSpec{PD: 2, Buf: pattern(tLen2, 3), IOVA: tIOVA2, Access: all, PageShift: 21})
	gone := mustReg(t, u, MRSpec{PD: 1, Buf: pattern(10, 4), IOVA: 0x2000, Access: all})
	if err := u.DeregMR(gone); err != nil {
		t.Fatal(err)
	}
	mw1old := mustAllocMW(t, u, 1, KindMW1)
	mw1 := nextVariant(mw1old)
	mustBind(t, u, Bind{MW: mw1old, NewKey: mw1, MR: mr, PD: 1, QPN: 7, VA: tIOVA + 10, Length: 5000, Access: RemoteRead | RemoteWrite})
	mw2 := mustAllocMW(t, u, 1, KindMW2)
	mw2n := nextVariant(mw2)
	mustBind(t, u, Bind{MW: mw2, NewKey: mw2n, MR: mr, PD: 1, QPN: 7, VA: (tIOVA + 4000) &^ 7, Length: 200, Access: RemoteAtomic | RemoteRead | ZeroBased})
	unbound := mustAllocMW(t, u, 1, KindMW2)

	tests := []struct {
		name string
		r    Request
		want Fault
	}{
		{"lkey local read", Request{Key: mr, PD: 1, VA: tIOVA, Len: tLen}, OK},
		{"lkey local write", Request{Key: mr, PD: 1, VA: tIOVA + 1, Len: 10, Access: LocalWrite}, OK},
		{"rkey remote write", Request{Key: mr, PD: 1, VA: tIOVA + 4096, Len: 4096, Access: RemoteWrite, Remote: true}, OK},
		{"zero length at the end", Request{Key: mr, PD: 1, VA: tIOVA + tLen, Len: 0}, OK},
		{"2 MiB page region across the boundary", Request{Key: big, PD: 2, VA: tIOVA2, Len: tLen2, Access: RemoteRead, Remote: true}, OK},

		{"key 0", Request{Key: 0, PD: 1, VA: tIOVA, Len: 1}, FaultKey},
		{"index 0 with a variant", Request{Key: 0x7f, PD: 1, VA: tIOVA, Len: 1}, FaultKey},
		{"index never used", Request{Key: 15 << 8, PD: 1, VA: tIOVA, Len: 1}, FaultKey},
		{"index past MaxMR", Request{Key: 17 << 8, PD: 1, VA: tIOVA, Len: 1}, FaultKey},
		{"index 2^24-1", Request{Key: 0xffffff00 | mr&0xff, PD: 1, VA: tIOVA, Len: 1}, FaultKey},
		{"wrong variant", Request{Key: mr ^ 0x80, PD: 1, VA: tIOVA, Len: 1}, FaultKey},
		{"deregistered", Request{Key: gone, PD: 1, VA: 0x2000, Len: 1}, FaultKey},
		{"unbound window", Request{Key: unbound, PD: 1, VA: 0, Len: 1, Access: RemoteRead, Remote: true}, FaultKey},
		{"window's key before its bind", Request{Key: mw2, PD: 1, VA: 0, Len: 1, Access: RemoteRead, Remote: true, QPN: 7}, FaultKey},

		{"window key as lkey", Request{Key: mw1, PD: 1, VA: tIOVA + 10, Len: 1}, FaultKind},
		{"type 2 window key as lkey", Request{Key: mw2n, PD: 1, QPN: 7, VA: 0, Len: 1, Access: RemoteRead}, FaultKind},

		{"PD mismatch", Request{Key: mr, PD: 2, VA: tIOVA, Len: 1}, FaultPD},
		{"PD mismatch on a window", Request{Key: mw1, PD: 2, VA: tIOVA + 10, Len: 1, Access: RemoteRead, Remote: true}, FaultPD},

		{"below the region", Request{Key: mr, PD: 1, VA: tIOVA - 1, Len: 2}, FaultBounds},
		{"one byte past the end", Request{Key: mr, PD: 1, VA: tIOVA + tLen - 10, Len: 11}, FaultBounds},
		{"starts at the end", Request{Key: mr, PD: 1, VA: tIOVA + tLen, Len: 1}, FaultBounds},
		{"zero length past the end", Request{Key: mr, PD: 1, VA: tIOVA + tLen + 1, Len: 0}, FaultBounds},
		{"length 2^64-1", Request{Key: mr, PD: 1, VA: tIOVA, Len: math.MaxUint64}, FaultBounds},
		{"va+len wraps to inside the region", Request{Key: mr, PD: 1, VA: tIOVA + 8, Len: math.MaxUint64 - 3}, FaultBounds},
		{"va+len ends at 2^64", Request{Key: mr, PD: 1, VA: tIOVA, Len: math.MaxUint64 - tIOVA + 1}, FaultBounds},
		{"va 2^64-1", Request{Key: mr, PD: 1, VA: math.MaxUint64, Len: 1}, FaultBounds},
		{"window range below", Request{Key: mw1, PD: 1, VA: tIOVA + 9, Len: 2, Access: RemoteRead, Remote: true}, FaultBounds},
		{"window range above", Request{Key: mw1, PD: 1, VA: tIOVA + 10 + 5000 - 1, Len: 2, Access: RemoteRead, Remote: true}, FaultBounds},
		{"zero-based window past its length", Request{Key: mw2n, PD: 1, QPN: 7, VA: 193, Len: 8, Access: RemoteRead, Remote: true}, FaultBounds},
		{"zero-based window named by its VA", Request{Key: mw2n, PD: 1, QPN: 7, VA: (tIOVA + 4000) &^ 7, Len: 8, Access: RemoteRead, Remote: true}, FaultBounds},
		{"zero-based window, length wraps", Request{Key: mw2n, PD: 1, QPN: 7, VA: 8, Len: math.MaxUint64 - 7, Access: RemoteRead, Remote: true}, FaultBounds},

		{"remote write on read-only region", Request{Key: ro, PD: 1, VA: 0x1000, Len: 1, Access: RemoteWrite, Remote: true}, FaultAccess},
		{"local write on read-only region", Request{Key: ro, PD: 1, VA: 0x1000, Len: 1, Access: LocalWrite}, FaultAccess},
		{"atomic on read-only region", Request{Key: ro, PD: 1, VA: 0x1000, Len: 8, Access: RemoteAtomic, Remote: true}, FaultAccess},
		{"atomic through a read/write window", Request{Key: mw1, PD: 1, VA: tIOVA + 16, Len: 8, Access: RemoteAtomic, Remote: true}, FaultAccess},
		{"write through a read/atomic window", Request{Key: mw2n, PD: 1, QPN: 7, VA: 0, Len: 8, Access: RemoteWrite, Remote: true}, FaultAccess},
		{"local write through a window", Request{Key: mw1, PD: 1, VA: tIOVA + 16, Len: 8, Access: LocalWrite, Remote: true}, FaultAccess},

		{"atomic at va%8 == 4", Request{Key: mr, PD: 1, VA: tIOVA + 1, Len: 8, Access: RemoteAtomic, Remote: true}, FaultAlign},
		{"atomic aligned", Request{Key: mr, PD: 1, VA: (tIOVA + 7) &^ 7, Len: 8, Access: RemoteAtomic, Remote: true}, OK},
		{"atomic misaligned through a window", Request{Key: mw2n, PD: 1, QPN: 7, VA: 4, Len: 8, Access: RemoteAtomic, Remote: true}, FaultAlign},
		{"atomic aligned through a zero-based window", Request{Key: mw2n, PD: 1, QPN: 7, VA: 8, Len: 8, Access: RemoteAtomic, Remote: true}, OK},

		{"type 2 window from another QP", Request{Key: mw2n, PD: 1, QPN: 8, VA: 0, Len: 8, Access: RemoteRead, Remote: true}, FaultQP},
		{"type 1 window from any QP", Request{Key: mw1, PD: 1, QPN: 12345, VA: tIOVA + 10, Len: 5000, Access: RemoteWrite, Remote: true}, OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs, f := u.Translate(&tt.r, nil)
			if f != tt.want {
				t.Fatalf("Translate(%+v) = %v, want %v", tt.r, f, tt.want)
			}
			if f != OK && len(segs) != 0 {
				t.Fatalf("fault %v with %d segments", f, len(segs))
			}
			var n uint64
			for _, s := range segs {
				n += uint64(s.Len)
			}
			if f == OK && n != tt.r.Len {
				t.Fatalf("segments cover %d bytes, want %d", n, tt.r.Len)
			}
		})
	}
}

// TestTranslateBytes checks, case by case, that the segments of a
// successful translation are exactly the registered bytes of the range, in
// order, one per page touched, for 4 KiB and 2 MiB pages, through windows
// and for zero-based regions (IBTA Vol 1 §10.6: a zero-based region's
// addresses are offsets from its start).
func TestTranslateBytes(t *testing.T) {
	u := newATU(t, 16, shapeNamed(t, "nic"))
	all := LocalWrite | RemoteRead | RemoteWrite | MWBind
	buf := pattern(tLen, 1)
	buf2 := pattern(tLen2, 2)
	buf3 := pattern(9000, 3)
	mr := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: tIOVA, Access: all})
	big := mustReg(t, u, MRSpec{PD: 1, Buf: buf2, IOVA: tIOVA2, Access: all, PageShift: 21})
	// IOVA is ignored for a zero-based region.
	zb := mustReg(t, u, MRSpec{PD: 1, Buf: buf3, IOVA: 0xdead0000, Access: all | ZeroBased})
	mw := mustAllocMW(t, u, 1, KindMW2)
	mustBind(t, u, Bind{MW: mw, NewKey: mw, MR: mr, PD: 1, QPN: 3, VA: tIOVA + 5000, Length: 4000, Access: RemoteRead | ZeroBased})
	mw1 := mustAllocMW(t, u, 1, KindMW1)
	mustBind(t, u, Bind{MW: mw1, NewKey: mw1, MR: big, PD: 1, VA: tIOVA2 + 900, Length: 200, Access: RemoteRead})

	tests := []struct {
		name    string
		r       Request
		want    []byte
		segLens []int
	}{
		{"first byte", Request{Key: mr, PD: 1, VA: tIOVA, Len: 1}, buf[:1], []int{1}},
		{"first partial page", Request{Key: mr, PD: 1, VA: tIOVA, Len: 4096 - 0x123}, buf[:4096-0x123], []int{4096 - 0x123}},
		{"across one boundary", Request{Key: mr, PD: 1, VA: tIOVA + 3700, Len: 200}, buf[3700:3900], []int{4096 - 0x123 - 3700, 3900 - (4096 - 0x123)}},
		{"whole region", Request{Key: mr, PD: 1, VA: tIOVA, Len: tLen}, buf, []int{4096 - 0x123, 4096, 4096, tLen - 3*4096 + 0x123}},
		{"2 MiB pages: whole region", Request{Key: big, PD: 1, VA: tIOVA2, Len: tLen2}, buf2, []int{1000, tLen2 - 1000}},
		{"2 MiB pages: inside the second page", Request{Key: big, PD: 1, VA: tIOVA2 + 1500, Len: 10}, buf2[1500:1510], []int{10}},
		{"zero-based region", Request{Key: zb, PD: 1, VA: 4090, Len: 10}, buf3[4090:4100], []int{6, 4}},
		{"zero-based window", Request{Key: mw, PD: 1, QPN: 3, VA: 0, Len: 4000, Remote: true, Access: RemoteRead}, buf[5000:9000], []int{2*4096 - 0x123 - 5000, 9000 - (2*4096 - 0x123)}},
		{"window over 2 MiB pages", Request{Key: mw1, PD: 1, VA: tIOVA2 + 900, Len: 200, Remote: true, Access: RemoteRead}, buf2[900:1100], []int{100, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs, f := u.Translate(&tt.r, nil)
			if f != OK {
				t.Fatalf("Translate(%+v) = %v", tt.r, f)
			}
			var lens []int
			at := 0
			for _, s := range segs {
				if at >= len(tt.want) || &segBytes(t, u, s)[0] != &tt.want[at] {
					t.Fatalf("segment at byte %d does not alias the registered buffer", at)
				}
				lens = append(lens, int(s.Len))
				at += int(s.Len)
			}
			if at != len(tt.want) || fmt.Sprint(lens) != fmt.Sprint(tt.segLens) {
				t.Fatalf("segment lengths %v (%d bytes), want %v (%d bytes)", lens, at, tt.segLens, len(tt.want))
			}
		})
	}
}

// TestTranslateTopOfAddressSpace registers regions whose last byte is at
// 2^64-2, the highest an end-exclusive range can reach, and checks lengths
// that overflow 64 bits there (IBTA Vol 1 §9.4: the whole range
// [VA, VA+len) must lie inside the region).
func TestTranslateTopOfAddressSpace(t *testing.T) {
	for _, shift := range []uint8{12, 21} {
		t.Run(fmt.Sprintf("shift%d", shift), func(t *testing.T) {
			u := newATU(t, 4, shapeNamed(t, "tiny"))
			const n = 5000
			iova := uint64(math.MaxUint64 - n) // [2^64-1-n, 2^64-1)
			buf := pattern(n, 9)
			k := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: iova, Access: LocalWrite, PageShift: shift})
			m := newModel(4)
			m.addObj(k, &mobj{kind: KindMR, pd: 1, buf: buf, iova: iova, shift: shift})
			for _, tc := range []struct{ va, n uint64 }{
				{iova, n}, {iova + n - 1, 1}, {iova + n, 0}, {iova + n - 1, 2}, {iova + n, 1},
				{iova, n + 1}, {iova + 1, math.MaxUint64}, {math.MaxUint64, 0}, {math.MaxUint64, 1},
				{iova, math.MaxUint64 - iova + 1}, {iova + 100, -(iova + 100)}, {iova + 100, -(iova + 100) - 1},
				{0, iova + 1}, {1, math.MaxUint64},
			} {
				r := Request{Key: k, PD: 1, VA: tc.va, Len: tc.n}
				want := m.translate(&r)
				segs, f := u.Translate(&r, nil)
				if f != want.f {
					t.Fatalf("[%#x, +%#x): %v, want %v", tc.va, tc.n, f, want.f)
				}
				if f == OK {
					checkSegs(t, u, &r, segs, want)
				}
			}
		})
	}
}

// TestTranslateDstCapacity checks that Translate appends into dst's backing
// array when it has room, and that a second call into the same dst[:0]
// returns only its own segments.
func TestTranslateDstCapacity(t *testing.T) {
	u := newATU(t, 4, shapeNamed(t, "nic"))
	buf := pattern(5*4096, 5)
	k := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: 0})
	dst := make([]Seg, 0, 8)
	segs, f := u.Translate(&Request{Key: k, PD: 1, VA: 100, Len: 4 * 4096}, dst)
	if f != OK || len(segs) != 5 {
		t.Fatalf("Translate = %d segments, %v; want 5, ok", len(segs), f)
	}
	if &segs[0] != &dst[:1][0] {
		t.Fatal("Translate reallocated a dst that had room")
	}
	segs, f = u.Translate(&Request{Key: k, PD: 1, VA: 4096, Len: 10}, segs[:0])
	if f != OK || len(segs) != 1 || segs[0].Len != 10 || &segBytes(t, u, segs[0])[0] != &buf[4096] {
		t.Fatalf("second Translate into the same dst = %d segments, %v", len(segs), f)
	}
}
