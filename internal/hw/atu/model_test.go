package atu

// The naive oracle the randomized tests compare the ATU against, and the
// helpers every test file shares.
//
// The oracle keeps the objects the consumer created (regions, windows) as
// plain records keyed by MPT index and answers every question by looking at
// them directly: no MTT, no caches, no variants to predict. Bounds are
// checked in 128-bit arithmetic, so its answers near 2^64 do not share the
// ATU's way of avoiding overflow.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/hw/cache"
)

// cacheShape is one geometry of the MPT and MTT caches.
type cacheShape struct {
	name     string
	mpt, mtt cache.Config
	utlb     bool // the micro-TLB in front of the caches
	best     bool // BestPageSize (TestBestPageSize: the oracle counts 4 KiB pages)
}

// cacheShapes are the geometries the table-walking tests run under:
//
//	tiny: one MPT entry and two direct-mapped MTT entries, so nearly every
//	      access misses and evicts and entries are constantly refilled from
//	      the host tables.
//	nic:  the NIC's default geometry (8-way, scanned sets).
//	big:  fully associative (indexed) and larger than anything the tests
//	      register, so every entry stays resident and a stale entry that was
//	      not invalidated would be hit.
//	off:  caches disabled: every access reads the host tables.
//	tiny+utlb, big+utlb: with the micro-TLB in front, which keeps entries
//	      the tiny caches evict, and which must drop every entry a change
//	      makes stale as the caches do.
var cacheShapes = []cacheShape{
	{"tiny",
		cache.Config{Name: "mpt", CapacityBytes: 64, EntryBytes: 64},
		cache.Config{Name: "mtt", CapacityBytes: 2 * 8, EntryBytes: 8, Ways: 1}, false, false},
	{"nic",
		cache.Config{Name: "mpt", CapacityBytes: 4096 * 64, EntryBytes: 64, Ways: 8},
		cache.Config{Name: "mtt", CapacityBytes: 65536 * 8, EntryBytes: 8, Ways: 8}, false, false},
	{"big",
		cache.Config{Name: "mpt", CapacityBytes: 1024 * 64, EntryBytes: 64},
		cache.Config{Name: "mtt", CapacityBytes: 8 << 16, EntryBytes: 8}, false, false},
	{"off", cache.Config{Name: "mpt"}, cache.Config{Name: "mtt"}, false, false},
	{"tiny+utlb",
		cache.Config{Name: "mpt", CapacityBytes: 64, EntryBytes: 64},
		cache.Config{Name: "mtt", CapacityBytes: 2 * 8, EntryBytes: 8, Ways: 1}, true, false},
	{"big+utlb",
		cache.Config{Name: "mpt", CapacityBytes: 1024 * 64, EntryBytes: 64},
		cache.Config{Name: "mtt", CapacityBytes: 8 << 16, EntryBytes: 8}, true, false},
}

func shapeNamed(tb testing.TB, name string) cacheShape {
	tb.Helper()
	for _, s := range cacheShapes {
		if s.name == name {
			return s
		}
	}
	tb.Fatalf("no cache shape %q", name)
	return cacheShape{}
}

// newATU builds an ATU with 4 KiB default pages.
func newATU(tb testing.TB, maxMR int, cs cacheShape) *ATU {
	tb.Helper()
	u, err := New(Config{MaxMR: maxMR, PageShift: 12, MPTCache: cs.mpt, MTTCache: cs.mtt, UTLB: cs.utlb, BestPageSize: cs.best})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return u
}

// mustReg registers s and fails the test on error.
func mustReg(tb testing.TB, u *ATU, s MRSpec) uint32 {
	tb.Helper()
	k, err := u.RegMR(s)
	if err != nil {
		tb.Fatalf("RegMR(pd %d, %d bytes at %#x, %v, shift %d): %v", s.PD, len(s.Buf), s.IOVA, s.Access, s.PageShift, err)
	}
	return k
}

