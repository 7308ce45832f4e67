package atu

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/hw/cache"
)

// Kind says what an MPT entry describes.
type Kind uint8

const (
	KindFree Kind = iota // unused index
	KindMR               // memory region
	KindMW1              // memory window, type 1 (bound with ibv_bind_mw)
	KindMW2              // memory window, type 2 (bound with a BIND_MW work request, tied to one QP)
)

func (k Kind) isMW() bool { return k == KindMW1 || k == KindMW2 }

// MPTEntry is one memory protection table entry, the on-chip copy of which
// the MPT cache holds.
type MPTEntry struct {
	Key       uint32 // index<<8 | variant
	Kind      Kind
	Valid     bool // MR: registered; MW: bound
	mapped    bool // MR: the ATU mapped its buffer (RegMR with Buf) and unmaps it
	PageShift uint8
	PD        uint32
	Access    Access
	VA        uint64 // first virtual address of the range
	Length    uint64
	MTTBase   uint32    // MR: MTT index of the page holding VA
	Implicit  bool      // MR: the whole of Space, no MTT entries (MRSpec.Implicit)
	Space     bus.Space // MR: the host memory behind it
	Parent    uint32    // MW: MPT index of the region it is bound to
	QPN       uint32    // MW type 2: the QP it is bound to
}

// MTTEntry is one memory translation table entry: a host page, or the part
// of it that belongs to the region, by bus address: Len bytes at Addr of
// the region's space, the first of which lies at page offset Start.
type MTTEntry struct {
	Addr  uint64
	Len   uint32
	Start uint32
}

// Seg is a run of host memory that backs part of a translated range: an
// extent on the DMA bus, which the DMA engines read and write.
type Seg = bus.Extent

// Config sizes the tables and their on-chip caches.
type Config struct {
	MaxMR       int // MPT entries for regions and windows together
	PageShift   uint8
	MPTCache    cache.Config
	MTTCache    cache.Config
	MaxMRLength uint64 // largest region, in bytes
	// Host is the DMA bus behind the regions. RegMR with a Buf maps the
	// buffer on it (it must be a bus.Mapper); nil: a bus.Local of its own.
	Host bus.Bus
	// UTLB puts a micro-TLB in front of the MPT and MTT caches (see
	// utlb). The wall-clock NIC has one; the timing model's profiles are
	// calibrated without it.
	UTLB bool
	// BestPageSize gives a region registered without a page size the
	// largest MTT page its length calls for (at most two entries, up to
	// 1 GiB) instead of PageShift, as mlx5 picks the best page size for
	// memory that is contiguous on the bus: a region's host memory is one
	// run of bus addresses here (a buffer of the program, or a range of
	// another process's address space). The wall-clock NIC does this; the
	// timing model keeps the profile's pages, whose MTT traffic it models.
	BestPageSize bool
}

// Control-path errors. They wrap into messages that name the object.
var (
	ErrNoResources = errors.New("atu: out of MPT entries")
	ErrInvalid     = errors.New("atu: invalid argument")
	ErrNoKey       = errors.New("atu: no such key")
	ErrBusy        = errors.New("atu: region still in use")
)

// Stats counts translations and their faults.
type Stats struct {
	Translations uint64
	Faults       [numFaults]uint64
	MPT, MTT     cache.Stats
	UTLBHits     uint64 // MPT and MTT entries the micro-TLB gave (the caches never saw those lookups)
	MRs, MWs     int
	MTTEntries   uint32
}

// ATU owns the MPT and MTT and translates through their caches. It is safe
// for concurrent use: the control path (register, deregister, bind) and the
// engines' data path share one lock, as they share one table on hardware.
type ATU struct {
	mu        sync.Mutex
	cfg       Config
	mpt       []MPTEntry // host-memory MPT; index 0 is never used (a zero key is never valid)
	variant   []uint8    // next key variant per index, so a stale key stops matching after reuse
	refs      []int32    // MR: windows bound to it
	freeIdx   []uint32
	mtt       []MTTEntry // host-memory MTT
	mttAlloc  extentAlloc
	mptCache  *cache.Cache[uint32, MPTEntry]
	mttCache  *cache.Cache[uint32, MTTEntry]
	nMR, nMW  int
	xlates    uint64
	faults    [numFaults]uint64
	xread     []Seg // Read's scratch
	loadMPTFn func(uint32) (MPTEntry, bool)
	loadMTTFn func(uint32) (MTTEntry, bool)
	utlb      utlb
	tables    atomic.Uint64 // Tables
}

