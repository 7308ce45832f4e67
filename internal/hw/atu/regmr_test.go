package atu

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/rnic/rnic/internal/hw/cache"
)

func TestNew(t *testing.T) {
	mpt := cache.Config{Name: "mpt", CapacityBytes: 64 * 64, EntryBytes: 64}
	mtt := cache.Config{Name: "mtt", CapacityBytes: 64 * 8, EntryBytes: 8}
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{MaxMR: 1, PageShift: 12, MPTCache: mpt, MTTCache: mtt}, true},
		{"largest MaxMR", Config{MaxMR: 1<<24 - 1, PageShift: 30, MPTCache: mpt, MTTCache: mtt}, true},
		{"caches off", Config{MaxMR: 4, PageShift: 16, MPTCache: cache.Config{Name: "mpt"}, MTTCache: cache.Config{Name: "mtt"}}, true},
		{"MaxMR 0", Config{MaxMR: 0, PageShift: 12, MPTCache: mpt, MTTCache: mtt}, false},
		{"MaxMR negative", Config{MaxMR: -1, PageShift: 12, MPTCache: mpt, MTTCache: mtt}, false},
		// Keys are index<<8 | variant in 32 bits: 2^24 indices, and
		// index 0 is never used.
		{"MaxMR 2^24", Config{MaxMR: 1 << 24, PageShift: 12, MPTCache: mpt, MTTCache: mtt}, false},
		{"PageShift 0", Config{MaxMR: 4, PageShift: 0, MPTCache: mpt, MTTCache: mtt}, false},
		{"PageShift 11", Config{MaxMR: 4, PageShift: 11, MPTCache: mpt, MTTCache: mtt}, false},
		{"PageShift 31", Config{MaxMR: 4, PageShift: 31, MPTCache: mpt, MTTCache: mtt}, false},
		{"bad MPT cache", Config{MaxMR: 4, PageShift: 12, MPTCache: cache.Config{CapacityBytes: 64, EntryBytes: 64}, MTTCache: mtt}, false},
		{"bad MTT cache", Config{MaxMR: 4, PageShift: 12, MPTCache: mpt, MTTCache: cache.Config{Name: "mtt", CapacityBytes: 4, EntryBytes: 8}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := New(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("New(%+v) = %v, want ok=%v", tt.cfg, err, tt.ok)
			}
			if err != nil {
				return
			}
			if u.PageShift() != tt.cfg.PageShift {
				t.Errorf("PageShift() = %d, want %d", u.PageShift(), tt.cfg.PageShift)
			}
			if st := u.Stats(); st.MRs != 0 || st.MWs != 0 || st.MTTEntries != 0 || st.Translations != 0 {
				t.Errorf("new ATU has Stats %+v", st)
			}
		})
	}
}

