package udp_test

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

// Tests send only to loopback: two IPv4 links on 127.0.1.1 and 127.0.1.2
// (one port, 4791 if free), or two IPv6 links on ::1 (two ports). The
// IPv4 pair is not the 127.0.0.1 and 127.0.0.2 the other packages' NICs
// use: go test runs packages at once, and a test here that counts every
// datagram once counted a stray frame of theirs (TestReceiveDrops, raw).
var (
	v4a = netip.MustParseAddr("127.0.1.1")
	v4b = netip.MustParseAddr("127.0.1.2")
	v6  = netip.MustParseAddr("::1")
)

// hdrLen is the IP + UDP header length of a frame.
func hdrLen(f []byte) int {
	if f[0]>>4 == 6 {
		return 48
	}
	return 28
}

// frame returns a RoCEv2 RC WRITE MIDDLE frame from link from to link to,
// with a payload of n bytes made from idx (carried in the PSN), and a
// valid ICRC. The UDP destination port is to's port, so frames between two
// ::1 links on different ports are whole and their ICRC right.
func frame(from, to *udp.Link, idx uint32, n int) *link.Buf {
	r := wire.Route{Src: wire.GIDFromAddr(from.Addr()), Dst: wire.GIDFromAddr(to.Addr()), SrcPort: from.SourcePort()}
	b := link.Get(wire.FrameLen(&r, wire.OpRCWriteMiddle, n))
	fillFrame(b.Bytes(), &r, to.SourcePort(), idx)
	return b
}

// fillFrame writes a whole frame of len(f) bytes on route r, to port dport.
func fillFrame(f []byte, r *wire.Route, dport uint16, idx uint32) {
	hl := r.HeaderLen()
	t := f[hl:]
	wire.BTH(t).Encode(&wire.BTHFields{Opcode: wire.OpRCWriteMiddle, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: wire.PSN(idx & wire.PSNMask)})
	p := t[wire.BTHSize : len(t)-wire.ICRCSize]
	for i := range p {
		p[i] = byte(i*7 + int(idx))
	}
	r.WriteHeaders(f)
	wire.UDP(f[hl-8:]).SetDstPort(dport)
	wire.SetICRC(f)
}

// frameIndex reads the index written by fillFrame (the PSN).
func frameIndex(f []byte) uint32 {
	return uint32(wire.BTH(f[hdrLen(f):]).PSN())
}

// recorder is a dispatcher that keeps a copy of every frame (if keep) and
// its flags, and releases the buffers.
type recorder struct {
	keep bool

	mu     sync.Mutex
	calls  int
	idx    []uint32
	frames [][]byte
	flags  []link.Flags
}