// Tables counts the changes to the MPT and MTT: every registration,
// deregistration, bind and invalidation advances it. A translation made
// while it read n is still right while it reads n, which lets an engine
// keep one for the packets of a message (the wall-clock responder's
// WRITE target).
func (u *ATU) Tables() uint64 { return u.tables.Load() }

// utlb is the ATU's micro-TLB: a few direct-mapped slots in front of the
// MPT and MTT caches, each keeping an entry read through them, valid
// while the tables stay as they were (gen, which every change to an MPT
// or MTT entry advances). A hardware ATU keeps such a TLB per engine, for
// the packets that follow one another through the same region and pages:
// they find their entries without searching a cache set. Its hits are
// counted apart; what it misses goes to the caches, counted as before.
type utlb struct {
	gen  uint64 // 0: off
	hits uint64
	mpt  [16]utlbSlot[MPTEntry]
	mtt  [64]utlbSlot[MTTEntry]
}

type utlbSlot[V any] struct {
	gen uint64
	key uint32
	e   V
}

// viaUTLB reads entry key through slot s of the micro-TLB, then cache c
// (load reads the host table on a miss); hit is false when the entry came
// from host memory.
func viaUTLB[V any](t *utlb, s *utlbSlot[V], key uint32, c *cache.Cache[uint32, V], load func(uint32) (V, bool)) (e V, ok, hit bool) {
	if t.gen != 0 && s.gen == t.gen && s.key == key {
		t.hits++
		return s.e, true, true
	}
	e, ok, hit = c.Get(key, load)
	if ok && t.gen != 0 {
		*s = utlbSlot[V]{gen: t.gen, key: key, e: e}
	}
	return e, ok, hit
}

// changed marks the tables changed: every entry the micro-TLB holds is
// stale.
func (u *ATU) changed() {
	u.tables.Add(1)
	if u.utlb.gen != 0 {
		u.utlb.gen++
	}
}

// invalidateMPT drops an MPT entry that changed from the cache and the
// micro-TLB.
func (u *ATU) invalidateMPT(idx uint32) {
	u.mptCache.Invalidate(idx)
	u.changed()
}

// mptGet reads MPT entry idx through the micro-TLB and the MPT cache.
func (u *ATU) mptGet(idx uint32) (MPTEntry, bool, bool) {
	return viaUTLB(&u.utlb, &u.utlb.mpt[idx%uint32(len(u.utlb.mpt))], idx, u.mptCache, u.loadMPTFn)
}

// mttGet reads MTT entry i through the micro-TLB and the MTT cache.
func (u *ATU) mttGet(i uint32) (MTTEntry, bool, bool) {
	return viaUTLB(&u.utlb, &u.utlb.mtt[i%uint32(len(u.utlb.mtt))], i, u.mttCache, u.loadMTTFn)
}

// New builds an ATU.
func New(cfg Config) (*ATU, error) {
	if cfg.MaxMR <= 0 || cfg.MaxMR >= 1<<24 {
		return nil, fmt.Errorf("atu: MaxMR %d out of range [1, 2^24)", cfg.MaxMR)
	}
	if cfg.PageShift < 12 || cfg.PageShift > 30 {
		return nil, fmt.Errorf("atu: PageShift %d out of range [12, 30]", cfg.PageShift)
	}
	if cfg.MaxMRLength == 0 {
		cfg.MaxMRLength = 1 << 40
	}
	if cfg.Host == nil {
		cfg.Host = new(bus.Local)
	}
	mpc, err := cache.New[uint32, MPTEntry](cfg.MPTCache, hashU32)
	if err != nil {
		return nil, err
	}
	mtc, err := cache.New[uint32, MTTEntry](cfg.MTTCache, hashU32)
	if err != nil {
		return nil, err
	}
	u := &ATU{
		cfg:      cfg,
		mpt:      make([]MPTEntry, 1, 64),
		variant:  make([]uint8, 1, 64),
		refs:     make([]int32, 1, 64),
		mptCache: mpc,
		mttCache: mtc,
	}
	u.loadMPTFn = u.loadMPT
	u.loadMTTFn = u.loadMTT
	if cfg.UTLB {
		u.utlb.gen = 1
	}
	return u, nil
}

func hashU32(k uint32) uint64 { return uint64(k) }

// Host returns the DMA bus behind the regions.
func (u *ATU) Host() bus.Bus { return u.cfg.Host }