// TestRegMRValidation checks the registrations RegMR must refuse (IBTA
// Vol 1 §10.6: the rights a region may be given, o10-36 remote write and
// atomic need local write) and that a refused registration consumes
// nothing: no MPT index, no MTT entries.
func TestRegMRValidation(t *testing.T) {
	buf := make([]byte, 8192)
	tests := []struct {
		name string
		s    MRSpec
		want error // nil: accepted
	}{
		{"local read only", MRSpec{Buf: buf}, nil},
		{"nil buffer", MRSpec{Buf: nil}, ErrInvalid},
		{"empty buffer", MRSpec{Buf: buf[:0]}, ErrInvalid},
		{"unknown access bit 6", MRSpec{Buf: buf, Access: 1 << 6}, ErrInvalid},
		{"unknown access bit 31", MRSpec{Buf: buf, Access: LocalWrite | 1<<31}, ErrInvalid},
		{"remote write without local write", MRSpec{Buf: buf, Access: RemoteWrite}, ErrInvalid},
		{"remote atomic without local write", MRSpec{Buf: buf, Access: RemoteAtomic | RemoteRead}, ErrInvalid},
		{"remote write with local write", MRSpec{Buf: buf, Access: RemoteWrite | LocalWrite}, nil},
		{"remote atomic with local write", MRSpec{Buf: buf, Access: RemoteAtomic | LocalWrite}, nil},
		{"remote read without local write", MRSpec{Buf: buf, Access: RemoteRead}, nil},
		{"mw bind alone", MRSpec{Buf: buf, Access: MWBind}, nil},
		{"every right", MRSpec{Buf: buf, Access: LocalWrite | RemoteWrite | RemoteRead | RemoteAtomic | MWBind | ZeroBased}, nil},
		{"page shift 11", MRSpec{Buf: buf, PageShift: 11}, ErrInvalid},
		{"page shift 12", MRSpec{Buf: buf, PageShift: 12}, nil},
		{"page shift 30", MRSpec{Buf: buf, PageShift: 30}, nil},
		{"page shift 31", MRSpec{Buf: buf, PageShift: 31}, ErrInvalid},
		{"page shift 255", MRSpec{Buf: buf, PageShift: 255}, ErrInvalid},
		{"longer than MaxMRLength", MRSpec{Buf: make([]byte, 8193)}, ErrInvalid},
		{"exactly MaxMRLength", MRSpec{Buf: buf}, nil},
		{"IOVA 2^64-1, 1 byte: wraps", MRSpec{Buf: buf[:1], IOVA: math.MaxUint64}, ErrInvalid},
		{"IOVA wraps by one page", MRSpec{Buf: buf, IOVA: math.MaxUint64 - 4096}, ErrInvalid},
		// The ATU keeps ranges end-exclusive in 64 bits, so a region
		// cannot end exactly at 2^64 (as Linux's ib_umem_get refuses
		// addr+size overflowing).
		{"ends exactly at 2^64", MRSpec{Buf: buf, IOVA: -uint64(len(buf))}, ErrInvalid},
		{"ends one byte below 2^64", MRSpec{Buf: buf, IOVA: -uint64(len(buf)) - 1}, nil},
		{"zero-based ignores a wrapping IOVA", MRSpec{Buf: buf, IOVA: math.MaxUint64, Access: ZeroBased}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := New(Config{MaxMR: 4, PageShift: 12, MaxMRLength: 8192,
				MPTCache: cache.Config{Name: "mpt", CapacityBytes: 4 * 64, EntryBytes: 64},
				MTTCache: cache.Config{Name: "mtt", CapacityBytes: 64 * 8, EntryBytes: 8}})
			if err != nil {
				t.Fatal(err)
			}
			key, err := u.RegMR(tt.s)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("RegMR(%d bytes at %#x, %v, shift %d) = %#x, %v; want %v", len(tt.s.Buf), tt.s.IOVA, tt.s.Access, tt.s.PageShift, key, err, tt.want)
			}
			st := u.Stats()
			if err != nil {
				if key != 0 || st.MRs != 0 || st.MTTEntries != 0 {
					t.Fatalf("refused registration left key %#x, %d MRs, %d MTT entries", key, st.MRs, st.MTTEntries)
				}
				// Nothing was consumed: the next region gets index 1.
				if k := mustReg(t, u, MRSpec{Buf: buf}); k>>8 != 1 {
					t.Fatalf("next registration got index %d, want 1", k>>8)
				}
				return
			}
			if key>>8 != 1 || st.MRs != 1 {
				t.Fatalf("key %#x, %d MRs; want index 1, 1 MR", key, st.MRs)
			}
			e, ok := u.Lookup(key)
			if !ok || e.Kind != KindMR || !e.Valid || e.Length != uint64(len(tt.s.Buf)) || e.Access != tt.s.Access {
				t.Fatalf("Lookup(%#x) = %+v, %v", key, e, ok)
			}
			wantVA := tt.s.IOVA
			if tt.s.Access.Has(ZeroBased) {
				wantVA = 0 // IBTA Vol 1 §10.6: a zero-based region starts at VA 0
			}
			if e.VA != wantVA {
				t.Fatalf("Lookup(%#x).VA = %#x, want %#x", key, e.VA, wantVA)
			}
		})
	}
}

