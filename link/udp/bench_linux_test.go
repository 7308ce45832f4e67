package udp_test

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"golang.org/x/sys/unix"
)

// The benchmarks move 4 KiB RDMA payloads: RC WRITE MIDDLE frames whose
// UDP payload is BTH (12) + 4096 + ICRC (4) = 4112 bytes. MB/s counts
// those UDP payload bytes, so that a link and the plain-socket reference,
// which carries datagrams of the same size, are measured on the same
// bytes.
const (
	benchPayload = 4096
	benchDgram   = 12 + benchPayload + 4
	benchBatch   = 32  // frames per Send or sendmmsg, as a NIC engine batches
	benchWindow  = 256 // frames in flight: well under the 8 MiB socket buffers
)

// mover moves frames from one endpoint to another: add queues one frame
// (sending a batch when full, then waiting while too many are in flight),
// drain waits until every frame sent has arrived or been dropped by the
// kernel.
type mover interface {
	add()
	drain()
}

// flow is the window shared by both movers: frames sent, and a wakeup
// from the receiver.
type flow struct {
	tb       testing.TB
	sent     int64
	wake     chan struct{}
	received func() int64 // frames received plus frames the kernel dropped
	timer    *time.Timer
}

func newFlow(tb testing.TB, received func() int64) *flow {
	return &flow{tb: tb, wake: make(chan struct{}, 1), received: received, timer: time.NewTimer(time.Hour)}
}

func (f *flow) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// wait blocks until at most limit frames are in flight.
func (f *flow) wait(limit int64) {
	for deadline := time.Now().Add(5 * time.Second); f.sent-f.received() > limit; {
		f.timer.Reset(time.Millisecond) // kernel drops wake nobody: look again soon
		select {
		case <-f.wake:
		case <-f.timer.C:
			if time.Now().After(deadline) {
				f.tb.Fatalf("stuck: %d sent, %d received or dropped", f.sent, f.received())
			}
		}
	}
}

// linkMover sends frames from src to dst. Each frame is a fresh
// link.Get buffer with the template's headers and ICRC copied in (the
// payload is whatever the buffer holds: a NIC writes it by DMA, the link
// never reads it).
type linkMover struct {
	*flow
	src, dst *udp.Link
	tmpl     *link.Buf
	bufs     []*link.Buf
	got      atomic.Int64
}

func (m *linkMover) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		b.Release()
	}
	m.got.Add(int64(len(bufs)))
	m.signal()
}

func newLinkMover(tb testing.TB, v6 bool, o udp.Options) *linkMover {
	m := &linkMover{}
	m.src, m.dst = pair(tb, v6, o, o, nil, m)
	m.flow = newFlow(tb, func() int64 { return m.got.Load() + int64(m.dst.Stats().KernelDrops) })
	m.tmpl = frame(m.src, m.dst, 0, benchPayload)
	tb.Cleanup(m.tmpl.Release)
	return m
}

func (m *linkMover) add() {
	n, hl := m.tmpl.Len(), m.tmpl.Len()-benchDgram
	f := link.Get(n)
	copy(f.Bytes()[:hl+12], m.tmpl.Bytes())
	copy(f.Bytes()[n-4:], m.tmpl.Bytes()[n-4:])
	m.bufs = append(m.bufs, f)
	if len(m.bufs) == benchBatch {
		m.src.Send(m.bufs)
		m.sent += benchBatch
		m.bufs = m.bufs[:0]
		m.wait(benchWindow)
	}
}

func (m *linkMover) drain() {
	m.src.Send(m.bufs)
	m.sent += int64(len(m.bufs))
	m.bufs = m.bufs[:0]
	m.wait(0)
}

// mmsghdr is struct mmsghdr (the package has its own, which this
// external test cannot name).
type mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
}

