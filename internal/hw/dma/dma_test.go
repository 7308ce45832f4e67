package dma

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/rnic/rnic/internal/hw/bus"
)

// mapped returns a cluster of n engines on a local bus, and buf's space.
func mapped(tb testing.TB, n int, buf []byte) (*Cluster, bus.Space) {
	tb.Helper()
	host := new(bus.Local)
	sp, err := host.Map(buf)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := New(n, host)
	if err != nil {
		tb.Fatal(err)
	}
	return c, sp
}

func ext(sp bus.Space, from, to int) Seg {
	return Seg{Space: sp, Addr: uint64(from), Len: uint32(to - from)}
}

func TestGatherScatterAcrossSegments(t *testing.T) {
	host := []byte("abcdefghijklmnop")
	dst := make([]byte, 16)
	c, sp := mapped(t, 2, host)
	dsp, err := c.host.(*bus.Local).Map(dst)
	if err != nil {
		t.Fatal(err)
	}
	segs := []Seg{ext(sp, 0, 3), ext(sp, 3, 4), ext(sp, 4, 10), ext(sp, 10, 16)}
	for _, n := range []int{0, 1, 3, 4, 9, 16} {
		pkt := make([]byte, n)
		if got, err := c.Gather(1, pkt, segs); got != n || err != nil {
			t.Fatalf("Gather into %d bytes copied %d, %v", n, got, err)
		}
		if !bytes.Equal(pkt, host[:n]) {
			t.Fatalf("Gather %d = %q", n, pkt)
		}
	}
	dsegs := []Seg{ext(dsp, 0, 5), ext(dsp, 5, 6), ext(dsp, 6, 16)}
	if got, err := c.Scatter(0, dsegs, host); got != 16 || err != nil || !bytes.Equal(dst, host) {
		t.Fatalf("Scatter copied %d (%v): %q", got, err, dst)
	}
	s := c.Stats()
	if s.Descriptors != 7 || s.Bytes != 0+1+3+4+9+16+16 || s.Faults != 0 {
		t.Fatalf("stats %+v", s)
	}
	if s.PerEngine[0].Descriptors != 1 || s.PerEngine[1].Descriptors != 6 {
		t.Fatalf("per engine %+v", s.PerEngine)
	}
}

func TestAtomics(t *testing.T) {
	m := make([]byte, 8)
	c, sp := mapped(t, 1, m)
	binary.NativeEndian.PutUint64(m, 5)
	tests := []struct {
		op         AtomicOp
		arg, swap  uint64
		orig, then uint64
	}{
		{CompareSwap, 4, 9, 5, 5}, // compare fails: unchanged
		{CompareSwap, 5, 9, 5, 9},
		{FetchAdd, 3, 0, 9, 12},
		{FetchAdd, ^uint64(0), 0, 12, 11}, // wraps
	}
	for i, tc := range tests {
		if got, err := c.Atomic(0, ext(sp, 0, 8), tc.op, tc.arg, tc.swap); got != tc.orig || err != nil {
			t.Errorf("%d: orig %d (%v) want %d", i, got, err, tc.orig)
		}
		if v := binary.NativeEndian.Uint64(m); v != tc.then {
			t.Errorf("%d: memory %d want %d", i, v, tc.then)
		}
	}
}

func TestAtomicsAreAtomicAcrossCallers(t *testing.T) {
	m := make([]byte, 8)
	c, sp := mapped(t, 4, m)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(ch uint32) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				c.Atomic(ch, ext(sp, 0, 8), FetchAdd, 1, 0)
			}
		}(uint32(g))
	}
	wg.Wait()
	if v := binary.NativeEndian.Uint64(m); v != 4000 {
		t.Fatalf("fetch-add total %d, want 4000", v)
	}
}

// TestBusFaults: a descriptor whose host memory the bus cannot reach (an
// unmapped space, an extent past the mapping, an injected fault) returns
// the bus's error and is counted; nothing panics and no other memory is
// touched.
func TestBusFaults(t *testing.T) {
	buf := bytes.Repeat([]byte{7}, 64)
	local := new(bus.Local)
	sp, _ := local.Map(buf)
	gone, _ := local.Map(make([]byte, 64))
	if err := local.Unmap(gone); err != nil {
		t.Fatal(err)
	}
	faulty := &bus.Faulty{Mapper: local, Fail: func(x bus.Extent) bool { return x.Space == sp && x.Addr >= 32 }}
	c, err := New(1, faulty)
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 16)
	for _, tc := range []struct {
		name string
		seg  Seg
	}{
		{"unmapped space", ext(gone, 0, 16)},
		{"past the mapping", Seg{Space: sp, Addr: 56, Len: 16}},
		{"injected", ext(sp, 32, 48)},
		{"never mapped", ext(0x7777, 0, 16)},
	} {
		if _, err := c.Gather(0, pkt, []Seg{tc.seg}); !errors.Is(err, bus.ErrUnmapped) {
			t.Errorf("%s: Gather error %v, want ErrUnmapped", tc.name, err)
		}
		if _, err := c.Scatter(0, []Seg{tc.seg}, pkt); !errors.Is(err, bus.ErrUnmapped) {
			t.Errorf("%s: Scatter error %v, want ErrUnmapped", tc.name, err)
		}
		if _, err := c.Atomic(0, Seg{Space: tc.seg.Space, Addr: tc.seg.Addr, Len: 8}, FetchAdd, 1, 0); !errors.Is(err, bus.ErrUnmapped) {
			t.Errorf("%s: Atomic error %v, want ErrUnmapped", tc.name, err)
		}
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{7}, 64)) {
		t.Fatalf("a failed descriptor changed memory: % x", buf)
	}
	if f := c.Stats().Faults; f != 12 {
		t.Fatalf("%d faults counted, want 12", f)
	}
}

// TestNoMemory: space 0 is no memory: gathers read zeros, scatters and
// atomics are dropped (the simulator's metadata-only regions).
func TestNoMemory(t *testing.T) {
	c, err := New(1, new(bus.Local))
	if err != nil {
		t.Fatal(err)
	}
	pkt := bytes.Repeat([]byte{1}, 100)
	if n, err := c.Gather(0, pkt, []Seg{{Space: bus.NoMemory, Addr: 1 << 40, Len: 100}}); n != 100 || err != nil || !bytes.Equal(pkt, make([]byte, 100)) {
		t.Fatalf("Gather from no memory: %d, %v", n, err)
	}
	if n, err := c.Scatter(0, []Seg{{Space: bus.NoMemory, Len: 100}}, pkt); n != 100 || err != nil {
		t.Fatalf("Scatter to no memory: %d, %v", n, err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, n := range []int{0, -1, 1025} {
		if _, err := New(n, new(bus.Local)); err == nil {
			t.Errorf("New(%d) accepted", n)
		}
	}
	if _, err := New(1, nil); err == nil {
		t.Error("New without a bus accepted")
	}
}

func BenchmarkGather4K(b *testing.B) {
	host := make([]byte, 8192)
	c, sp := mapped(b, 1, host)
	segs := []Seg{ext(sp, 1000, 4096), ext(sp, 4096, 5096)}
	pkt := make([]byte, 4096)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		c.Gather(0, pkt, segs)
	}
}