// PageShift returns the default page size of new regions as a shift.
func (u *ATU) PageShift() uint8 { return u.cfg.PageShift }

func (u *ATU) allocIndex() (uint32, bool) {
	if n := len(u.freeIdx); n > 0 {
		idx := u.freeIdx[n-1]
		u.freeIdx = u.freeIdx[:n-1]
		return idx, true
	}
	if len(u.mpt)-1 >= u.cfg.MaxMR {
		return 0, false
	}
	u.mpt = append(u.mpt, MPTEntry{})
	u.variant = append(u.variant, 0)
	u.refs = append(u.refs, 0)
	return uint32(len(u.mpt) - 1), true
}

func (u *ATU) freeIndex(idx uint32) {
	u.mpt[idx] = MPTEntry{}
	u.changed()
	u.refs[idx] = 0
	u.freeIdx = append(u.freeIdx, idx)
}

// nextKey returns a fresh key for idx: its variant moves on every use so
// that a key held by a peer after deregistration no longer matches.
func (u *ATU) nextKey(idx uint32) uint32 {
	v := u.variant[idx]
	u.variant[idx] = v + 1
	return idx<<8 | uint32(v)
}

// MRSpec describes a region to register.
type MRSpec struct {
	PD uint32
	// Buf is the program's own memory: RegMR maps it on the host bus
	// (Config.Host) and DeregMR unmaps it.
	Buf       []byte
	IOVA      uint64 // virtual address of the region's first byte as peers will name it
	Access    Access
	PageShift uint8 // 0: the ATU's default

	// With Buf nil, the region is Length bytes at bus address Addr of
	// Space: memory the bus already names (another process's). Space
	// bus.NoMemory registers a region without host memory behind it, for
	// the simulator's metadata-only mode (which never copies payload).
	Space  bus.Space
	Addr   uint64
	Length uint64

	// Implicit registers the whole of Space (implicit on-demand paging,
	// ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND)): every
	// address is its own IOVA, Length is ImplicitLength, and the region
	// takes no MTT entries — a hardware NIC builds its translation as
	// pages fault in; the pages of the space behind it (another
	// process's address space) are reached as they are at each DMA, so
	// Translate maps an address to itself. Addr and IOVA must be 0 and
	// Buf nil.
	Implicit bool
}

// ImplicitLength is an implicit region's length (SIZE_MAX).
const ImplicitLength = 1<<64 - 1

// RegMR registers Buf and returns its key (lkey == rkey, as on mlx5; the
// remote rights decide what a peer may do with it).
func (u *ATU) RegMR(s MRSpec) (uint32, error) {
	if err := checkMRAccess(s.Access); err != nil {
		return 0, err
	}
	if s.Implicit {
		return u.regImplicit(s)
	}
	n := uint64(len(s.Buf))
	if s.Buf == nil {
		n = s.Length
	} else if s.Length != 0 && s.Length != n {
		return 0, fmt.Errorf("%w: Length %d with a %d-byte buffer", ErrInvalid, s.Length, n)
	}
	shift, err := u.checkRange(&s, n)
	if err != nil {
		return 0, err
	}
	sp, addr, mapped := s.Space, s.Addr, false
	if s.Buf != nil {
		m, ok := u.cfg.Host.(bus.Mapper)
		if !ok {
			return 0, fmt.Errorf("%w: the host bus takes no buffers of this program", ErrInvalid)
		}
		if sp, err = m.Map(s.Buf); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrNoResources, err)
		}
		addr, mapped = 0, true
	}
	pages := buildPages(addr, n, s.IOVA, shift)

	u.mu.Lock()
	defer u.mu.Unlock()
	unmap := func() {
		if mapped {
			u.cfg.Host.(bus.Mapper).Unmap(sp)
		}
	}
	idx, ok := u.allocIndex()
	if !ok {
		unmap()
		return 0, fmt.Errorf("%w (%d regions and windows)", ErrNoResources, u.cfg.MaxMR)
	}
	base, ok := u.mttAlloc.alloc(uint32(len(pages)))
	if !ok {
		u.freeIndex(idx)
		unmap()
		return 0, fmt.Errorf("%w: MTT full", ErrNoResources)
	}
	if end := int(base) + len(pages); end > len(u.mtt) {
		u.mtt = append(u.mtt, make([]MTTEntry, end-len(u.mtt))...)
	}
	copy(u.mtt[base:], pages)
	key := u.nextKey(idx)
	u.mpt[idx] = MPTEntry{
		Key: key, Kind: KindMR, Valid: true, PageShift: shift,
		PD: s.PD, Access: s.Access, VA: s.IOVA, Length: n, MTTBase: base,
		Space: sp, mapped: mapped,
	}
	u.changed()
	u.nMR++
	return key, nil
}