// mustAllocMW allocates a window and fails the test on error.
func mustAllocMW(tb testing.TB, u *ATU, pd uint32, kind Kind) uint32 {
	tb.Helper()
	k, err := u.AllocMW(pd, kind)
	if err != nil {
		tb.Fatalf("AllocMW(pd %d, kind %d): %v", pd, kind, err)
	}
	return k
}

// mustBind binds and fails the test unless the bind succeeds.
func mustBind(tb testing.TB, u *ATU, b Bind) {
	tb.Helper()
	if f := u.BindMW(b); f != OK {
		tb.Fatalf("BindMW(%+v) = %v, want ok", b, f)
	}
}

// nextVariant returns key with its 8-bit variant advanced (ibv_inc_rkey).
func nextVariant(key uint32) uint32 { return key&^0xff | (key+1)&0xff }

// pattern returns n bytes that differ from position to position and from
// seed to seed, so a segment pointing at the wrong bytes shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i>>8) ^ seed
	}
	return b
}

// within reports whether [va, va+n) lies inside [base, base+length),
// computed on 65-bit sums so that nothing wraps.
func within(va, n, base, length uint64) bool {
	if va < base {
		return false
	}
	end, c1 := bits.Add64(va, n, 0)
	lim, c2 := bits.Add64(base, length, 0)
	if c1 != c2 {
		return c1 < c2
	}
	return end <= lim
}

// mobj is the oracle's record of one MPT object.
type mobj struct {
	key  uint32
	kind Kind
	pd   uint32
	// Regions.
	buf    []byte
	iova   uint64 // 0 for zero-based regions
	shift  uint8
	access Access // windows: the rights of the current binding
	// Windows.
	bound      bool
	parent     uint32 // MPT index of the region bound to
	va, length uint64 // bound range, in the region's address space
	qpn        uint32
}

func (o *mobj) pages() uint32 {
	n := uint64(len(o.buf))
	return uint32((o.iova+n-1)>>o.shift - o.iova>>o.shift + 1)
}

// model is the oracle.
type model struct {
	maxMR    int
	defShift uint8
	objs     map[uint32]*mobj  // by MPT index
	lastKey  map[uint32]uint32 // the last key handed out at each index
	stale    []uint32          // keys that were valid once, in retirement order
	retired  map[uint32]bool   // the set of stale
}

func newModel(maxMR int) *model {
	return &model{maxMR: maxMR, defShift: 12, objs: map[uint32]*mobj{}, lastKey: map[uint32]uint32{}, retired: map[uint32]bool{}}
}

// live returns the object that currently answers to key exactly.
func (m *model) live(key uint32) *mobj {
	o := m.objs[key>>8]
	if key>>8 == 0 || o == nil || o.key != key {
		return nil
	}
	return o
}

// refs counts the windows bound to the region at idx.
func (m *model) refs(idx uint32) int {
	n := 0
	for _, o := range m.objs {
		if o.kind != KindMR && o.bound && o.parent == idx {
			n++
		}
	}
	return n
}

// regErr is the error class RegMR must return for s (nil: success).
func (m *model) regErr(s MRSpec) error {
	shift := s.PageShift
	if shift == 0 {
		shift = m.defShift
	}
	iova := s.IOVA
	if s.Access.Has(ZeroBased) {
		iova = 0
	}
	switch {
	case s.Access&^(LocalWrite|RemoteWrite|RemoteRead|RemoteAtomic|MWBind|ZeroBased|FlushGlobal|FlushPersistent) != 0,
		// IBTA Vol 1 §10.6 (o10-36, as access.go cites it): remote
		// write and remote atomic rights require local write.
		s.Access&(RemoteWrite|RemoteAtomic) != 0 && !s.Access.Has(LocalWrite),
		len(s.Buf) == 0,
		!within(iova, uint64(len(s.Buf)), 0, math.MaxUint64),
		shift < 12 || shift > 30:
		return ErrInvalid
	case len(m.objs) >= m.maxMR:
		return ErrNoResources
	}
	return nil
}

