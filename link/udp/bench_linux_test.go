package udp_test

import (
	"net"
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
// those UDP payload bytes, so a link and the plain-socket reference that
// carries datagrams of the same size are compared on the same bytes; the
// ratio of their frames/s is the link's efficiency.
const (
	benchPayload = 4096
	benchDgram   = 12 + benchPayload + 4
	benchBatch   = 32  // frames per Send, as a NIC engine batches
	benchWindow  = 256 // frames in flight: well under the 8 MiB socket buffers
)

// counter is a dispatcher that releases frames, counts them and wakes the
// sender when it waits for the window to open.
type counter struct {
	n    atomic.Int64
	wake chan struct{}
}

func (c *counter) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		b.Release()
	}
	c.n.Add(int64(len(bufs)))
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// window blocks until fewer than limit frames are in flight (sent but
// neither received nor dropped by the kernel), polling drops when idle.
func window(sent int64, limit int64, received func() int64, wake chan struct{}, tb testing.TB) {
	for deadline := time.Now().Add(5 * time.Second); sent-received() > limit; {
		select {
		case <-wake:
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				tb.Fatalf("stuck: %d sent, %d received or dropped", sent, received())
			}
		}
	}
}

// BenchmarkLink sends 4 KiB frames from one link to the other on
// loopback, send and receive included (link.Get and a header copy on the
// sender, Release in the receiver's dispatcher). ns/op is per frame.
func BenchmarkLink(b *testing.B) {
	tests := []struct {
		name string
		v6   bool
		o    udp.Options
	}{
		{"v4/rebuilt", false, udp.Options{Raw: udp.RawOff}},
		{"v4/raw", false, udp.Options{Raw: udp.RawOn}},
		{"v6/plain", true, udp.Options{GSO: udp.Off, GRO: udp.Off}},
		{"v6/gso", true, udp.Options{GSO: udp.On, GRO: udp.Off}},
		{"v6/gso+gro", true, udp.Options{GSO: udp.On, GRO: udp.On}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			c := &counter{wake: make(chan struct{}, 1)}
			if tt.o.Raw == udp.RawOn {
				if l, err := udp.Open(udp.Options{Addr: v4a, Port: freePort(b, v4a), Raw: udp.RawOn}); err != nil {
					b.Skipf("raw receive: %v", err)
				} else {
					l.Close()
				}
			}
			src, dst := pair(b, tt.v6, tt.o, tt.o, nil, c)
			tmpl := frame(src, dst, 0, benchPayload)
			defer tmpl.Release()
			hl := tmpl.Len() - benchDgram
			received := func() int64 { return c.n.Load() + int64(dst.Stats().KernelDrops) }
			bufs := make([]*link.Buf, 0, benchBatch)
			var sent int64
			b.SetBytes(benchDgram)
			b.ReportAllocs()
			for b.Loop() {
				f := link.Get(tmpl.Len())
				copy(f.Bytes()[:hl+12], tmpl.Bytes()) // headers: the payload bytes are whatever the buffer holds
				copy(f.Bytes()[tmpl.Len()-4:], tmpl.Bytes()[tmpl.Len()-4:])
				bufs = append(bufs, f)
				if len(bufs) == benchBatch {
					src.Send(bufs)
					sent += benchBatch
					bufs = bufs[:0]
					window(sent, benchWindow, received, c.wake, b)
				}
			}
			src.Send(bufs)
			sent += int64(len(bufs))
			window(sent, 0, received, c.wake, b)
			reportFrames(b)
			if k := dst.Stats().KernelDrops; k > 0 {
				b.Logf("kernel drops: %d of %d", k, sent)
			}
		})
	}
}