// regImplicit registers an implicit region (MRSpec.Implicit).
func (u *ATU) regImplicit(s MRSpec) (uint32, error) {
	if s.Buf != nil || s.Addr != 0 || s.IOVA != 0 || s.Length != ImplicitLength || s.Access.Has(ZeroBased) {
		return 0, fmt.Errorf("%w: an implicit region is the whole space: address and IOVA 0, length %#x, not zero-based", ErrInvalid, uint64(ImplicitLength))
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	idx, ok := u.allocIndex()
	if !ok {
		return 0, fmt.Errorf("%w (%d regions and windows)", ErrNoResources, u.cfg.MaxMR)
	}
	key := u.nextKey(idx)
	u.mpt[idx] = MPTEntry{
		Key: key, Kind: KindMR, Valid: true, PageShift: u.cfg.PageShift, Implicit: true,
		PD: s.PD, Access: s.Access, Length: ImplicitLength, Space: s.Space,
	}
	u.changed()
	u.nMR++
	return key, nil
}

// buildPages cuts the n bytes at bus address addr into MTT entries along
// the page boundaries of their IOVA range.
func buildPages(addr, n, iova uint64, shift uint8) []MTTEntry {
	size := uint64(1) << shift
	first := iova >> shift
	last := (iova + n - 1) >> shift
	pages := make([]MTTEntry, last-first+1)
	off := uint64(0)
	for i := range pages {
		start := uint32(0)
		if i == 0 {
			start = uint32(iova & (size - 1))
		}
		k := min(size-uint64(start), n-off)
		pages[i] = MTTEntry{Addr: addr + off, Len: uint32(k), Start: start}
		off += k
	}
	return pages
}

// DeregMR removes a region. It fails while windows are bound to it.
func (u *ATU) DeregMR(key uint32) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	idx := key >> 8
	e, ok := u.entry(idx)
	if !ok || e.Kind != KindMR || e.Key != key {
		return fmt.Errorf("%w: %#x is not a registered region", ErrNoKey, key)
	}
	if u.refs[idx] > 0 {
		return fmt.Errorf("%w: region %#x has %d memory windows bound", ErrBusy, key, u.refs[idx])
	}
	u.releaseMTT(e)
	u.invalidateMPT(idx)
	if e.mapped {
		// The engine lock is held (control path): no DMA into the region
		// is in flight, and the caches hold no translation to it now.
		u.cfg.Host.(bus.Mapper).Unmap(e.Space)
	}
	u.freeIndex(idx)
	u.nMR--
	return nil
}

// ReregMR changes a registered region in place (ibv_rereg_mr, as mlx5
// modifies an mkey): the key stays, and the region's PD, rights, range
// and memory become s's (s.Space and s.Addr: memory the bus names; the
// caller unmaps the old space once this returns nil). It fails, leaving
// the region as it was, if windows are bound to it or s is invalid.
func (u *ATU) ReregMR(key uint32, s MRSpec) error {
	if s.Buf != nil {
		return fmt.Errorf("%w: ReregMR takes memory the bus names, not a buffer", ErrInvalid)
	}
	if err := checkMRAccess(s.Access); err != nil {
		return err
	}
	n := s.Length
	shift, err := u.checkRange(&s, n)
	if err != nil {
		return err
	}
	pages := buildPages(s.Addr, n, s.IOVA, shift)

	u.mu.Lock()
	defer u.mu.Unlock()
	idx := key >> 8
	e, ok := u.entry(idx)
	if !ok || e.Kind != KindMR || e.Key != key {
		return fmt.Errorf("%w: %#x is not a registered region", ErrNoKey, key)
	}
	if e.mapped {
		return fmt.Errorf("%w: region %#x is a buffer of this program", ErrInvalid, key)
	}
	if e.Implicit {
		return fmt.Errorf("%w: region %#x is implicit", ErrInvalid, key)
	}
	if u.refs[idx] > 0 {
		return fmt.Errorf("%w: region %#x has %d memory windows bound", ErrBusy, key, u.refs[idx])
	}
	// The new translation first, so that a full MTT leaves the old one.
	base, ok := u.mttAlloc.alloc(uint32(len(pages)))
	if !ok {
		return fmt.Errorf("%w: MTT full", ErrNoResources)
	}
	if end := int(base) + len(pages); end > len(u.mtt) {
		u.mtt = append(u.mtt, make([]MTTEntry, end-len(u.mtt))...)
	}
	copy(u.mtt[base:], pages)
	u.releaseMTT(e)
	*e = MPTEntry{
		Key: key, Kind: KindMR, Valid: true, PageShift: shift,
		PD: s.PD, Access: s.Access, VA: s.IOVA, Length: n, MTTBase: base, Space: s.Space,
	}
	u.invalidateMPT(idx)
	return nil
}