// checkNewKey checks a key the ATU handed out for a new object.
func (m *model) checkNewKey(tb testing.TB, key uint32) {
	tb.Helper()
	idx := key >> 8
	if idx == 0 || int(idx) > m.maxMR {
		tb.Fatalf("new key %#x: index %d outside [1, %d]", key, idx, m.maxMR)
	}
	if o := m.objs[idx]; o != nil {
		tb.Fatalf("new key %#x: index %d still holds live key %#x", key, idx, o.key)
	}
	if last, ok := m.lastKey[idx]; ok && last == key {
		tb.Fatalf("new key %#x at reused index %d has the same variant as the previous key", key, idx)
	}
}

// retire records that key no longer names what it named.
func (m *model) retire(key uint32) {
	if !m.retired[key] {
		m.retired[key] = true
		m.stale = append(m.stale, key)
	}
}

func (m *model) addObj(key uint32, o *mobj) {
	if old, ok := m.lastKey[key>>8]; ok {
		m.retire(old)
	}
	o.key = key
	m.objs[key>>8] = o
	m.lastKey[key>>8] = key
}

// translation is the oracle's answer to a Request: the fault and, when it
// is OK, the region and the offset into its buffer the range starts at.
type translation struct {
	f   Fault
	mr  *mobj
	off uint64
}

// translate answers r. Where several checks fail, it reports the first in
// the order translate documents (key, kind, PD, access, alignment, QP,
// bounds). The order is an implementation choice: on the wire every R_Key
// violation is the same NAK (Remote Access Error, IBTA Vol 1 §9.4 and
// §9.7), and on an lkey the same local protection error completion.
func (m *model) translate(r *Request) translation {
	o := m.live(r.Key)
	if o == nil || (o.kind != KindMR && !o.bound) {
		return translation{f: FaultKey}
	}
	isMW := o.kind != KindMR
	if isMW && !r.Remote {
		// IBTA Vol 1 §10.6 (memory windows): a window's key is an
		// R_Key only; it never names local memory in an SGE.
		return translation{f: FaultKind}
	}
	if o.pd != r.PD {
		return translation{f: FaultPD}
	}
	if !o.access.Has(r.Access) {
		return translation{f: FaultAccess}
	}
	if r.Access.Has(RemoteAtomic) && r.VA%8 != 0 {
		// IBTA Vol 1 §9.4 (atomic operations): the VA of an atomic
		// must be 8-byte aligned.
		return translation{f: FaultAlign}
	}
	va := r.VA
	mr := o
	if isMW {
		if o.kind == KindMW2 && o.qpn != r.QPN {
			return translation{f: FaultQP}
		}
		base := o.va
		if o.access.Has(ZeroBased) {
			base = 0
		}
		if !within(va, r.Len, base, o.length) {
			return translation{f: FaultBounds}
		}
		va = va - base + o.va
		mr = m.objs[o.parent]
	}
	if !within(va, r.Len, mr.iova, uint64(len(mr.buf))) {
		return translation{f: FaultBounds}
	}
	return translation{f: OK, mr: mr, off: va - mr.iova}
}