func (r *recorder) Deliver(bufs []*link.Buf) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	for _, b := range bufs {
		r.idx = append(r.idx, frameIndex(b.Bytes()))
		if r.keep {
			r.frames = append(r.frames, append([]byte(nil), b.Bytes()...))
			r.flags = append(r.flags, b.Flags)
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
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pairPorts returns the ports of a test pair: for IPv4 one port for both
// links (4791 unless something on this machine holds it), for IPv6 4791
// (or a free port) and another free port.
func pairPorts(t testing.TB, v6pair bool) (uint16, uint16) {
	t.Helper()
	if !v6pair {
		if portFree(v4a, wire.UDPPort) && portFree(v4b, wire.UDPPort) {
			return wire.UDPPort, wire.UDPPort
		}
		for range 100 {
			p := freePort(t, v4a)
			if portFree(v4b, p) {
				t.Logf("port %d is taken on this machine: both IPv4 links use port %d", wire.UDPPort, p)
				return p, p
			}
		}
		t.Fatalf("no port free on both %v and %v", v4a, v4b)
	}
	pa := uint16(wire.UDPPort)
	if !portFree(v6, pa) {
		pa = freePort(t, v6)
		t.Logf("port %d is taken on ::1: using %d", wire.UDPPort, pa)
	}
	pb := freePort(t, v6)
	for pb == pa {
		pb = freePort(t, v6)
	}
	return pa, pb
}

func portFree(a netip.Addr, port uint16) bool {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func freePort(t testing.TB, a netip.Addr) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// pair opens two links with options oa and ob (Addr and Port filled in),
// attaches da and db, closes both at the end of the test and checks that
// no goroutine of the package outlives them. An IPv4 pair whose Addrs
// are set keeps them and takes free ports: a test that needs its own
// addresses (v4a and v4b are shared by this package's tests) puts its
// links where no other test's frame can land.
func pair(t testing.TB, v6pair bool, oa, ob udp.Options, da, db link.Dispatcher) (*udp.Link, *udp.Link) {
	t.Helper()
	checkGoroutines(t)
	var err error
	for try := 0; ; try++ {
		switch {
		case !v6pair && oa.Addr.IsValid() && ob.Addr.IsValid():
			oa.Port, ob.Port = freePort(t, oa.Addr), freePort(t, ob.Addr)
		default:
			pa, pb := pairPorts(t, v6pair)
			oa.Addr, oa.Port, ob.Addr, ob.Port = v4a, pa, v4b, pb
		}
		if v6pair {
			oa.Addr, ob.Addr = v6, v6
		}
		var a, b *udp.Link
		if a, err = udp.Open(oa); err == nil {
			if b, err = udp.Open(ob); err == nil {
				t.Cleanup(func() { a.Close(); b.Close() })
				if da != nil {
					a.Attach(da)
				}
				if db != nil {
					b.Attach(db)
				}
				return a, b
			}
			a.Close()
		}
		// Another process may have taken a port between the check and
		// the bind: try other ports.
		if !errors.Is(err, syscall.EADDRINUSE) || try == 5 {
			t.Fatal(err)
		}
	}
}

// checked holds the tests that already have a goroutine check.
var checked sync.Map

// checkGoroutines registers, once per test, a cleanup that fails if a
// goroutine running this package's code remains, or if there are more
// goroutines than at the start. Cleanups run last-in first-out, so it runs
// after every link opened later in the test is closed.
func checkGoroutines(t testing.TB) {
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

// packageStacks returns the stacks of other goroutines running code of
// package udp (not its tests).
func packageStacks() []string {
	buf := make([]byte, 1<<20)
	all := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var out []string
	for _, s := range all[1:] { // all[0] is the calling goroutine
		if strings.Contains(s, "rnic/link/udp.(") {
			out = append(out, s)
		}
	}
	return out
}

// tracker proves at the end that every buffer handed to Send was released
// exactly once: a second Release panics (so the link released it), and a
// Release that does not panic finds a leak.
type tracker struct {
	mu   sync.Mutex
	bufs []*link.Buf
}

func (tr *tracker) add(b *link.Buf) *link.Buf {
	tr.mu.Lock()
	tr.bufs = append(tr.bufs, b)
	tr.mu.Unlock()
	return b
}

// checkReleased must run after every link of the test is closed: a
// released buffer may be taken from the pool again by a receive ring
// (which makes it look unreleased) until its link is closed.
func (tr *tracker) checkReleased(t testing.TB) {
	t.Helper()
	leaks := 0
	for _, b := range tr.bufs {
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

// sendN sends frames 0..n-1 from a to b, batch frames per Send call,
// of sizes cycling through sizes, and returns copies of them by index.
func sendN(a, b *udp.Link, n, batch int, sizes []int) map[uint32][]byte {
	sent := make(map[uint32][]byte, n)
	bufs := make([]*link.Buf, 0, batch)
	for i := range n {
		f := frame(a, b, uint32(i), sizes[i%len(sizes)])
		sent[uint32(i)] = append([]byte(nil), f.Bytes()...)
		bufs = append(bufs, f)
		if len(bufs) == batch || i == n-1 {
			a.Send(bufs)
			bufs = bufs[:0]
		}
	}
	return sent
}

// txBalance checks the send-side conservation law of Stats.
func txBalance(t testing.TB, l *udp.Link) {
	t.Helper()
	s := l.Stats()
	out := s.SentFrames + s.Dropped + s.Oversize + s.Mismatch + s.Malformed + s.SendErrors + s.ClosedDrops
	if s.TxFrames != out {
		t.Errorf("TxFrames %d != sent + dropped %d: %+v", s.TxFrames, out, s)
	}
}

// rxBalance checks the receive-side conservation law of Stats.
func rxBalance(t testing.TB, l *udp.Link) {
	t.Helper()
	s := l.Stats()
	out := s.RxFrames + s.RxDropped + s.RxOversize + s.RxMalformed + s.Unattached
	if s.RawRx+s.SocketRx != out {
		t.Errorf("RawRx+SocketRx %d != delivered + dropped %d: %+v", s.RawRx+s.SocketRx, out, s)
	}
}