// checkMRAccess checks a region's rights: known bits, and local write
// under remote write or atomic (IBTA o10-36).
func checkMRAccess(a Access) error {
	if a&^validMR != 0 {
		return fmt.Errorf("%w: unknown access bits %#x", ErrInvalid, uint32(a&^validMR))
	}
	if a&needsLocal != 0 && !a.Has(LocalWrite) {
		return fmt.Errorf("%w: remote write or atomic access requires local write (%v)", ErrInvalid, a)
	}
	return nil
}

// releaseMTT frees region e's MTT entries (and their cached copies).
func (u *ATU) releaseMTT(e *MPTEntry) {
	if e.Implicit {
		return // it took none
	}
	pages := pageCount(e)
	for i := uint32(0); i < pages; i++ {
		u.mttCache.Invalidate(e.MTTBase + i)
		u.mtt[e.MTTBase+i] = MTTEntry{}
	}
	u.changed()
	u.mttAlloc.release(e.MTTBase, pages)
	u.mtt = u.mtt[:u.mttAlloc.top]
}

// checkRange checks a region's length n, IOVA range and page size, and
// returns the page shift; a zero-based region's IOVA becomes 0.
func (u *ATU) checkRange(s *MRSpec, n uint64) (uint8, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: zero-length region", ErrInvalid)
	}
	if n > u.cfg.MaxMRLength {
		return 0, fmt.Errorf("%w: region of %d bytes exceeds the maximum %d", ErrInvalid, n, u.cfg.MaxMRLength)
	}
	if s.Access.Has(ZeroBased) {
		s.IOVA = 0
	}
	if s.IOVA+n < s.IOVA {
		return 0, fmt.Errorf("%w: IOVA %#x + %d wraps", ErrInvalid, s.IOVA, n)
	}
	shift := s.PageShift
	if shift == 0 {
		shift = u.cfg.PageShift
		if u.cfg.BestPageSize {
			shift = max(shift, min(uint8(bits.Len64(n-1)), 30))
		}
	}
	if shift < 12 || shift > 30 {
		return 0, fmt.Errorf("%w: page shift %d out of range [12, 30]", ErrInvalid, shift)
	}
	return shift, nil
}

func pageCount(e *MPTEntry) uint32 {
	first := e.VA >> e.PageShift
	last := (e.VA + e.Length - 1) >> e.PageShift
	return uint32(last - first + 1)
}

func (u *ATU) entry(idx uint32) (*MPTEntry, bool) {
	if idx == 0 || int(idx) >= len(u.mpt) || u.mpt[idx].Kind == KindFree {
		return nil, false
	}
	return &u.mpt[idx], true
}

// Lookup returns a copy of the MPT entry of key, straight from the host
// table (control path and tests; the data path uses Translate).
func (u *ATU) Lookup(key uint32) (MPTEntry, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.entry(key >> 8)
	if !ok || e.Key != key {
		return MPTEntry{}, false
	}
	return *e, true
}

// AllocMW allocates an unbound memory window of type 1 or 2.
func (u *ATU) AllocMW(pd uint32, kind Kind) (uint32, error) {
	if !kind.isMW() {
		return 0, fmt.Errorf("%w: window kind %d", ErrInvalid, kind)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	idx, ok := u.allocIndex()
	if !ok {
		return 0, fmt.Errorf("%w (%d regions and windows)", ErrNoResources, u.cfg.MaxMR)
	}
	key := u.nextKey(idx)
	u.mpt[idx] = MPTEntry{Key: key, Kind: kind, PD: pd}
	u.changed()
	u.nMW++
	return key, nil
}

// CurrentKey returns the key of the window or region at key's index,
// whatever its variant, for a handle that outlived a rebinding.
func (u *ATU) CurrentKey(key uint32) (uint32, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.entry(key >> 8)
	if !ok {
		return 0, false
	}
	return e.Key, true
}

// DeallocMW frees a window, unbinding it first if needed.
func (u *ATU) DeallocMW(key uint32) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	idx := key >> 8
	e, ok := u.entry(idx)
	if !ok || !e.Kind.isMW() || e.Key != key {
		return fmt.Errorf("%w: %#x is not a memory window", ErrNoKey, key)
	}
	if e.Valid {
		u.refs[e.Parent]--
	}
	u.invalidateMPT(idx)
	u.freeIndex(idx)
	u.nMW--
	return nil
}