// bindFault is the fault BindMW must return for b.
func (m *model) bindFault(b Bind) Fault {
	w := m.objs[b.MW>>8]
	if b.MW>>8 == 0 || w == nil || w.kind == KindMR || b.NewKey>>8 != b.MW>>8 {
		return FaultKey
	}
	// IBTA Vol 1 §10.6 (type 2 windows): a type 2 window is bound
	// only from the free (invalidated) state, by its current R_Key.
	// The ATU does not check a type 1 window's key variant
	// (TestBugBindMWType1StaleKey); the generators avoid that case.
	if w.kind == KindMW2 && (w.bound || w.key != b.MW) {
		return FaultKey
	}
	if w.pd != b.PD {
		return FaultPD
	}
	// Local write grants nothing through a window and is ignored, as
	// Linux's drivers ignore it.
	if b.Access&^(LocalWrite|RemoteWrite|RemoteRead|RemoteAtomic|ZeroBased) != 0 {
		return FaultAccess
	}
	mr := m.live(b.MR)
	if mr == nil || mr.kind != KindMR {
		return FaultKey
	}
	if mr.pd != b.PD {
		return FaultPD
	}
	// IBTA Vol 1 §10.6 (binding windows): the region must have
	// been registered with the right to bind windows; a window granting remote write or
	// atomic needs a region with local write.
	if !mr.access.Has(MWBind) ||
		b.Access&(RemoteWrite|RemoteAtomic) != 0 && !mr.access.Has(LocalWrite) {
		return FaultAccess
	}
	if !within(b.VA, b.Length, mr.iova, uint64(len(mr.buf))) {
		return FaultBounds
	}
	return OK
}

// bind applies a successful b.
func (m *model) bind(b Bind) {
	w := m.objs[b.MW>>8]
	if w.key != b.NewKey {
		m.retire(w.key)
	}
	w.key = b.NewKey
	m.lastKey[b.MW>>8] = b.NewKey
	w.bound, w.parent, w.va, w.length, w.access, w.qpn = true, b.MR>>8, b.VA, b.Length, b.Access&^LocalWrite, b.QPN
}

// invalidateFault is the fault Invalidate must return.
func (m *model) invalidateFault(key, pd, qpn uint32, remote bool) Fault {
	o := m.live(key)
	switch {
	case o == nil || (o.kind != KindMR && !o.bound):
		return FaultKey
	case o.kind == KindMR:
		return FaultKind // only windows (and fast-registered regions) are invalidated
	case o.pd != pd:
		return FaultPD
	case o.kind == KindMW2 && remote && o.qpn != qpn:
		// IBTA Vol 1 §10.6 (type 2 windows): a SEND with Invalidate
		// must arrive on the QP the type 2 window is bound to.
		return FaultQP
	case o.kind == KindMW1 && remote:
		return FaultKind // type 1 windows are never invalidated remotely
	}
	return OK
}

// readFault is the fault Read must return, and the bytes it must copy.
func (m *model) read(pd, key uint32, va uint64, n int) (Fault, []byte) {
	o := m.live(key)
	switch {
	case o == nil || o.kind != KindMR:
		return FaultKey, nil
	case o.pd != pd:
		return FaultPD, nil
	case !within(va, uint64(n), o.iova, uint64(len(o.buf))):
		return FaultBounds, nil
	}
	off := va - o.iova
	return OK, o.buf[off : off+uint64(n)]
}

// checkStats compares the ATU's object counts with the model's.
func (m *model) checkStats(tb testing.TB, u *ATU) {
	tb.Helper()
	var mrs, mws int
	var pages uint32
	for _, o := range m.objs {
		if o.kind == KindMR {
			mrs++
			pages += o.pages()
		} else {
			mws++
		}
	}
	st := u.Stats()
	if st.MRs != mrs || st.MWs != mws || st.MTTEntries != pages {
		tb.Fatalf("Stats: %d MRs, %d MWs, %d MTT entries; model: %d, %d, %d", st.MRs, st.MWs, st.MTTEntries, mrs, mws, pages)
	}
}

// hostBytes returns the host memory behind s: the bytes of u's host bus
// (a bus.Local) that the extent names.
func hostBytes(u *ATU, s Seg) ([]byte, error) {
	l, ok := u.Host().(*bus.Local)
	if !ok {
		return nil, fmt.Errorf("the ATU's host bus is a %T, not a *bus.Local", u.Host())
	}
	return l.Bytes(s)
}

