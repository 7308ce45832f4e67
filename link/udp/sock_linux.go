package udp

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// sys holds a link's sockets on Linux. Each is a non-blocking socket
// wrapped in an os.File, so that system calls go through the runtime's
// poller (syscall.RawConn): a receive waits without holding a thread, and
// Close wakes it.
type sys struct {
	udp   *os.File // bound to Addr:Port; sends, and receives unless raw is set
	udpRC syscall.RawConn
	raw   *os.File // AF_INET raw socket for IPPROTO_UDP, or nil
	rawRC syscall.RawConn
	gso   atomic.Bool // send with UDP_SEGMENT (IPv6 only)
	gro   bool        // UDP_GRO is on: the UDP socket may return super-datagrams
	scope uint32      // interface index of a link-local IPv6 Addr, for link-local destinations

	// rx is the receive ring, shared by the receive goroutine and Poll.
	rx struct {
		sync.Mutex
		r  *ring           // nil until the goroutine starts, and after it returns
		rc syscall.RawConn // the socket r reads
	}
	// The NIC's queue was full: frames wait in the ring (pending) and the
	// goroutine stops reading until the NIC drains.
	pending atomic.Int32  // len(r.pending)
	drained chan struct{} // cap 1: the NIC took frames out of its queue
	stop    chan struct{} // closed by close: a goroutine waiting for drained returns
}

// rawReceive reports whether frames come through the raw socket.
func (s *sys) rawReceive() bool { return s.raw != nil }

// sockBuf is the socket buffer size asked for: a few milliseconds of
// 4 KiB frames at 10 Gb/s, so that a burst survives a scheduling delay of
// the receive goroutine.
const sockBuf = 8 << 20

// open makes the link's sockets. Raw receive is tried first: if it works,
// the UDP socket gets its drop-all filter before it binds, so that it never
// queues a datagram.
func (s *sys) open(l *Link) (err error) {
	s.drained = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	o := &l.o
	var rawFD = -1
	defer func() {
		if err != nil {
			s.close()
			if rawFD >= 0 {
				unix.Close(rawFD)
			}
		}
	}()
	switch {
	case o.v6 || o.Raw == Off:
	case o.GRO == On: // explicit On beats Auto (resolve refuses RawOn with GRO On)
		l.fallback("raw", errRawGRO)
	default:
		rawFD, err = openRawIPv4([4]byte(l.src[:4]), o.Port)
		if err != nil {
			if o.Raw == On {
				return &FeatureError{Feature: "raw", Err: err}
			}
			l.fallback("raw", err)
			rawFD, err = -1, nil
		}
	}
	fd, scope, err := openUDP(l, rawFD >= 0)
	if err != nil {
		return err
	}
	if s.udp, s.udpRC, err = pollable(fd, "udp "+o.Addr.String()); err != nil {
		return err
	}
	s.scope = scope
	if rawFD >= 0 {
		fd := rawFD
		rawFD = -1 // pollable owns it now, and closes it on failure
		if s.raw, s.rawRC, err = pollable(fd, "raw "+o.Addr.String()); err != nil {
			return err
		}
		l.feat.Raw = true
	}

	// GSO: IPv6 only (ErrGSOIPv4), if the kernel knows UDP_SEGMENT.
	if o.v6 && o.GSO != Off {
		if _, err := unix.GetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT); err != nil {
			if o.GSO == On {
				return &FeatureError{Feature: "GSO", Err: err}
			}
			l.fallback("GSO", err)
		} else {
			s.gso.Store(true)
			l.feat.GSO = true
		}
	}
	// GRO: on the socket receive path; Auto means IPv6, whose peers send
	// GSO. Enabled after bind only matters for datagrams queued before it,
	// which are then plain datagrams.
	if s.raw == nil && (o.GRO == On || o.GRO == Auto && o.v6) {
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
			if o.GRO == On {
				return &FeatureError{Feature: "GRO", Err: err}
			}
			l.fallback("GRO", err)
		} else {
			s.gro = true
			l.feat.GRO = true
		}
	}
	return nil
}