// plainMover is the physical reference: the same datagrams between two
// plain UDP sockets (one family, one pair of addresses as the links),
// with sendmmsg and recvmmsg in the same batches and window, and nothing
// else: no frame checks, no header rebuild, no buffer pool, no
// dispatcher.
type plainMover struct {
	*flow
	tx, rx int
	hdrs   []mmsghdr
	queued int
	got    atomic.Int64
}

func newPlainMover(tb testing.TB, ipv6 bool) *plainMover {
	pa, pb := pairPorts(tb, ipv6)
	src, dst := netip.AddrPortFrom(v4a, pa), netip.AddrPortFrom(v4b, pb)
	if ipv6 {
		src, dst = netip.AddrPortFrom(v6, pa), netip.AddrPortFrom(v6, pb)
	}
	m := &plainMover{tx: plainSocket(tb, src), rx: plainSocket(tb, dst)}
	m.flow = newFlow(tb, func() int64 { return m.got.Load() + socketDrops(m.rx) })
	var stop atomic.Bool
	done := make(chan struct{})
	go m.receive(&stop, done)
	tb.Cleanup(func() {
		stop.Store(true)
		<-done
		unix.Close(m.rx)
		unix.Close(m.tx)
	})

	// One payload buffer for all datagrams: the reference copies nothing
	// in user space.
	payload := make([]byte, benchDgram)
	iovs := make([]unix.Iovec, benchBatch)
	m.hdrs = make([]mmsghdr, benchBatch)
	sa, salen := rawSockaddr(dst)
	for i := range m.hdrs {
		iovs[i].Base = &payload[0]
		iovs[i].SetLen(benchDgram)
		h := &m.hdrs[i].Hdr
		h.Iov = &iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(sa))
		h.Namelen = salen
	}
	return m
}

// receive runs recvmmsg into fixed buffers until stop, which it looks at
// every 20 ms (SO_RCVTIMEO): a shutdown does not wake recvmmsg.
func (m *plainMover) receive(stop *atomic.Bool, done chan struct{}) {
	defer close(done)
	tv := unix.Timeval{Usec: 20000}
	unix.SetsockoptTimeval(m.rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	const n = 64
	hdrs := make([]mmsghdr, n)
	iovs := make([]unix.Iovec, n)
	mem := make([]byte, n*link.MaxFrame)
	for i := range hdrs {
		iovs[i].Base = &mem[i*link.MaxFrame]
		iovs[i].SetLen(link.MaxFrame)
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.SetIovlen(1)
	}
	for !stop.Load() {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(m.rx), uintptr(unsafe.Pointer(&hdrs[0])), n, unix.MSG_WAITFORONE, 0, 0)
		if e == 0 {
			m.got.Add(int64(r))
			m.signal()
		}
	}
}

func (m *plainMover) add() {
	if m.queued++; m.queued == benchBatch {
		m.flush()
		m.wait(benchWindow)
	}
}

func (m *plainMover) flush() {
	for off := 0; off < m.queued; {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(m.tx), uintptr(unsafe.Pointer(&m.hdrs[off])), uintptr(m.queued-off), 0, 0, 0)
		if e != 0 {
			m.tb.Fatal(e)
		}
		off += int(r)
	}
	m.sent += int64(m.queued)
	m.queued = 0
}

func (m *plainMover) drain() {
	m.flush()
	m.wait(0)
}

// benchLinks are the link configurations measured.
var benchLinks = []struct {
	name string
	v6   bool
	o    udp.Options
}{
	{"v4/rebuilt", false, udp.Options{Raw: udp.RawOff}},
	{"v4/raw", false, udp.Options{Raw: udp.RawOn}},
	{"v6/plain", true, udp.Options{GSO: udp.Off, GRO: udp.Off}},
	{"v6/gso", true, udp.Options{GSO: udp.On, GRO: udp.Off}},
	{"v6/gso+gro", true, udp.Options{GSO: udp.On, GRO: udp.On}}, // the IPv6 default
}