// segBytes returns the host memory behind s and fails the test if the
// extent does not resolve (call it from the test's goroutine only).
func segBytes(tb testing.TB, u *ATU, s Seg) []byte {
	tb.Helper()
	b, err := hostBytes(u, s)
	if err != nil {
		tb.Fatalf("segment %+v does not resolve on the host bus: %v", s, err)
	}
	if len(b) != int(s.Len) {
		tb.Fatalf("segment %+v resolves to %d bytes", s, len(b))
	}
	return b
}

// startsAt reports whether s resolves to host memory whose first byte is
// *p. It does not fail the test, so other goroutines can use it, and so
// can checks on segments that may rightly not resolve.
func startsAt(u *ATU, s Seg, p *byte) bool {
	b, err := hostBytes(u, s)
	return err == nil && len(b) > 0 && &b[0] == p
}

// checkSegs checks that segs is exactly the translation of want: the
// segments alias, in order and without gaps, the n bytes of the region's
// buffer at want.off (resolved on u's host bus); each lies within one page
// of the region's page size; each resolves to capped bytes, so appending
// to one cannot reach past it; and there is one segment per page the range
// touches.
func checkSegs(tb testing.TB, u *ATU, r *Request, segs []Seg, want translation) {
	tb.Helper()
	mr := want.mr
	off := want.off
	for i, s := range segs {
		if s.Len == 0 {
			tb.Fatalf("%+v: segment %d is empty", *r, i)
		}
		if off+uint64(s.Len) > uint64(len(mr.buf)) {
			tb.Fatalf("%+v: segments run past the region's %d bytes", *r, len(mr.buf))
		}
		b := segBytes(tb, u, s)
		if cap(b) != len(b) {
			tb.Fatalf("%+v: segment %d has len %d but cap %d: an append would reach past the page", *r, i, len(b), cap(b))
		}
		if &b[0] != &mr.buf[off] {
			tb.Fatalf("%+v: segment %d does not alias region byte %d", *r, i, off)
		}
		first := mr.iova + off
		last := first + uint64(s.Len) - 1
		if first>>mr.shift != last>>mr.shift {
			tb.Fatalf("%+v: segment %d [%#x, %#x] crosses a %d-byte page boundary", *r, i, first, last, uint64(1)<<mr.shift)
		}
		off += uint64(s.Len)
	}
	if got := off - want.off; got != r.Len {
		tb.Fatalf("%+v: segments cover %d bytes, want %d", *r, got, r.Len)
	}
	wantSegs := 0
	if r.Len > 0 {
		first := mr.iova + want.off
		wantSegs = int((first+r.Len-1)>>mr.shift - first>>mr.shift + 1)
	}
	if len(segs) != wantSegs {
		tb.Fatalf("%+v: %d segments, want %d (one per page)", *r, len(segs), wantSegs)
	}
}

// writeThrough writes fresh bytes through segs (the host memory they
// resolve to on u's bus) and checks that exactly the region bytes
// [off, off+n) changed.
func writeThrough(tb testing.TB, u *ATU, segs []Seg, mr *mobj, off uint64, rng *rand.Rand) {
	tb.Helper()
	before := append([]byte(nil), mr.buf...)
	var written []byte
	for _, s := range segs {
		b := segBytes(tb, u, s)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		written = append(written, b...)
	}
	end := off + uint64(len(written))
	for i := range mr.buf {
		want := before[i]
		if uint64(i) >= off && uint64(i) < end {
			want = written[uint64(i)-off]
		}
		if mr.buf[i] != want {
			tb.Fatalf("region byte %d = %#x after writing through the segments of [%d, %d), want %#x", i, mr.buf[i], off, end, want)
		}
	}
}

// errClass returns which control-path sentinel err wraps.
func errClass(err error) error {
	for _, e := range []error{ErrNoResources, ErrInvalid, ErrNoKey, ErrBusy} {
		if errors.Is(err, e) {
			return e
		}
	}
	return err
}
