package mem_test

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

var (
	v4a = netip.MustParseAddr("10.0.0.1")
	v4b = netip.MustParseAddr("10.0.0.2")
	v6a = netip.MustParseAddr("fd00::1")
	v6b = netip.MustParseAddr("fd00::2")
)

// fill writes IPv4 (IHL ihl bytes) or IPv6 and UDP headers for a frame of
// len(f) bytes to dst, and a byte pattern after them. The frame index goes
// into header fields the link never corrupts (IPv4 Identification or IPv6
// flow label, and the UDP source port), so it survives corruption.
func fill(f []byte, dst netip.Addr, idx uint32, ihl int) {
	clear(f)
	var udp int
	if dst.Is4() {
		f[0] = 0x40 | byte(ihl/4)
		binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
		binary.BigEndian.PutUint16(f[4:], uint16(idx>>16))
		f[8], f[9] = 64, 17
		a := dst.As4()
		copy(f[16:], a[:])
		udp = ihl
	} else {
		f[0] = 0x60
		binary.BigEndian.PutUint16(f[2:], uint16(idx>>16))
		binary.BigEndian.PutUint16(f[4:], uint16(len(f)-40))
		f[6], f[7] = 17, 64
		a := dst.As16()
		copy(f[24:], a[:])
		udp = 40
	}
	binary.BigEndian.PutUint16(f[udp:], uint16(idx))
	binary.BigEndian.PutUint16(f[udp+2:], 4791)
	binary.BigEndian.PutUint16(f[udp+4:], uint16(len(f)-udp))
	for i := udp + 8; i < len(f); i++ {
		f[i] = byte(i*7 + int(idx))
	}
}

// payloadOffset returns where the UDP payload of a frame built by fill starts.
func payloadOffset(f []byte) int {
	if f[0]>>4 == 4 {
		return int(f[0]&0x0f)*4 + 8
	}
	return 48
}

// frameIndex reads the index written by fill.
func frameIndex(f []byte) uint32 {
	hi, udp := binary.BigEndian.Uint16(f[4:]), int(f[0]&0x0f)*4
	if f[0]>>4 == 6 {
		hi, udp = binary.BigEndian.Uint16(f[2:]), 40
	}
	return uint32(hi)<<16 | uint32(binary.BigEndian.Uint16(f[udp:]))
}

// tracker hands out frames and proves at the end that every buffer it
// handed out, and every clone seen by a dispatcher, was released exactly
// once: a second Release panics (the link released it) and a Release that
// does not panic finds a leak.
type tracker struct {
	mu   sync.Mutex
	bufs map[*link.Buf]bool
}

func newTracker() *tracker { return &tracker{bufs: map[*link.Buf]bool{}} }

func (tr *tracker) frame(dst netip.Addr, idx uint32, size int) *link.Buf {
	b := link.Get(size)
	fill(b.Bytes(), dst, idx, 20)
	tr.see(b)
	return b
}

func (tr *tracker) see(b *link.Buf) {
	tr.mu.Lock()
	tr.bufs[b] = true
	tr.mu.Unlock()
}

// checkReleased must run when no frame is in flight.
func (tr *tracker) checkReleased(t *testing.T) {
	t.Helper()
	leaks := 0
	for b := range tr.bufs {
		if !alreadyReleased(b) {
			leaks++
		}
	}
	if leaks > 0 {
		t.Errorf("%d of %d buffers were never released", leaks, len(tr.bufs))
	}
}

func alreadyReleased(b *link.Buf) (released bool) {
	defer func() { released = recover() != nil }()
	b.Release()
	return false
}

// recorder is a dispatcher that records what it receives and releases it.
type recorder struct {
	tr   *tracker // if set, sees every buffer (clones included)
	keep bool     // keep a copy of every frame

	mu     sync.Mutex
	calls  int
	idx    []uint32
	at     []time.Time
	frames [][]byte
}

func (r *recorder) Deliver(bufs []*link.Buf) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	for _, b := range bufs {
		if r.tr != nil {
			r.tr.see(b)
		}
		r.idx = append(r.idx, frameIndex(b.Bytes()))
		r.at = append(r.at, now)
		if r.keep {
			r.frames = append(r.frames, append([]byte(nil), b.Bytes()...))
		}
		b.Release()
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.idx)
}

func (r *recorder) indices() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint32(nil), r.idx...)
}

// waitFor polls cond until it holds or five seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pipe returns two attached ports closed at the end of the test, and
// checks that no goroutine of the package outlives them.
func pipe(t *testing.T, fa, fb mem.Faults, ra, rb link.Dispatcher, opts ...mem.Option) (*mem.Port, *mem.Port) {
	t.Helper()
	checkGoroutines(t)
	a, b, err := mem.Pipe(v4a, v4b, fa, fb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	a.Attach(ra)
	b.Attach(rb)
	return a, b
}

// checked holds the tests that already have a goroutine check.
var checked sync.Map

// checkGoroutines registers, once per test, a cleanup that fails if a
// goroutine running this package's code remains, or if there are more
// goroutines than at the start. Cleanups run last-in first-out, so it runs
// after every port made later in the test is closed.
func checkGoroutines(t *testing.T) {
	t.Helper()
	if _, dup := checked.LoadOrStore(t, true); dup {
		return
	}
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		t.Helper()
		var left []string
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			left = packageStacks()
			if len(left) == 0 && runtime.NumGoroutine() <= before {
				return
			}
			if time.Now().After(deadline) {
				break
			}
		}
		t.Errorf("goroutines leaked (%d before, %d now):\n%s",
			before, runtime.NumGoroutine(), strings.Join(left, "\n\n"))
	})
}

// packageStacks returns the stacks of other goroutines that are running
// code of package mem (not its tests).
func packageStacks() []string {
	buf := make([]byte, 1<<20)
	all := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var out []string
	for _, s := range all[1:] { // all[0] is the calling goroutine
		if strings.Contains(s, "rnic/link/mem.(") {
			out = append(out, s)
		}
	}
	return out
}

// sendEach sends frames 0..n-1 to dst one Send call per batch frames.
func sendEach(p *mem.Port, tr *tracker, dst netip.Addr, n, batch, size int) {
	bufs := make([]*link.Buf, 0, batch)
	for i := 0; i < n; i++ {
		bufs = append(bufs, tr.frame(dst, uint32(i), size))
		if len(bufs) == batch || i == n-1 {
			p.Send(bufs)
			bufs = bufs[:0]
		}
	}
}

// inversions counts adjacent pairs delivered out of send order.
func inversions(idx []uint32) int {
	n := 0
	for i := 1; i < len(idx); i++ {
		if idx[i] < idx[i-1] {
			n++
		}
	}
	return n
}

// balance checks the conservation law of the package doc over ports that
// are quiescent.
func balance(t *testing.T, ports ...*mem.Port) {
	t.Helper()
	var in, out uint64
	for _, p := range ports {
		s := p.Stats()
		in += s.TxFrames + s.Duplicated
		out += s.RxFrames + s.Dropped + s.Oversize + s.NoRoute + s.Unattached + s.ClosedDrops + s.Overflow + s.Waiting
	}
	if in != out {
		t.Errorf("frames sent + duplicated = %d, delivered + dropped = %d", in, out)
	}
}
