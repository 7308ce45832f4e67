package bus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rnic/rnic/internal/testpeer"
)

// TestProcessPeer is the peer process of the tests below (testpeer).
func TestProcessPeer(t *testing.T) { testpeer.Serve(t) }

// TestProcessMemory: the bus reads, writes and executes atomics in
// another process's memory, a scatter/gather list at a time, mixed with
// the program's own memory; out-of-region extents, unmapped pages and an
// exited process fail the access with ErrUnmapped and nothing else.
func TestProcessMemory(t *testing.T) {
	p := testpeer.Start(t, "TestProcessPeer")
	proc, err := OpenProcess(p.Pid())
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	defer proc.Close()
	var l Local
	sp, err := l.MapProcess(proc, p.Addr, testpeer.Len)
	if err != nil {
		t.Fatal(err)
	}

	// Gather: two extents of the peer and one of this process, one call.
	own := bytes.Repeat([]byte{0xEE}, 50)
	osp, _ := l.Map(own)
	dst := make([]byte, 100+4096+50)
	n, err := l.Gather(dst, []Extent{{Space: sp, Addr: 0, Len: 100}, {Space: sp, Addr: 8192, Len: 4096}, {Space: osp, Len: 50}})
	if err != nil || n != len(dst) {
		t.Fatalf("Gather = %d, %v", n, err)
	}
	for i := range 100 {
		if dst[i] != testpeer.Byte(i) {
			t.Fatalf("byte %d: %#x, want %#x", i, dst[i], testpeer.Byte(i))
		}
	}
	for i := range 4096 {
		if dst[100+i] != testpeer.Byte(8192+i) {
			t.Fatalf("byte %d of the second extent: %#x, want %#x", i, dst[100+i], testpeer.Byte(8192+i))
		}
	}
	if !bytes.Equal(dst[100+4096:], own) {
		t.Fatal("the program's own extent differs")
	}

	// Scatter across two extents of the peer.
	src := bytes.Repeat([]byte("scatter!"), 25) // 200 bytes
	if n, err := l.Scatter([]Extent{{Space: sp, Addr: 300, Len: 100}, {Space: sp, Addr: 500000, Len: 100}}, src); err != nil || n != 200 {
		t.Fatalf("Scatter = %d, %v", n, err)
	}
	if got := p.Dump(t, 300, 100); !bytes.Equal(got, src[:100]) {
		t.Fatalf("peer bytes 300..400: %q", got)
	}
	if got := p.Dump(t, 500000, 100); !bytes.Equal(got, src[100:]) {
		t.Fatalf("peer bytes 500000..500100: %q", got)
	}
	if got := p.Dump(t, 400, 1); got[0] != testpeer.Byte(400) {
		t.Fatal("Scatter wrote past its extent")
	}

	// Atomics: fetch-and-add, a compare that fails (no write), one that
	// succeeds.
	word := Extent{Space: sp, Addr: 1024, Len: 8}
	want := binary.NativeEndian.Uint64([]byte{testpeer.Byte(1024), testpeer.Byte(1025), testpeer.Byte(1026), testpeer.Byte(1027), testpeer.Byte(1028), testpeer.Byte(1029), testpeer.Byte(1030), testpeer.Byte(1031)})
	if orig, err := l.Atomic(word, FetchAdd, 5, 0); err != nil || orig != want {
		t.Fatalf("FetchAdd = %#x, %v; want %#x", orig, err, want)
	}
	if orig, err := l.Atomic(word, CompareSwap, want, 1); err != nil || orig != want+5 {
		t.Fatalf("CompareSwap (fails) = %#x, %v; want %#x", orig, err, want+5)
	}
	if orig, err := l.Atomic(word, CompareSwap, want+5, 42); err != nil || orig != want+5 {
		t.Fatalf("CompareSwap = %#x, %v", orig, err)
	}
	if got := binary.NativeEndian.Uint64(p.Dump(t, 1024, 8)); got != 42 {
		t.Fatalf("word after the atomics: %d, want 42", got)
	}

	// The steady path allocates nothing.
	if a := testing.AllocsPerRun(100, func() { l.Gather(dst[:4096], []Extent{{Space: sp, Addr: 8192, Len: 4096}}) }); a != 0 {
		t.Errorf("Gather from another process allocates %v times", a)
	}

	// Out of the region: refused before any system call.
	if _, err := l.Gather(dst[:16], []Extent{{Space: sp, Addr: testpeer.Len - 8, Len: 16}}); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Gather past the region: %v", err)
	}
	// A region whose pages the process does not have (the page at 4 KiB
	// is never mapped): the kernel's fault becomes ErrUnmapped.
	bad, _ := l.MapProcess(proc, 4096, 4096)
	if _, err := l.Gather(dst[:64], []Extent{{Space: bad, Len: 64}}); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Gather of unmapped pages: %v", err)
	}
	if _, err := l.Atomic(Extent{Space: bad, Len: 8}, FetchAdd, 1, 0); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Atomic on unmapped pages: %v", err)
	}
	// Unmapped space: refused.
	l.Unmap(bad)
	if _, err := l.Gather(dst[:64], []Extent{{Space: bad, Len: 64}}); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Gather of an unmapped space: %v", err)
	}

	// The process exits: every access fails, none reads another process
	// that might get its pid.
	p.Exit()
	if _, err := l.Gather(dst[:64], []Extent{{Space: sp, Len: 64}}); !errors.Is(err, ErrUnmapped) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("Gather after the process exited: %v", err)
	}
	if _, err := l.Scatter([]Extent{{Space: sp, Len: 64}}, dst[:64]); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Scatter after the process exited: %v", err)
	}
	proc.Close()
	if _, err := l.Gather(dst[:64], []Extent{{Space: sp, Len: 64}}); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Gather after Close: %v", err)
	}
}

