package atu

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/rnic/rnic/internal/hw/bus"
)

// TestRegMRMapsBuffer checks that a region registered with a buffer is a
// space of its own on the host bus, whose bus address 0 is the buffer's
// first byte: its translation names that space at the buffer offsets, and
// the extents resolve to the buffer itself. DeregMR unmaps the space, so
// an extent translated before no longer reaches the buffer.
func TestRegMRMapsBuffer(t *testing.T) {
	u := newATU(t, 4, shapeNamed(t, "nic"))
	local := u.Host().(*bus.Local)
	const iova, n = 0x1000_0800, 3*4096 + 100
	buf := pattern(n, 1)
	// Space and Addr are unused with Buf set.
	k := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: iova, Access: LocalWrite, Space: 0x77, Addr: 12345})
	e, ok := u.Lookup(k)
	if !ok || e.Space == bus.NoMemory || e.Space == 0x77 {
		t.Fatalf("Lookup(%#x) = %+v, %v: want the region in a space the ATU mapped", k, e, ok)
	}
	segs, f := u.Translate(&Request{Key: k, PD: 1, VA: iova, Len: n, Access: LocalWrite}, nil)
	if f != OK {
		t.Fatalf("Translate = %v", f)
	}
	wantLens := []uint32{4096 - 0x800, 4096, 4096, n - 3*4096 + 0x800}
	if len(segs) != len(wantLens) {
		t.Fatalf("%d segments, want %d", len(segs), len(wantLens))
	}
	at := uint64(0)
	for i, s := range segs {
		if s.Space != e.Space || s.Addr != at || s.Len != wantLens[i] {
			t.Fatalf("segment %d = %+v, want %d bytes at %#x of space %#x", i, s, wantLens[i], at, uint32(e.Space))
		}
		if b := segBytes(t, u, s); &b[0] != &buf[at] {
			t.Fatalf("segment %d does not resolve to buffer byte %d", i, at)
		}
		at += uint64(s.Len)
	}
	// The DMA engines' path: what the bus gathers is the buffer's bytes.
	got := make([]byte, n)
	if c, err := u.Host().Gather(got, segs); err != nil || c != n || string(got) != string(buf) {
		t.Fatalf("Gather over the region's extents = %d, %v, or the wrong bytes", c, err)
	}

	if err := u.DeregMR(k); err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if b, err := local.Bytes(s); !errors.Is(err, bus.ErrUnmapped) {
			t.Fatalf("after DeregMR, segment %d resolves to %d bytes, %v; want ErrUnmapped", i, len(b), err)
		}
	}
	if _, err := u.Host().Gather(got, segs); !errors.Is(err, bus.ErrUnmapped) {
		t.Fatalf("Gather after DeregMR = %v, want ErrUnmapped", err)
	}
	if err := local.Unmap(e.Space); !errors.Is(err, bus.ErrUnmapped) {
		t.Fatalf("Unmap of the region's space after DeregMR = %v, want ErrUnmapped (DeregMR unmapped it)", err)
	}

	// A new region that takes the same index and the same MTT entries
	// is another space: the old extents still reach nothing.
	buf2 := pattern(n, 2)
	k2 := mustReg(t, u, MRSpec{PD: 1, Buf: buf2, IOVA: iova})
	if k2>>8 != k>>8 {
		t.Fatalf("setup: the new region took index %d, not the freed %d", k2>>8, k>>8)
	}
	if e2, _ := u.Lookup(k2); e2.Space == e.Space {
		t.Fatalf("the new region reuses space %#x of the deregistered one", uint32(e.Space))
	}
	for i, s := range segs {
		if _, err := local.Bytes(s); !errors.Is(err, bus.ErrUnmapped) {
			t.Fatalf("segment %d of the deregistered region resolves after its index was reused: %v", i, err)
		}
	}
}