// Bind describes a window bind (ibv_bind_mw, or a BIND_MW work request).
type Bind struct {
	MW     uint32 // the window's current key
	NewKey uint32 // the key after binding (same index, consumer-chosen variant)
	MR     uint32 // lkey of the region to bind to
	PD     uint32 // the binding QP's protection domain
	QPN    uint32 // the binding QP (type 2 windows stay tied to it)
	VA     uint64
	Length uint64
	Access Access
}

// BindMW binds a window to a range of a region. The returned fault is
// OK on success; otherwise the bind work request completes with
// MW_BIND_ERR (or the fault's status).
func (u *ATU) BindMW(b Bind) Fault {
	u.mu.Lock()
	defer u.mu.Unlock()
	idx := b.MW >> 8
	w, ok := u.entry(idx)
	if !ok || !w.Kind.isMW() || b.NewKey>>8 != idx {
		return FaultKey
	}
	if w.Key != b.MW {
		return FaultKey // a stale key names an earlier binding
	}
	if w.Kind == KindMW2 && w.Valid {
		return FaultKey // type 2 binds only from the free state
	}
	if w.Kind == KindMW1 && b.Access.Has(ZeroBased) {
		return FaultAccess // o10-36.2.2: type 1 windows are not zero-based
	}
	if b.Length == 0 && w.Kind == KindMW2 {
		return FaultBounds // o10-37.2.40: a type 2 bind has a length
	}
	if w.PD != b.PD {
		return FaultPD
	}
	// Local write grants nothing through a window; Linux's drivers (rxe,
	// mlx5) take it in mw_access_flags and ignore it, and programs
	// written for them (rdma-core's tests) pass it: so does the ATU.
	b.Access &^= LocalWrite
	if b.Access&^validMW != 0 {
		return FaultAccess
	}
	mr, ok := u.entry(b.MR >> 8)
	if !ok || mr.Kind != KindMR || mr.Key != b.MR || !mr.Valid {
		return FaultKey
	}
	if mr.PD != b.PD {
		return FaultPD
	}
	if !mr.Access.Has(MWBind) {
		return FaultAccess
	}
	if b.Access&needsLocal != 0 && !mr.Access.Has(LocalWrite) {
		return FaultAccess
	}
	if !inRange(mr, b.VA, b.Length) {
		return FaultBounds
	}
	if b.Length == 0 {
		// A zero-length bind of a type 1 window unbinds it
		// (ibv_alloc_mw(3)).
		if w.Valid {
			u.refs[w.Parent]--
		}
		w.Valid = false
		w.Key = b.NewKey
		u.variant[idx] = uint8(b.NewKey) + 1
		u.invalidateMPT(idx)
		return OK
	}
	if w.Valid {
		u.refs[w.Parent]--
	}
	u.refs[b.MR>>8]++
	*w = MPTEntry{
		Key: b.NewKey, Kind: w.Kind, Valid: true, PD: w.PD, Access: b.Access,
		VA: b.VA, Length: b.Length, Parent: b.MR >> 8, QPN: b.QPN,
	}
	u.variant[idx] = uint8(b.NewKey) + 1
	u.invalidateMPT(idx)
	return OK
}

// Invalidate invalidates a type 2 window by its key: a LOCAL_INV work
// request (remote=false) or a SEND with Invalidate from the wire
// (remote=true, which must arrive on the QP the window is bound to).
func (u *ATU) Invalidate(key, pd, qpn uint32, remote bool) Fault {
	u.mu.Lock()
	defer u.mu.Unlock()
	idx := key >> 8
	w, ok := u.entry(idx)
	if !ok || w.Key != key || !w.Valid {
		return FaultKey
	}
	if !w.Kind.isMW() {
		// Regions registered through the verbs are not invalidatable
		// (only fast-registration regions are, which this NIC does not
		// offer).
		return FaultKind
	}
	if w.PD != pd {
		return FaultPD
	}
	if w.Kind == KindMW2 && remote && w.QPN != qpn {
		return FaultQP
	}
	if w.Kind == KindMW1 {
		// Type 1 windows are unbound by a zero-length bind, never by
		// LOCAL_INV or SEND with Invalidate (o10-37.2.26).
		return FaultKind
	}
	u.refs[w.Parent]--
	w.Valid = false
	u.invalidateMPT(idx)
	return OK
}