// BenchmarkProcessGather: a DMA read of another process's memory
// (process_vm_readv) beside copy() of the same size in this process, the
// physical reference.
//
//	go test -run '^$' -bench ProcessGather ./internal/hw/bus
func BenchmarkProcessGather(b *testing.B) {
	for _, size := range []int{64, 4096, 65536} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := testpeer.Start(b, "TestProcessPeer")
			proc, err := OpenProcess(p.Pid())
			if err != nil {
				b.Skip(err)
			}
			defer proc.Close()
			var l Local
			sp, _ := l.MapProcess(proc, p.Addr, testpeer.Len)
			dst, ref := make([]byte, size), make([]byte, size)
			xs := []Extent{{Space: sp, Len: uint32(size)}}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				if _, err := l.Gather(dst, xs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := max(b.N, 1000)
			start := time.Now()
			for range n {
				copy(dst, ref)
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "copy_ns")
		})
	}
}

// TestProcessSignals: signals arriving during an access (Go's own
// preemption signal is one) are not the process's exit: 20,000 gathers
// under a storm of SIGURG all succeed. (The pidfd's poll returned EINTR,
// and the access failed as if the process had exited: a WRITE of
// perftest's failed with a local protection error.)
func TestProcessSignals(t *testing.T) {
	p := testpeer.Start(t, "TestProcessPeer")
	proc, err := OpenProcess(p.Pid())
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	defer proc.Close()
	var l Local
	sp, _ := l.MapProcess(proc, p.Addr, testpeer.Len)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				syscall.Kill(os.Getpid(), syscall.SIGURG)
			}
		}
	}()
	dst := make([]byte, 64)
	for i := range 20000 {
		if _, err := l.Gather(dst, []Extent{{Space: sp, Addr: uint64(i % 1000), Len: 64}}); err != nil {
			close(stop)
			<-done
			t.Fatalf("gather %d: %v", i, err)
		}
	}
	close(stop)
	<-done
}

// TestProcessGatherV: a burst's payloads gathered from another process
// with one access (GatherV), across extents of the peer, the program's
// own memory and no memory, land in the buffers in turn exactly as
// Gather into one buffer puts them; a page the process lacks fails it
// with ErrUnmapped; the steady path allocates nothing.
func TestProcessGatherV(t *testing.T) {
	l, proc, sp := peerSpace(t)
	own := bytes.Repeat([]byte{0xEE}, 700)
	osp, _ := l.Map(own)
	for _, tc := range vectorCases(sp, osp) {
		t.Run(tc.name, func(t *testing.T) {
			total := 0
			dsts := make([][]byte, len(tc.sizes))
			for i, s := range tc.sizes {
				dsts[i] = bytes.Repeat([]byte{0x55}, s)
				total += s
			}
			want := make([]byte, total)
			wn, werr := l.Gather(want, tc.xs)
			n, err := l.GatherV(dsts, tc.xs)
			if err != nil || werr != nil || n != wn {
				t.Fatalf("GatherV = %d, %v; Gather = %d, %v", n, err, wn, werr)
			}
			got := bytes.Join(dsts, nil)
			if !bytes.Equal(got[:n], want[:wn]) {
				t.Fatalf("GatherV's bytes differ from Gather's (first at %d)", firstDiff(got, want))
			}
			if !bytes.Equal(got[n:], bytes.Repeat([]byte{0x55}, total-n)) {
				t.Fatalf("GatherV wrote past the extents' %d bytes", n)
			}
		})
	}
	dsts := [][]byte{make([]byte, 4096), make([]byte, 4096)}
	xs := []Extent{{Space: sp, Addr: 8192, Len: 8192}}
	if a := testing.AllocsPerRun(100, func() { l.GatherV(dsts, xs) }); a != 0 {
		t.Errorf("GatherV from another process allocates %v times", a)
	}
	bad, _ := l.MapProcess(proc, 4096, 8192)
	if _, err := l.GatherV(dsts, []Extent{{Space: bad, Len: 8192}}); !errors.Is(err, ErrUnmapped) {
		t.Errorf("GatherV of unmapped pages: %v", err)
	}
	if _, err := l.GatherV(dsts, []Extent{{Space: sp, Addr: testpeer.Len - 8, Len: 16}}); !errors.Is(err, ErrUnmapped) {
		t.Errorf("GatherV past the region: %v", err)
	}
}