func skipWithoutRaw(b *testing.B, o udp.Options) {
	if o.Raw != udp.RawOn {
		return
	}
	l, err := udp.Open(udp.Options{Addr: v4a, Port: freePort(b, v4a), Raw: udp.RawOn})
	if err != nil {
		b.Skipf("raw receive: %v", err)
	}
	l.Close()
}

// BenchmarkLink sends 4 KiB frames from one link to the other on
// loopback, send and receive included (link.Get and a header copy on the
// sender, Release in the receiver's dispatcher). ns/op is per frame.
func BenchmarkLink(b *testing.B) {
	for _, tt := range benchLinks {
		b.Run(tt.name, func(b *testing.B) {
			skipWithoutRaw(b, tt.o)
			run(b, newLinkMover(b, tt.v6, tt.o))
		})
	}
}

// BenchmarkPlainUDP is the reference on its own, ns/op per datagram.
func BenchmarkPlainUDP(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		b.Run(map[bool]string{false: "v4", true: "v6"}[v6], func(b *testing.B) {
			run(b, newPlainMover(b, v6))
		})
	}
}

func run(b *testing.B, m mover) {
	b.SetBytes(benchDgram)
	b.ReportAllocs()
	for b.Loop() {
		m.add()
	}
	m.drain()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkLinkVsPlain measures a link and the plain-socket reference of
// the same family in alternation, 2048 frames each per round, so that
// both see the same machine load (the cores are shared), and reports the
// ratio of their frame rates: link/plain.
func BenchmarkLinkVsPlain(b *testing.B) {
	const round = 2048
	for _, tt := range benchLinks {
		b.Run(tt.name, func(b *testing.B) {
			skipWithoutRaw(b, tt.o)
			lm, pm := newLinkMover(b, tt.v6, tt.o), newPlainMover(b, tt.v6)
			var tl, tp time.Duration
			sides := []struct {
				m mover
				d *time.Duration
			}{{lm, &tl}, {pm, &tp}}
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range sides {
					t0 := time.Now()
					for range round {
						s.m.add()
					}
					s.m.drain()
					*s.d += time.Since(t0)
				}
			}
			frames := float64(b.N * round)
			b.ReportMetric(frames/tl.Seconds(), "link-frames/s")
			b.ReportMetric(frames/tp.Seconds(), "plain-frames/s")
			b.ReportMetric(frames*benchDgram/tl.Seconds()/1e6, "link-MB/s")
			b.ReportMetric(frames*benchDgram/tp.Seconds()/1e6, "plain-MB/s")
			b.ReportMetric(tp.Seconds()/tl.Seconds(), "link/plain")
		})
	}
}

// plainSocket returns a blocking UDP socket bound to ap, with the same
// buffer sizes as a link's.
func plainSocket(tb testing.TB, ap netip.AddrPort) int {
	family := unix.AF_INET
	if ap.Addr().Is6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], 8<<20) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], 8<<20)
		}
	}
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
	if family == unix.AF_INET {
		sa = &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	if err := unix.Bind(fd, sa); err != nil {
		tb.Fatal(fmt.Errorf("bind %v: %w", ap, err))
	}
	return fd
}

// rawSockaddr returns ap as a sockaddr for a system call.
func rawSockaddr(ap netip.AddrPort) (unsafe.Pointer, uint32) {
	port := [2]byte{byte(ap.Port() >> 8), byte(ap.Port())}
	if ap.Addr().Is4() {
		sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
		*(*[2]byte)(unsafe.Pointer(&sa.Port)) = port
		return unsafe.Pointer(sa), unix.SizeofSockaddrInet4
	}
	sa := &unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	*(*[2]byte)(unsafe.Pointer(&sa.Port)) = port
	return unsafe.Pointer(sa), unix.SizeofSockaddrInet6
}

// socketDrops reads the socket's drop count (SO_MEMINFO's SK_MEMINFO_DROPS).
func socketDrops(fd int) int64 {
	var mi [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(mi))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0
	}
	return int64(mi[unix.SK_MEMINFO_DROPS])
}