// TestRegMRPages checks how many MTT entries (pages) a region takes: one per
// page of its page size that its IOVA range touches, whatever the alignment.
func TestRegMRPages(t *testing.T) {
	tests := []struct {
		iova  uint64
		n     int
		shift uint8
		pages uint32
	}{
		{0, 1, 12, 1},
		{0, 4096, 12, 1},
		{1, 4096, 12, 2},
		{4095, 2, 12, 2},
		{0x123, 3*4096 + 100, 12, 4},
		{0x1000, 3 * 4096, 0, 1}, // the default shift, 16 here
		{0xffff, 2, 0, 2},
		{0xf000, 0x2000, 0, 2},
		{1<<21 - 1, 2, 21, 2},
		{1 << 21, 1 << 21, 21, 1},
		{5, 100, 30, 1},
		{math.MaxUint64 - 8191, 4096, 12, 1}, // the last whole page below 2^64-4096
		{math.MaxUint64 - 4096, 4096, 12, 2},
	}
	for _, tt := range tests {
		u, err := New(Config{MaxMR: 4, PageShift: 16, MPTCache: cache.Config{Name: "mpt"}, MTTCache: cache.Config{Name: "mtt"}})
		if err != nil {
			t.Fatal(err)
		}
		k := mustReg(t, u, MRSpec{PD: 1, Buf: make([]byte, tt.n), IOVA: tt.iova, PageShift: tt.shift})
		if got := u.Stats().MTTEntries; got != tt.pages {
			t.Errorf("%d bytes at %#x, shift %d: %d MTT entries, want %d", tt.n, tt.iova, tt.shift, got, tt.pages)
		}
		wantShift := tt.shift
		if wantShift == 0 {
			wantShift = 16
		}
		if e, _ := u.Lookup(k); e.PageShift != wantShift {
			t.Errorf("%d bytes at %#x, shift %d: region page shift %d, want %d", tt.n, tt.iova, tt.shift, e.PageShift, wantShift)
		}
	}
}

// TestRegMRExhaustion checks that regions and windows share MaxMR MPT
// entries, that running out is ErrNoResources and leaks nothing, and that
// a freed index is reused under a new key.
func TestRegMRExhaustion(t *testing.T) {
	u := newATU(t, 3, shapeNamed(t, "nic"))
	buf := make([]byte, 3*4096)
	k1 := mustReg(t, u, MRSpec{PD: 1, Buf: buf})
	mustReg(t, u, MRSpec{PD: 1, Buf: buf})
	mustAllocMW(t, u, 1, KindMW2)
	before := u.Stats()
	if k, err := u.RegMR(MRSpec{PD: 1, Buf: buf}); !errors.Is(err, ErrNoResources) {
		t.Fatalf("4th RegMR with MaxMR 3 = %#x, %v; want ErrNoResources", k, err)
	}
	if k, err := u.AllocMW(1, KindMW1); !errors.Is(err, ErrNoResources) {
		t.Fatalf("AllocMW with MaxMR 3 used = %#x, %v; want ErrNoResources", k, err)
	}
	if after := u.Stats(); after.MRs != before.MRs || after.MWs != before.MWs || after.MTTEntries != before.MTTEntries {
		t.Fatalf("failed allocations changed Stats from %+v to %+v", before, after)
	}
	if err := u.DeregMR(k1); err != nil {
		t.Fatal(err)
	}
	k4 := mustReg(t, u, MRSpec{PD: 1, Buf: buf})
	if k4>>8 != k1>>8 || k4 == k1 {
		t.Fatalf("registration after freeing key %#x got %#x: want its index under a new variant", k1, k4)
	}
	if _, err := u.RegMR(MRSpec{PD: 1, Buf: buf}); !errors.Is(err, ErrNoResources) {
		t.Fatalf("RegMR with the table full again = %v, want ErrNoResources", err)
	}
}