func reportFrames(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkPlainUDP is the physical reference measured in the same run:
// the same datagrams (4112 bytes) between two plain UDP sockets on
// 127.0.0.1 and 127.0.0.2, with sendmmsg and recvmmsg in the same batches
// and window, and nothing else: no frame checks, no header rebuild, no
// buffer pool, no dispatcher.
func BenchmarkPlainUDP(b *testing.B) {
	pa, pb := pairPorts(b, false)
	tx := plainSocket(b, netip.AddrPortFrom(v4a, pa), 0)
	rx := plainSocket(b, netip.AddrPortFrom(v4b, pb), 8<<20)
	var got atomic.Int64
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { // the receiver: recvmmsg into fixed buffers until closed
		defer close(done)
		const n = 64
		hdrs := make([]unix.Mmsghdr, n)
		iovs := make([]unix.Iovec, n)
		mem := make([]byte, n*link.MaxFrame)
		for i := range hdrs {
			iovs[i].Base = &mem[i*link.MaxFrame]
			iovs[i].SetLen(link.MaxFrame)
			hdrs[i].Hdr.Iov = &iovs[i]
			hdrs[i].Hdr.SetIovlen(1)
		}
		for {
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(rx), uintptr(unsafe.Pointer(&hdrs[0])), n, unix.MSG_WAITFORONE, 0, 0)
			if e == unix.EINTR || e == unix.EAGAIN {
				continue
			}
			if e != 0 || r == 0 {
				return // shut down
			}
			got.Add(int64(r))
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	defer func() {
		unix.Shutdown(rx, unix.SHUT_RDWR) // wakes the receiver
		<-done
		unix.Close(rx)
		unix.Close(tx)
	}()

	hdrs := make([]unix.Mmsghdr, benchBatch)
	iovs := make([]unix.Iovec, benchBatch)
	payload := make([]byte, benchDgram)
	dst := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: v4b.As4()}
	*(*[2]byte)(unsafe.Pointer(&dst.Port)) = [2]byte{byte(pb >> 8), byte(pb)}
	for i := range hdrs {
		iovs[i].Base = &payload[0]
		iovs[i].SetLen(benchDgram)
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.SetIovlen(1)
		hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&dst))
		hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
	received := func() int64 { return got.Load() + socketDrops(rx) }
	var sent, queued int64
	b.SetBytes(benchDgram)
	b.ReportAllocs()
	for b.Loop() {
		if queued++; queued == benchBatch {
			for off := 0; off < benchBatch; {
				r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(tx), uintptr(unsafe.Pointer(&hdrs[off])), uintptr(benchBatch-off), 0, 0, 0)
				if e != 0 {
					b.Fatal(e)
				}
				off += int(r)
			}
			sent += benchBatch
			queued = 0
			window(sent, benchWindow, received, wake, b)
		}
	}
	window(sent, 0, received, wake, b)
	reportFrames(b)
}

// BenchmarkUDPConn is the naive Go reference: net.UDPConn, one datagram
// per system call each way.
func BenchmarkUDPConn(b *testing.B) {
	pa, pb := pairPorts(b, false)
	tx, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(v4a, pa)))
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Close()
	rx, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(v4b, pb)))
	if err != nil {
		b.Fatal(err)
	}
	rx.SetReadBuffer(8 << 20)
	var got atomic.Int64
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, link.MaxFrame)
		for {
			if _, _, err := rx.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			got.Add(1)
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	defer func() { rx.Close(); <-done }()
	payload := make([]byte, benchDgram)
	to := netip.AddrPortFrom(v4b, pb)
	var sent int64
	b.SetBytes(benchDgram)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tx.WriteToUDPAddrPort(payload, to); err != nil {
			b.Fatal(err)
		}
		if sent++; sent%benchBatch == 0 {
			window(sent, benchWindow, got.Load, wake, b)
		}
	}
	window(sent, 0, got.Load, wake, b)
	reportFrames(b)
}

// plainSocket returns a blocking UDP socket bound to ap.
func plainSocket(b *testing.B, ap netip.AddrPort, rcvbuf int) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	if rcvbuf > 0 && unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		b.Fatal(err)
	}
	return fd
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
