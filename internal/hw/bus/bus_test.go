package bus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// TestLocalMapUnmap: a mapped buffer is its own space, reached without a
// copy; after Unmap its space fails, and the slot's next mapping gets a
// new space number, so an extent kept from before finds nothing.
func TestLocalMapUnmap(t *testing.T) {
	var l Local
	a, b := []byte("0123456789"), []byte("abcdefghij")
	sa, err := l.Map(a)
	if err != nil || sa == NoMemory {
		t.Fatalf("Map: %v, space %#x", err, sa)
	}
	sb, _ := l.Map(b)
	if sa == sb {
		t.Fatal("two buffers, one space")
	}
	got, err := l.Bytes(Extent{Space: sa, Addr: 2, Len: 3})
	if err != nil || &got[0] != &a[2] || len(got) != 3 || cap(got) != 3 {
		t.Fatalf("Bytes: %q, %v (a copy, or not capped)", got, err)
	}
	dst := make([]byte, 6)
	if n, err := l.Gather(dst, []Extent{{Space: sa, Addr: 8, Len: 2}, {Space: sb, Addr: 0, Len: 4}}); n != 6 || err != nil || string(dst) != "89abcd" {
		t.Fatalf("Gather: %d %v %q", n, err, dst)
	}
	if n, err := l.Scatter([]Extent{{Space: sb, Addr: 9, Len: 1}, {Space: sa, Addr: 0, Len: 1}}, []byte("XY")); n != 2 || err != nil || b[9] != 'X' || a[0] != 'Y' {
		t.Fatalf("Scatter: %d %v %q %q", n, err, a, b)
	}
	old := Extent{Space: sa, Addr: 0, Len: 4}
	if err := l.Unmap(sa); err != nil {
		t.Fatal(err)
	}
	if err := l.Unmap(sa); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("second Unmap: %v", err)
	}
	sc, _ := l.Map(make([]byte, 10)) // takes the freed slot
	if sc == sa {
		t.Fatal("the freed slot's next mapping has the old space number")
	}
	if uint32(sc)&slotMask != uint32(sa)&slotMask {
		t.Fatalf("slot not reused: %#x after %#x", sc, sa)
	}
	if _, err := l.Gather(dst, []Extent{old}); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("stale extent: %v", err)
	}
	if !bytes.Equal(a, []byte("Y123456789")) {
		t.Fatalf("unmapped buffer changed: %q", a)
	}
}

// TestLocalBounds: an extent past its mapping, or wrapping, fails; nothing
// is read or written outside the buffer.
func TestLocalBounds(t *testing.T) {
	var l Local
	buf := make([]byte, 16)
	sp, _ := l.Map(buf[:8:8])
	for _, x := range []Extent{
		{Space: sp, Addr: 8, Len: 1},
		{Space: sp, Addr: 4, Len: 5},
		{Space: sp, Addr: ^uint64(0), Len: 2},
		{Space: sp | 0xFF<<slotBits, Addr: 0, Len: 1}, // another generation
	} {
		if _, err := l.Scatter([]Extent{x}, []byte{1, 2, 3, 4, 5}); !errors.Is(err, ErrUnmapped) {
			t.Errorf("%+v: %v", x, err)
		}
	}
	if !bytes.Equal(buf, make([]byte, 16)) {
		t.Fatalf("written: % x", buf)
	}
}

// TestLocalAtomic: compare-and-swap and fetch-and-add in host byte order.
func TestLocalAtomic(t *testing.T) {
	var l Local
	m := make([]byte, 16)
	sp, _ := l.Map(m)
	binary.NativeEndian.PutUint64(m[8:], 40)
	x := Extent{Space: sp, Addr: 8, Len: 8}
	if v, err := l.Atomic(x, FetchAdd, 2, 0); v != 40 || err != nil {
		t.Fatalf("FetchAdd: %d %v", v, err)
	}
	if v, _ := l.Atomic(x, CompareSwap, 41, 7); v != 42 || binary.NativeEndian.Uint64(m[8:]) != 42 {
		t.Fatalf("failed CompareSwap changed memory: %d", v)
	}
	if v, _ := l.Atomic(x, CompareSwap, 42, 7); v != 42 || binary.NativeEndian.Uint64(m[8:]) != 7 {
		t.Fatalf("CompareSwap: %d", v)
	}
	if _, err := l.Atomic(Extent{Space: sp, Addr: 8, Len: 4}, FetchAdd, 1, 0); err == nil {
		t.Fatal("a 4-byte atomic was accepted")
	}
}

// TestNoMemory: space 0 reads as zeros and drops writes.
func TestNoMemory(t *testing.T) {
	var l Local
	dst := bytes.Repeat([]byte{9}, 5000)
	if n, err := l.Gather(dst, []Extent{{Len: 5000}}); n != 5000 || err != nil || !bytes.Equal(dst, make([]byte, 5000)) {
		t.Fatalf("Gather: %d %v", n, err)
	}
	if n, err := l.Scatter([]Extent{{Len: 3}}, []byte{1, 2, 3}); n != 3 || err != nil {
		t.Fatalf("Scatter: %d %v", n, err)
	}
	if v, err := l.Atomic(Extent{Len: 8}, FetchAdd, 1, 0); v != 0 || err != nil {
		t.Fatalf("Atomic: %d %v", v, err)
	}
}