// UnbindQP invalidates every type 2 window bound through the QP with
// number qpn: the QP is being destroyed, and its number may be given to a
// new QP, through which the windows would otherwise grant access (a window
// of type 2 is checked against the number of the QP a request arrives on).
// It returns how many windows it invalidated.
func (u *ATU) UnbindQP(qpn uint32) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.nMW == 0 {
		return 0
	}
	n := 0
	for idx := range u.mpt {
		w := &u.mpt[idx]
		if w.Kind != KindMW2 || !w.Valid || w.QPN != qpn {
			continue
		}
		u.refs[w.Parent]--
		w.Valid = false
		u.invalidateMPT(uint32(idx))
		n++
	}
	return n
}

func inRange(e *MPTEntry, va, n uint64) bool {
	if va < e.VA {
		return false
	}
	off := va - e.VA
	return off <= e.Length && n <= e.Length-off
}

// Request is one translation: the rights wanted on [VA, VA+Len) of Key.
type Request struct {
	Key    uint32
	PD     uint32
	QPN    uint32 // the QP the access comes through (type 2 window check)
	VA     uint64
	Len    uint64
	Access Access // LocalRead (0), LocalWrite, RemoteRead, RemoteWrite or RemoteAtomic
	Remote bool   // Key is an rkey from the wire: windows are allowed
	// CheckOnly makes every check of the MPT entry (key, kind, PD, rights,
	// bounds, alignment) and translates nothing: what a NIC checks of a
	// whole message before its first packet. The MTT is not read, so the
	// cost does not grow with the length a packet claims.
	CheckOnly bool

	// Set by Translate: how many MPT and MTT entries had to be read from
	// host memory (cache misses). The timing model charges each one as a
	// PCIe read. MPTLookups and MTTLookups count every entry looked up
	// (hit or miss), for hit rates by who asked.
	MPTMisses, MTTMisses   uint16
	MPTLookups, MTTLookups uint16
	// MTTFirst is the first MTT entry the translation read (with
	// MTTLookups > 0): with the key's MPT index, what a timing model's
	// miss table merges later lookups of the same entries by.
	MTTFirst uint32
}

// loadMPT reads an entry from the host table on a cache miss. Free entries
// are not cached, so a later registration at that index needs no
// invalidation.
func (u *ATU) loadMPT(idx uint32) (MPTEntry, bool) {
	if int(idx) >= len(u.mpt) || u.mpt[idx].Kind == KindFree {
		return MPTEntry{}, false
	}
	return u.mpt[idx], true
}

func (u *ATU) loadMTT(i uint32) (MTTEntry, bool) {
	if int(i) >= len(u.mtt) {
		return MTTEntry{}, false
	}
	return u.mtt[i], true
}

// Translate checks r and appends to dst the host segments that back the
// range, in order. It allocates nothing once dst has capacity.
func (u *ATU) Translate(r *Request, dst []Seg) ([]Seg, Fault) {
	u.mu.Lock()
	dst, f := u.translate(r, dst)
	u.xlates++
	u.faults[f]++
	u.mu.Unlock()
	return dst, f
}