// TestRegMRMTTFull fills the MTT's index space (white box: the high-water
// mark is moved near 2^32) and checks that a registration that cannot get
// MTT entries fails with ErrNoResources and gives its MPT index back.
func TestRegMRMTTFull(t *testing.T) {
	u := newATU(t, 2, shapeNamed(t, "nic"))
	u.mttAlloc.top = math.MaxUint32 - 1
	if k, err := u.RegMR(MRSpec{PD: 1, Buf: make([]byte, 2*4096)}); !errors.Is(err, ErrNoResources) {
		t.Fatalf("RegMR with a full MTT = %#x, %v; want ErrNoResources", k, err)
	}
	u.mttAlloc.top = 0
	for i := range 2 { // both MPT entries are still free
		if _, err := u.RegMR(MRSpec{PD: 1, Buf: make([]byte, 4096)}); err != nil {
			t.Fatalf("RegMR %d after the MTT failure: %v", i, err)
		}
	}
}

// TestVariantCycle checks that a key stays invalid while its index is
// reused 255 times: the 8-bit variant takes every other value first
// (IBTA Vol 1 §10.6: the key's consumer-owned/variant part exists so a
// stale key does not match the index's next owner). After 256 reuses the
// variant, and so the key, comes round again: that is inherent in 8 bits.
func TestVariantCycle(t *testing.T) {
	u := newATU(t, 2, shapeNamed(t, "big"))
	buf := make([]byte, 100)
	seen := map[uint32]bool{}
	var first uint32
	for i := range 256 {
		k := mustReg(t, u, MRSpec{PD: 1, Buf: buf})
		if i == 0 {
			first = k
		}
		if k>>8 != first>>8 {
			t.Fatalf("registration %d got index %d, want the freed index %d", i, k>>8, first>>8)
		}
		if seen[k] {
			t.Fatalf("registration %d reused key %#x", i, k)
		}
		seen[k] = true
		if _, f := u.Translate(&Request{Key: first, PD: 1, Len: 1}, nil); (f == OK) != (k == first) {
			t.Fatalf("registration %d (key %#x): the first key %#x translates with %v", i, k, first, f)
		}
		if err := u.DeregMR(k); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLog2(t *testing.T) {
	tests := []struct {
		size  int
		shift uint8
		ok    bool
	}{
		{1, 0, true}, {2, 1, true}, {4096, 12, true}, {1 << 21, 21, true}, {1 << 30, 30, true},
		{0, 0, false}, {-4096, 0, false}, {3, 0, false}, {4097, 0, false}, {6 << 20, 0, false},
	}
	for _, tt := range tests {
		if s, ok := Log2(tt.size); s != tt.shift || ok != tt.ok {
			t.Errorf("Log2(%d) = %d, %v; want %d, %v", tt.size, s, ok, tt.shift, tt.ok)
		}
	}
}

func TestAccessString(t *testing.T) {
	tests := []struct {
		a    Access
		want string
	}{
		{0, "none"},
		{LocalWrite, "local_write"},
		{LocalWrite | RemoteRead | MWBind, "local_write|remote_read|mw_bind"},
		{RemoteWrite | RemoteAtomic | ZeroBased, "remote_write|remote_atomic|zero_based"},
		{1 << 6, "0x40"},
		{RemoteWrite | FlushGlobal | FlushPersistent, "remote_write|flush_global|flush_persistent"},
		{RemoteRead | 0xf000_0000, "remote_read|0xf0000000"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("Access(%#x).String() = %q, want %q", uint32(tt.a), got, tt.want)
		}
	}
	if !(LocalWrite | RemoteRead).Has(RemoteRead) || RemoteRead.Has(RemoteRead|LocalWrite) || !Access(0).Has(LocalRead) {
		t.Error("Has does not test for every wanted right")
	}
}

func TestFaultString(t *testing.T) {
	seen := map[string]bool{}
	for f := OK; f < numFaults; f++ {
		s := f.String()
		if s == "" || s == "fault?" || seen[s] {
			t.Errorf("Fault(%d).String() = %q: empty, unknown or not unique", f, s)
		}
		seen[s] = true
	}
	if s := Fault(numFaults).String(); s != "fault?" {
		t.Errorf("Fault(%d).String() = %q, want fault?", numFaults, s)
	}
}

// TestImplicitRegion: an implicit region (implicit on-demand paging) is
// the whole of its space: every address translates to itself, it takes
// no MTT entry, the usual protection checks apply, only the whole space
// may be registered so, and it cannot be re-registered.
func TestImplicitRegion(t *testing.T) {
	u := newATU(t, 8, shapeNamed(t, "tiny"))
	const sp = 7 // a space the ATU only passes on
	s := MRSpec{PD: 1, Space: sp, Length: ImplicitLength, Implicit: true, Access: LocalWrite | RemoteWrite}
	for _, bad := range []struct {
		name string
		edit func(*MRSpec)
	}{
		{"short", func(s *MRSpec) { s.Length = 1 << 40 }},
		{"offset", func(s *MRSpec) { s.Addr = 4096 }},
		{"IOVA", func(s *MRSpec) { s.IOVA = 4096 }},
		{"zero-based", func(s *MRSpec) { s.Access |= ZeroBased }},
		{"buffer", func(s *MRSpec) { s.Buf = make([]byte, 8) }},
	} {
		b := s
		bad.edit(&b)
		if _, err := u.RegMR(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s implicit region: %v, want ErrInvalid", bad.name, err)
		}
	}
	key := mustReg(t, u, s)
	if st := u.Stats(); st.MRs != 1 || st.MTTEntries != 0 {
		t.Errorf("after an implicit RegMR: %d regions, %d MTT entries; want 1, 0", st.MRs, st.MTTEntries)
	}
	for _, tc := range []struct {
		va, n uint64
		want  []Seg
		fault Fault
	}{
		{0x7f0012345678, 100, []Seg{{Space: sp, Addr: 0x7f0012345678, Len: 100}}, OK},
		{0, 1, []Seg{{Space: sp, Addr: 0, Len: 1}}, OK},
		{1<<64 - 2, 1, []Seg{{Space: sp, Addr: 1<<64 - 2, Len: 1}}, OK},
		{0x1000, 3 << 30, []Seg{{Space: sp, Addr: 0x1000, Len: 1 << 31}, {Space: sp, Addr: 0x1000 + 1<<31, Len: 1 << 30}}, OK},
		{1<<64 - 2, 2, nil, FaultBounds},
	} {
		r := Request{Key: key, PD: 1, VA: tc.va, Len: tc.n, Access: RemoteWrite, Remote: true}
		got, f := u.Translate(&r, nil)
		if f != tc.fault || !slices.Equal(got, tc.want) {
			t.Errorf("Translate %d bytes at %#x: %v %v, want %v %v", tc.n, tc.va, got, f, tc.want, tc.fault)
		}
		if r.MTTMisses != 0 {
			t.Errorf("Translate at %#x read %d MTT entries", tc.va, r.MTTMisses)
		}
	}
	// The region's rights and PD still hold.
	if _, f := u.Translate(&Request{Key: key, PD: 1, VA: 64, Len: 8, Access: RemoteRead, Remote: true}, nil); f != FaultAccess {
		t.Errorf("a READ through a write-only implicit region: %v, want FaultAccess", f)
	}
	if _, f := u.Translate(&Request{Key: key, PD: 2, VA: 64, Len: 8, Access: LocalWrite}, nil); f != FaultPD {
		t.Errorf("another PD's access: %v, want FaultPD", f)
	}
	if err := u.ReregMR(key, MRSpec{PD: 1, Space: sp, Length: 4096, Access: LocalWrite}); !errors.Is(err, ErrInvalid) {
		t.Errorf("ReregMR of an implicit region: %v, want ErrInvalid", err)
	}
	if err := u.DeregMR(key); err != nil {
		t.Fatal(err)
	}
	if st := u.Stats(); st.MRs != 0 || st.MTTEntries != 0 {
		t.Errorf("after DeregMR: %+v", st)
	}
}