// TestProcessScatterV: a burst's payloads written into another process
// with one access (ScatterV), across extents of the peer, the program's
// own memory and no memory, land as Scatter of the buffers joined puts
// them; a page the process lacks fails it with ErrUnmapped; the steady
// path allocates nothing.
func TestProcessScatterV(t *testing.T) {
	l, proc, sp := peerSpace(t)
	own := make([]byte, 700)
	osp, _ := l.Map(own)
	for i, tc := range vectorCases(sp, osp) {
		t.Run(tc.name, func(t *testing.T) {
			var srcs [][]byte
			for j, s := range tc.sizes {
				b := make([]byte, s)
				for k := range b {
					b[k] = byte(i*31 + j*7 + k)
				}
				srcs = append(srcs, b)
			}
			joined := bytes.Join(srcs, nil)
			clearAll := func() {
				for _, x := range tc.xs {
					if x.Space == sp {
						if _, err := l.Scatter([]Extent{x}, make([]byte, x.Len)); err != nil {
							t.Fatal(err)
						}
					}
				}
				clear(own)
			}
			read := func() []byte {
				total := 0
				for _, x := range tc.xs {
					total += int(x.Len)
				}
				b := make([]byte, total)
				if _, err := l.Gather(b, tc.xs); err != nil {
					t.Fatal(err)
				}
				return b
			}
			clearAll()
			wn, werr := l.Scatter(tc.xs, joined)
			want := read()
			clearAll()
			n, err := l.ScatterV(tc.xs, srcs)
			if err != nil || werr != nil || n != wn {
				t.Fatalf("ScatterV = %d, %v; Scatter = %d, %v", n, err, wn, werr)
			}
			if got := read(); !bytes.Equal(got, want) {
				t.Fatalf("ScatterV's bytes differ from Scatter's (first at %d)", firstDiff(got, want))
			}
		})
	}
	srcs := [][]byte{make([]byte, 4096), make([]byte, 4096)}
	xs := []Extent{{Space: sp, Addr: 8192, Len: 8192}}
	if a := testing.AllocsPerRun(100, func() { l.ScatterV(xs, srcs) }); a != 0 {
		t.Errorf("ScatterV into another process allocates %v times", a)
	}
	bad, _ := l.MapProcess(proc, 4096, 8192)
	if _, err := l.ScatterV([]Extent{{Space: bad, Len: 8192}}, srcs); !errors.Is(err, ErrUnmapped) {
		t.Errorf("ScatterV into unmapped pages: %v", err)
	}
	if _, err := l.ScatterV([]Extent{{Space: sp, Addr: testpeer.Len - 8, Len: 16}}, srcs); !errors.Is(err, ErrUnmapped) {
		t.Errorf("ScatterV past the region: %v", err)
	}
}

// peerSpace starts the peer process and maps its test region into a
// Local bus of its own (the process closes with the test).
func peerSpace(t *testing.T) (*Local, *Process, Space) {
	p := testpeer.Start(t, "TestProcessPeer")
	proc, err := OpenProcess(p.Pid())
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	t.Cleanup(func() { proc.Close() })
	l := new(Local)
	sp, err := l.MapProcess(proc, p.Addr, testpeer.Len)
	if err != nil {
		t.Fatal(err)
	}
	return l, proc, sp
}

// vectorCase is a burst of buffers (their sizes) against extents.
type vectorCase struct {
	name  string
	sizes []int
	xs    []Extent
}

// vectorCases are the bursts TestProcessGatherV and TestProcessScatterV
// move, over the peer's space sp and the test's own osp.
func vectorCases(sp, osp Space) []vectorCase {
	many := make([]int, 150)
	for i := range many {
		many[i] = 64
	}
	return []vectorCase{
		{"16 packets of one region", []int{4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096},
			[]Extent{{Space: sp, Addr: 4096, Len: 65536}}},
		{"pages in pieces", []int{1000, 5000, 3000}, []Extent{{Space: sp, Addr: 0, Len: 4096}, {Space: sp, Addr: 4096, Len: 4096}, {Space: sp, Addr: 100000, Len: 800}}},
		{"mixed spaces", []int{300, 300, 300, 300}, []Extent{{Space: sp, Addr: 10, Len: 250}, {Space: osp, Len: 700}, {Space: NoMemory, Len: 50}, {Space: sp, Addr: 9000, Len: 200}}},
		{"more vectors than one call", many, []Extent{{Space: sp, Addr: 0, Len: 9600}}},
		{"buffers longer than the extents", []int{100, 100}, []Extent{{Space: sp, Addr: 0, Len: 150}}},
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