// TestRegMRSpaceAddr registers memory the bus already names (a space the
// test mapped itself, as another process's memory would be): the region
// translates to extents of that space at Addr onwards, and DeregMR leaves
// the space mapped, as the ATU did not map it.
func TestRegMRSpaceAddr(t *testing.T) {
	for _, cs := range cacheShapes {
		t.Run(cs.name, func(t *testing.T) {
			u := newATU(t, 4, cs)
			local := u.Host().(*bus.Local)
			host := pattern(5*4096, 3)
			sp, err := u.Host().(bus.Mapper).Map(host)
			if err != nil {
				t.Fatal(err)
			}
			const iova, addr, n = 0x2000_0f00, 1000, 2*4096 + 300
			k := mustReg(t, u, MRSpec{PD: 1, Space: sp, Addr: addr, Length: n, IOVA: iova, Access: LocalWrite | RemoteRead})
			if e, ok := u.Lookup(k); !ok || e.Space != sp || e.Length != n || e.VA != iova {
				t.Fatalf("Lookup(%#x) = %+v, %v; want %d bytes at %#x in space %#x", k, e, ok, n, uint64(iova), uint32(sp))
			}
			if st := u.Stats(); st.MTTEntries != 4 {
				t.Fatalf("%d MTT entries, want 4", st.MTTEntries)
			}
			m := newModel(4)
			m.addObj(k, &mobj{kind: KindMR, pd: 1, buf: host[addr : addr+n], iova: iova, shift: 12, access: LocalWrite | RemoteRead})
			rng := rand.New(rand.NewPCG(3, 0))
			for _, r := range []Request{
				{Key: k, PD: 1, VA: iova, Len: n},
				{Key: k, PD: 1, VA: iova + 5000, Len: 10},
				{Key: k, PD: 1, VA: iova + 0xff, Len: 2},
				{Key: k, PD: 1, VA: iova + n - 1, Len: 1, Access: LocalWrite},
				{Key: k, PD: 1, VA: iova + 8, Len: 4096, Access: RemoteRead, Remote: true},
			} {
				want := m.translate(&r)
				segs, f := u.Translate(&r, nil)
				if f != OK || want.f != OK {
					t.Fatalf("Translate(%+v) = %v (oracle %v)", r, f, want.f)
				}
				at := addr + (r.VA - iova)
				for i, s := range segs {
					if s.Space != sp || s.Addr != at {
						t.Fatalf("%+v: segment %d = %+v, want it at %#x of space %#x", r, i, s, at, uint32(sp))
					}
					at += uint64(s.Len)
				}
				checkSegs(t, u, &r, segs, want)
				writeThrough(t, u, segs, want.mr, want.off, rng)
			}
			dst := make([]byte, 300)
			if f := u.Read(1, k, iova+4000, dst); f != OK || string(dst) != string(host[addr+4000:addr+4300]) {
				t.Fatalf("Read = %v or the wrong bytes", f)
			}

			x := Seg{Addr: addr, Space: sp, Len: n}
			if err := u.DeregMR(k); err != nil {
				t.Fatal(err)
			}
			if b, err := local.Bytes(x); err != nil || &b[0] != &host[addr] {
				t.Fatalf("after DeregMR the space the ATU did not map no longer resolves: %v", err)
			}
			if err := local.Unmap(sp); err != nil {
				t.Fatalf("Unmap of the caller's space after DeregMR: %v (the ATU unmapped it)", err)
			}
			if _, err := local.Bytes(x); !errors.Is(err, bus.ErrUnmapped) {
				t.Fatalf("after Unmap, Bytes = %v, want ErrUnmapped", err)
			}
		})
	}
}

// TestRegMRNoMemory checks a region registered without host memory (Buf
// nil, Space bus.NoMemory: the simulator's metadata-only mode): it
// translates, page by page, to extents of bus.NoMemory of the right
// lengths, which resolve to no bytes; reads of it yield zeros; and DeregMR
// has nothing to unmap.
func TestRegMRNoMemory(t *testing.T) {
	u := newATU(t, 4, shapeNamed(t, "nic"))
	const iova, n = 0x123, 3*4096 + 10
	k := mustReg(t, u, MRSpec{PD: 1, Length: n, IOVA: iova, Access: LocalWrite | RemoteWrite | RemoteRead})
	if e, ok := u.Lookup(k); !ok || e.Space != bus.NoMemory || e.Length != n {
		t.Fatalf("Lookup(%#x) = %+v, %v", k, e, ok)
	}
	if st := u.Stats(); st.MTTEntries != 4 {
		t.Fatalf("%d MTT entries, want 4", st.MTTEntries)
	}
	for _, tc := range []struct {
		va, n uint64
		lens  []uint32
	}{
		{iova, n, []uint32{4096 - 0x123, 4096, 4096, n - 3*4096 + 0x123}},
		{iova + 3700, 200, []uint32{4096 - 0x123 - 3700, 200 - (4096 - 0x123 - 3700)}},
		{iova + n - 1, 1, []uint32{1}},
	} {
		r := Request{Key: k, PD: 1, VA: tc.va, Len: tc.n, Access: RemoteWrite, Remote: true}
		segs, f := u.Translate(&r, nil)
		if f != OK {
			t.Fatalf("Translate(%+v) = %v", r, f)
		}
		if len(segs) != len(tc.lens) {
			t.Fatalf("%+v: %d segments, want %d", r, len(segs), len(tc.lens))
		}
		at := tc.va - iova
		for i, s := range segs {
			if s.Space != bus.NoMemory || s.Len != tc.lens[i] || s.Addr != at {
				t.Fatalf("%+v: segment %d = %+v, want %d bytes at %#x of no memory", r, i, s, tc.lens[i], at)
			}
			if b, err := hostBytes(u, s); err != nil || b != nil {
				t.Fatalf("%+v: segment %d resolves to %d bytes, %v; want none", r, i, len(b), err)
			}
			at += uint64(s.Len)
		}
	}
	dst := pattern(500, 9)
	if f := u.Read(1, k, iova+4000, dst); f != OK {
		t.Fatalf("Read = %v", f)
	}
	for i, b := range dst {
		if b != 0 {
			t.Fatalf("Read of no memory: dst[%d] = %#x, want 0", i, b)
		}
	}
	if err := u.DeregMR(k); err != nil {
		t.Fatal(err)
	}
	if st := u.Stats(); st.MRs != 0 || st.MTTEntries != 0 {
		t.Fatalf("after DeregMR: %+v", st)
	}
}