func (u *ATU) translate(r *Request, dst []Seg) ([]Seg, Fault) {
	r.MPTMisses, r.MTTMisses, r.MPTLookups, r.MTTLookups = 0, 0, 0, 0
	idx := r.Key >> 8
	if idx == 0 || idx > uint32(u.cfg.MaxMR) {
		return dst, FaultKey
	}
	e, ok, hit := u.mptGet(idx)
	r.MPTLookups++
	if !hit {
		r.MPTMisses++
	}
	if !ok || e.Kind == KindFree || !e.Valid || e.Key != r.Key {
		return dst, FaultKey
	}
	if e.Kind.isMW() && !r.Remote {
		return dst, FaultKind
	}
	if e.PD != r.PD {
		return dst, FaultPD
	}
	if !e.Access.Has(r.Access) {
		return dst, FaultAccess
	}
	if r.Access.Has(RemoteAtomic) && r.VA&7 != 0 {
		return dst, FaultAlign
	}
	va := r.VA
	if e.Kind.isMW() {
		if e.Kind == KindMW2 && e.QPN != r.QPN {
			return dst, FaultQP
		}
		if e.Access.Has(ZeroBased) {
			// A zero-based window names its range from 0.
			if r.Len > e.Length || va > e.Length-r.Len {
				return dst, FaultBounds
			}
			va += e.VA
		} else if !inRange(&e, va, r.Len) {
			return dst, FaultBounds
		}
		p, ok, hit := u.mptGet(e.Parent)
		r.MPTLookups++
		if !hit {
			r.MPTMisses++
		}
		if !ok || p.Kind != KindMR || !p.Valid {
			return dst, FaultKey
		}
		e = p
	}
	if !inRange(&e, va, r.Len) {
		return dst, FaultBounds
	}
	// Atomics need natural alignment of the address the NIC operates on
	// (for a window, the region address it maps to), so that the 8 bytes
	// lie in one page and one host access.
	if r.Access.Has(RemoteAtomic) && va&7 != 0 {
		return dst, FaultAlign
	}
	if r.CheckOnly {
		return dst, OK
	}
	return u.walk(&e, va, r.Len, dst, r), OK
}

// walk reads the MTT entries covering [va, va+n) of region e, counting
// its lookups and misses in r.
func (u *ATU) walk(e *MPTEntry, va, n uint64, dst []Seg, r *Request) []Seg {
	if e.Implicit {
		// Every address is its own: extents of the space, cut where a
		// Seg's length ends.
		for n > 0 {
			take := min(n, 1<<31)
			dst = append(dst, Seg{Addr: va, Space: e.Space, Len: uint32(take)})
			va += take
			n -= take
		}
		return dst
	}
	shift := e.PageShift
	mask := uint64(1)<<shift - 1
	i := e.MTTBase + uint32(va>>shift-e.VA>>shift)
	r.MTTFirst = i
	for n > 0 {
		pe, ok, hit := u.mttGet(i)
		r.MTTLookups++
		if !hit {
			r.MTTMisses++
		}
		if !ok {
			panic("atu: MTT entry missing inside a valid region")
		}
		off := uint32(va&mask) - pe.Start
		take := min(uint64(pe.Len-off), n)
		dst = append(dst, Seg{Addr: pe.Addr + uint64(off), Space: e.Space, Len: uint32(take)})
		va += take
		n -= take
		i++
	}
	return dst
}

// Stats returns the translation counters and cache statistics.
func (u *ATU) Stats() Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Stats{
		Translations: u.xlates,
		Faults:       u.faults,
		MPT:          u.mptCache.Stats(),
		MTT:          u.mttCache.Stats(),
		UTLBHits:     u.utlb.hits,
		MRs:          u.nMR,
		MWs:          u.nMW,
		MTTEntries:   u.mttAlloc.used(),
	}
}

// Log2 returns the shift for a power-of-two page size, or false.
func Log2(size int) (uint8, bool) {
	if size <= 0 || size&(size-1) != 0 {
		return 0, false
	}
	return uint8(bits.TrailingZeros(uint(size))), true
}

// Read copies len(dst) bytes at va of the region key into dst, as the host
// CPU would: through the host's tables, without touching the NIC's caches
// or counters. It serves inline sends, whose data the posting CPU copies
// into the WQE.
func (u *ATU) Read(pd, key uint32, va uint64, dst []byte) Fault {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.entry(key >> 8)
	if !ok || e.Kind != KindMR || !e.Valid || e.Key != key {
		return FaultKey
	}
	if e.PD != pd {
		return FaultPD
	}
	n := uint64(len(dst))
	if !inRange(e, va, n) {
		return FaultBounds
	}
	shift := e.PageShift
	mask := uint64(1)<<shift - 1
	i := e.MTTBase + uint32(va>>shift-e.VA>>shift)
	xs := u.xread[:0]
	for ; n > 0; i++ {
		pe := &u.mtt[i]
		po := uint32(va&mask) - pe.Start
		c := min(uint64(pe.Len-po), n)
		xs = append(xs, Seg{Addr: pe.Addr + uint64(po), Space: e.Space, Len: uint32(c)})
		va += c
		n -= c
	}
	u.xread = xs[:0]
	if _, err := u.cfg.Host.Gather(dst, xs); err != nil {
		return FaultHost
	}
	return OK
}