// TestFaulty: the chosen extents fail, the others pass through; Map and
// Unmap reach the memory underneath.
func TestFaulty(t *testing.T) {
	f := &Faulty{Mapper: new(Local), Fail: func(x Extent) bool { return x.Addr >= 4 }}
	buf := []byte("abcdefgh")
	sp, err := f.Map(buf)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 4)
	if _, err := f.Gather(dst, []Extent{{Space: sp, Addr: 0, Len: 4}}); err != nil || string(dst) != "abcd" {
		t.Fatalf("passing extent: %v %q", err, dst)
	}
	if _, err := f.Scatter([]Extent{{Space: sp, Addr: 0, Len: 2}, {Space: sp, Addr: 4, Len: 2}}, []byte("XXYY")); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("failing extent: %v", err)
	}
	if string(buf) != "abcdefgh" {
		t.Fatalf("a refused scatter wrote: %q", buf)
	}
	if err := f.Unmap(sp); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLocalGather4K(b *testing.B) {
	var l Local
	buf := make([]byte, 8192)
	sp, _ := l.Map(buf)
	xs := []Extent{{Space: sp, Addr: 1000, Len: 3096}, {Space: sp, Addr: 4096, Len: 1000}}
	dst := make([]byte, 4096)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		l.Gather(dst, xs)
	}
}

// TestLocalConcurrent: mappings come and go on the control path while DMA
// runs. An access to a live space finds its bytes, one to a space being
// unmapped finds them or fails with ErrUnmapped, and nothing races (go test
// -race). (A space number comes back after 255 remappings of its slot, as
// an IOVA does on hardware at once: see TestLocalGenerations.)
func TestLocalConcurrent(t *testing.T) {
	var l Local
	stable := bytes.Repeat([]byte{0xAB}, 4096)
	sp, _ := l.Map(stable)
	done := make(chan struct{})
	spaces := make(chan Space, 64)
	go func() {
		defer close(done)
		for i := range 20000 {
			s, err := l.Map(bytes.Repeat([]byte{byte(i)}, 64))
			if err != nil {
				t.Error(err)
				return
			}
			select {
			case spaces <- s:
			default:
			}
			if err := l.Unmap(s); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	dst := make([]byte, 64)
	for {
		select {
		case <-done:
			return
		case s := <-spaces: // unmapped by now or soon: its bytes or ErrUnmapped
			if _, err := l.Gather(dst, []Extent{{Space: s, Len: 64}}); err != nil && !errors.Is(err, ErrUnmapped) {
				t.Fatal(err)
			}
		default:
		}
		if _, err := l.Gather(dst, []Extent{{Space: sp, Addr: 100, Len: 64}}); err != nil || dst[0] != 0xAB || dst[63] != 0xAB {
			t.Fatalf("the stable space: %v % x", err, dst[:4])
		}
	}
}

// TestLocalGenerations: a stale space (kept past its Unmap) fails for the
// next 254 mappings of its slot; the 255th gets its number back. The NIC
// never keeps an extent past the operation that translated it, and
// deregistration runs between operations, so this is a second line of
// defence, as an IOMMU's is none: hardware reuses an IOVA at once.
func TestLocalGenerations(t *testing.T) {
	var l Local
	sp, _ := l.Map(make([]byte, 8))
	stale := Extent{Space: sp, Len: 8}
	l.Unmap(sp)
	dst := make([]byte, 8)
	for i := 1; i <= 255; i++ {
		s, err := l.Map([]byte{byte(i), 0, 0, 0, 0, 0, 0, 0})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Gather(dst, []Extent{stale})
		if i < 255 && !errors.Is(err, ErrUnmapped) {
			t.Fatalf("mapping %d of the slot: the stale space reads % x (%v)", i, dst, err)
		}
		if i == 255 && (s != sp || err != nil || dst[0] != 255) {
			t.Fatalf("mapping 255: space %#x (want %#x back), %v", uint32(s), uint32(sp), err)
		}
		l.Unmap(s)
	}
}

// TestLendUnmap: memory lent by Lend is the mapping's buffer itself;
// Unmap waits for a borrow in progress and every later Borrow fails.
// Another process's region and space NoMemory are not lent.
func TestLendUnmap(t *testing.T) {
	var l Local
	buf := []byte("0123456789")
	sp, err := l.Map(buf)
	if err != nil {
		t.Fatal(err)
	}
	b, lender, ok := l.Lend(Extent{Space: sp, Addr: 2, Len: 4})
	if !ok || string(b) != "2345" || &b[0] != &buf[2] {
		t.Fatalf("Lend = %q, %v", b, ok)
	}
	if _, _, ok := l.Lend(Extent{Space: NoMemory, Len: 4}); ok {
		t.Error("space NoMemory was lent")
	}
	if !lender.Borrow() {
		t.Fatal("Borrow failed while mapped")
	}
	unmapped := make(chan struct{})
	go func() { l.Unmap(sp); close(unmapped) }()
	select {
	case <-unmapped:
		t.Fatal("Unmap returned while a borrow was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	lender.Return()
	<-unmapped
	if lender.Borrow() {
		t.Error("Borrow succeeded after Unmap")
	}
	if _, _, ok := l.Lend(Extent{Space: sp, Addr: 2, Len: 4}); ok {
		t.Error("an unmapped space was lent")
	}
}