// openUDP makes the link's UDP socket, bound to Addr:Port, with DF set so
// that the kernel writes IPv4 ID 0 (ip_select_ident_segs: an unconnected
// socket and DF give ID 0), with no IPv4 UDP checksum, and asks for the
// receive metadata the rebuilt headers need (traffic class, TTL).
func openUDP(l *Link, rawReceive bool) (fd int, scope uint32, err error) {
	o := &l.o
	family := unix.AF_INET
	if o.v6 {
		family = unix.AF_INET6
	}
	fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, fmt.Errorf("udp: socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	type opt struct {
		level, name, value int
		what               string
	}
	opts := []opt{{unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"}}
	if o.v6 {
		opts = append(opts,
			opt{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1, "IPV6_V6ONLY"},
			opt{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER"},
			opt{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
			opt{unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT"})
	} else {
		// SO_NO_CHECK: the kernel sends UDP checksum 0, which is what the
		// NIC's frames carry and what rxe sends (the ICRC protects the
		// packet), so that a capture of the frames is what the wire
		// carried. IPv6 must carry a checksum (and GSO needs one): there
		// the kernel computes it, and WireHeaders tells a capture.
		opts = append(opts,
			opt{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER"},
			opt{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
			opt{unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL"},
			opt{unix.SOL_SOCKET, unix.SO_NO_CHECK, 1, "SO_NO_CHECK"})
	}
	for _, p := range opts {
		if err := unix.SetsockoptInt(fd, p.level, p.name, p.value); err != nil {
			return -1, 0, fmt.Errorf("udp: setsockopt %s: %w", p.what, err)
		}
	}
	if o.v6 {
		// No automatic flow labels (a hash the kernel would put on the
		// wire in place of the frame's 0), where the kernel has the
		// option (Linux 4.3); the ICRC masks the flow label, so an older
		// kernel only makes captures differ from the wire in it.
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_AUTOFLOWLABEL, 0)
	}
	setBuffers(fd, !rawReceive)
	if rawReceive {
		if err := attachFilter(fd, dropAll); err != nil {
			return -1, 0, fmt.Errorf("udp: drop-all filter on the UDP socket: %w", err)
		}
	}
	var sa unix.Sockaddr
	if o.v6 {
		sa6 := &unix.SockaddrInet6{Port: int(o.Port), Addr: l.src}
		if z := o.Addr.Zone(); z != "" {
			if sa6.ZoneId, err = zoneIndex(z); err != nil {
				return -1, 0, err
			}
			scope = sa6.ZoneId
		}
		sa = sa6
	} else {
		sa = &unix.SockaddrInet4{Port: int(o.Port), Addr: [4]byte(l.src[:4])}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return -1, 0, fmt.Errorf("udp: bind %v: %w", netAddrPort(o), err)
	}
	return fd, scope, nil
}

// openRawIPv4 makes the raw receive socket: AF_INET, IPPROTO_UDP, bound
// to addr (so the kernel hands it only packets to addr), filtered to
// addr:port. It needs CAP_NET_RAW; without it the error wraps EPERM.
func openRawIPv4(addr [4]byte, port uint16) (fd int, err error) {
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("raw socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	if err := attachFilter(fd, rawIPv4Filter(addr, port)); err != nil {
		return -1, fmt.Errorf("raw socket filter: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); err != nil {
		return -1, fmt.Errorf("raw socket SO_RXQ_OVFL: %w", err)
	}
	setBuffers(fd, true)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr}); err != nil {
		return -1, fmt.Errorf("raw socket bind: %w", err)
	}
	return fd, nil
}

// setBuffers enlarges the socket buffers: with the privileged option if
// the process has CAP_NET_ADMIN (it ignores net.core.rmem_max), else as far
// as the sysctl limit allows. Failure is not fatal: small buffers cost
// drops under bursts (KernelDrops), not correctness.
func setBuffers(fd int, receive bool) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sockBuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sockBuf)
	}
	if !receive {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, sockBuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, sockBuf)
	}
}

// pollable wraps a non-blocking socket into an os.File registered with the
// runtime poller and returns its RawConn. The File owns fd from then on.
func pollable(fd int, name string) (*os.File, syscall.RawConn, error) {
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, rc, nil
}

// close closes the sockets, which wakes a receive waiting in the poller.
func (s *sys) close() error {
	if s.stop != nil {
		close(s.stop)
	}
	var err error
	if s.raw != nil {
		err = s.raw.Close()
	}
	if s.udp != nil {
		if e := s.udp.Close(); err == nil {
			err = e
		}
	}
	return err
}

func zoneIndex(zone string) (uint32, error) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifc, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, fmt.Errorf("udp: zone %q: %w", zone, err)
	}
	return uint32(ifc.Index), nil
}