// TestRegMRHostBus checks the registrations that depend on what the host
// bus is: a bus that takes no buffers of this program (not a bus.Mapper)
// refuses a Buf but takes memory named by space and address, a Buf with a
// Length that disagrees is refused, and a failing bus makes Read fault
// with FaultHost while translation, which does not touch host memory,
// still succeeds.
func TestRegMRHostBus(t *testing.T) {
	cs := shapeNamed(t, "nic")
	local := new(bus.Local)
	sp, err := local.Map(pattern(8192, 4))
	if err != nil {
		t.Fatal(err)
	}
	noMap := struct{ bus.Bus }{local}
	u, err := New(Config{MaxMR: 4, PageShift: 12, MPTCache: cs.mpt, MTTCache: cs.mtt, Host: noMap})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := u.RegMR(MRSpec{PD: 1, Buf: make([]byte, 100)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RegMR(Buf) on a bus that is not a Mapper = %#x, %v; want ErrInvalid", k, err)
	}
	if st := u.Stats(); st.MRs != 0 || st.MTTEntries != 0 {
		t.Fatalf("refused registration left %+v", st)
	}
	k := mustReg(t, u, MRSpec{PD: 1, Space: sp, Addr: 100, Length: 5000})
	if segs, f := u.Translate(&Request{Key: k, PD: 1, VA: 0, Len: 5000}, nil); f != OK || len(segs) != 2 || segs[0] != (Seg{Addr: 100, Space: sp, Len: 4096}) || segs[1] != (Seg{Addr: 4196, Space: sp, Len: 904}) {
		t.Fatalf("Translate = %+v, %v", segs, f)
	}
	if err := u.DeregMR(k); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Bytes(Seg{Addr: 100, Space: sp, Len: 5000}); err != nil {
		t.Fatalf("DeregMR unmapped a space it did not map: %v", err)
	}

	if k, err := newATU(t, 4, cs).RegMR(MRSpec{PD: 1, Buf: make([]byte, 100), Length: 99}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RegMR(100-byte Buf, Length 99) = %#x, %v; want ErrInvalid", k, err)
	}

	faulty := &bus.Faulty{Mapper: new(bus.Local), Fail: func(bus.Extent) bool { return true }}
	u, err = New(Config{MaxMR: 4, PageShift: 12, MPTCache: cs.mpt, MTTCache: cs.mtt, Host: faulty})
	if err != nil {
		t.Fatal(err)
	}
	k = mustReg(t, u, MRSpec{PD: 1, Buf: pattern(100, 5), IOVA: 0x1000})
	if _, f := u.Translate(&Request{Key: k, PD: 1, VA: 0x1000, Len: 100}, nil); f != OK {
		t.Fatalf("Translate on a failing bus = %v, want ok", f)
	}
	before := u.Stats()
	if f := u.Read(1, k, 0x1000, make([]byte, 10)); f != FaultHost {
		t.Fatalf("Read on a failing bus = %v, want %v", f, FaultHost)
	}
	if after := u.Stats(); after != before {
		t.Fatalf("Read changed the NIC's statistics:\n%+v\n%+v", before, after)
	}
}
