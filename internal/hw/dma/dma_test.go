package dma

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
)

func TestGatherScatterAcrossSegments(t *testing.T) {
	c, err := New(2)
	if err != nil {
		t.Fatal(err)
	}
	host := []byte("abcdefghijklmnop")
	segs := []Seg{host[0:3], host[3:4], host[4:10], host[10:16]}
	for _, n := range []int{0, 1, 3, 4, 9, 16} {
		pkt := make([]byte, n)
		if got := c.Gather(1, pkt, segs); got != n {
			t.Fatalf("Gather into %d bytes copied %d", n, got)
		}
		if !bytes.Equal(pkt, host[:n]) {
			t.Fatalf("Gather %d = %q", n, pkt)
		}
	}
	dst := make([]byte, 16)
	dsegs := []Seg{dst[0:5], dst[5:6], dst[6:16]}
	if got := c.Scatter(0, dsegs, host); got != 16 || !bytes.Equal(dst, host) {
		t.Fatalf("Scatter copied %d: %q", got, dst)
	}
	s := c.Stats()
	if s.Descriptors != 7 || s.Bytes != 0+1+3+4+9+16+16 {
		t.Fatalf("stats %+v", s)
	}
	if s.PerEngine[0].Descriptors != 1 || s.PerEngine[1].Descriptors != 6 {
		t.Fatalf("per engine %+v", s.PerEngine)
	}
}

func TestAtomics(t *testing.T) {
	c, _ := New(1)
	m := make([]byte, 8)
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
		if got := c.Atomic(0, m, tc.op, tc.arg, tc.swap); got != tc.orig {
			t.Errorf("%d: orig %d want %d", i, got, tc.orig)
		}
		if v := binary.NativeEndian.Uint64(m); v != tc.then {
			t.Errorf("%d: memory %d want %d", i, v, tc.then)
		}
	}
}

func TestAtomicsAreAtomicAcrossCallers(t *testing.T) {
	c, _ := New(4)
	m := make([]byte, 8)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(ch uint32) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				c.Atomic(ch, m, FetchAdd, 1, 0)
			}
		}(uint32(g))
	}
	wg.Wait()
	if v := binary.NativeEndian.Uint64(m); v != 4000 {
		t.Fatalf("fetch-add total %d, want 4000", v)
	}
}

func TestNewValidates(t *testing.T) {
	for _, n := range []int{0, -1, 1025} {
		if _, err := New(n); err == nil {
			t.Errorf("New(%d) accepted", n)
		}
	}
}

func BenchmarkGather4K(b *testing.B) {
	c, _ := New(1)
	host := make([]byte, 8192)
	segs := []Seg{host[1000:4096], host[4096:5096]}
	pkt := make([]byte, 4096)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		c.Gather(0, pkt, segs)
	}
}
