package udpref

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sock is a non-blocking UDP socket under the runtime poller, like
// link/udp's.
type sock struct {
	f  *os.File
	rc syscall.RawConn
	sa unix.Sockaddr // the bound address
}

func open(a netip.Addr) (*sock, error) {
	fam := unix.AF_INET
	if a.Is6() && !a.Is4In6() {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, err
	}
	for _, o := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], sockBuf) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], sockBuf)
		}
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	var sa unix.Sockaddr
	if fam == unix.AF_INET {
		unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		sa = &unix.SockaddrInet4{Addr: a.Unmap().As4()}
	} else {
		sa = &unix.SockaddrInet6{Addr: a.As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("udpref: bind %v: %w", a, err)
	}
	if sa, err = unix.Getsockname(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "udpref "+a.String())
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sock{f: f, rc: rc, sa: sa}, nil
}

func (s *sock) close() { s.f.Close() }

// rawName is a sockaddr in kernel layout, for mmsghdr.
type rawName struct {
	buf [unix.SizeofSockaddrInet6]byte
	n   uint32
}

func nameOf(sa unix.Sockaddr) rawName {
	var r rawName
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.buf[0]))
		p.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&p.Port))[:], uint16(a.Port))
		p.Addr = a.Addr
		r.n = unix.SizeofSockaddrInet4
	case *unix.SockaddrInet6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(&r.buf[0]))
		p.Family = unix.AF_INET6
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&p.Port))[:], uint16(a.Port))
		p.Addr = a.Addr
		r.n = unix.SizeofSockaddrInet6
	}
	return r
}

// mmsg is a batch of datagram buffers with their headers.
type mmsg struct {
	hdrs []mmsghdr
	iovs []unix.Iovec
	bufs [][]byte
	ctrl [][]byte
}

func newMmsg(n, size int, name *rawName, ctrl bool) *mmsg {
	m := &mmsg{hdrs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n), bufs: make([][]byte, n), ctrl: make([][]byte, n)}
	for i := range n {
		m.bufs[i] = make([]byte, size)
		m.iovs[i].Base = &m.bufs[i][0]
		m.iovs[i].SetLen(size)
		h := &m.hdrs[i].Hdr
		h.Iov = &m.iovs[i]
		h.SetIovlen(1)
		if name != nil {
			h.Name = &name.buf[0]
			h.Namelen = name.n
		}
		if ctrl {
			m.ctrl[i] = make([]byte, unix.CmsgSpace(4))
		}
	}
	return m
}

// sendmmsg sends m's first n datagrams, waiting for socket space.
func (s *sock) sendmmsg(m *mmsg, n int) error {
	for off := 0; off < n; {
		var sent int
		var serr error
		err := s.rc.Write(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[off])), uintptr(n-off), 0, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			if e != 0 {
				serr = e
			}
			sent = int(r)
			return true
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("udpref: sendmmsg: %w", serr)
		}
		off += sent
	}
	return nil
}

// recvmmsg receives up to len(m.hdrs) datagrams, waiting for the first.
// It returns how many, their total bytes and the kernel's drop counter
// from the last one (SO_RXQ_OVFL).
func (s *sock) recvmmsg(m *mmsg) (n int, bytes int64, ovfl uint32, ok bool, err error) {
	for i := range m.hdrs {
		h := &m.hdrs[i].Hdr
		if m.ctrl[i] != nil {
			h.Control = &m.ctrl[i][0]
			h.SetControllen(len(m.ctrl[i]))
		}
	}
	var rerr error
	err = s.rc.Read(func(fd uintptr) bool {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.hdrs)), 0, 0, 0)
		if e == unix.EAGAIN {
			return false
		}
		if e != 0 {
			rerr = e
		}
		n = int(r)
		return true
	})
	if err != nil {
		return 0, 0, 0, false, err
	}
	if rerr != nil {
		return 0, 0, 0, false, fmt.Errorf("udpref: recvmmsg: %w", rerr)
	}
	for i := range n {
		bytes += int64(m.hdrs[i].Len)
		h := &m.hdrs[i].Hdr
		if h.Controllen == 0 {
			continue
		}
		cms, perr := unix.ParseSocketControlMessage(m.ctrl[i][:h.Controllen])
		if perr != nil {
			continue
		}
		for _, c := range cms {
			if c.Header.Level == unix.SOL_SOCKET && c.Header.Type == unix.SO_RXQ_OVFL && len(c.Data) >= 4 {
				ovfl, ok = *(*uint32)(unsafe.Pointer(&c.Data[0])), true
			}
		}
	}
	return n, bytes, ovfl, ok, nil
}

// Stream moves o.Count datagrams of o.Size bytes from o.Src to o.Dst and
// measures the rate at which they arrive.
func Stream(ctx context.Context, o StreamOptions) (StreamResult, error) {
	if o.Batch <= 0 {
		o.Batch = 64
	}
	if o.Window <= 0 {
		o.Window = 1024
	}
	if o.Size <= 0 || o.Size > 65507 || o.Count <= 0 {
		return StreamResult{}, fmt.Errorf("udpref: size %d, count %d", o.Size, o.Count)
	}
	tx, err := open(o.Src)
	if err != nil {
		return StreamResult{}, err
	}
	defer tx.close()
	rx, err := open(o.Dst)
	if err != nil {
		return StreamResult{}, err
	}
	defer rx.close()

	var got atomic.Int64 // datagrams received or dropped by the kernel
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	var res StreamResult
	var last time.Time
	go func() {
		m := newMmsg(o.Batch, o.Size, nil, true)
		for int(got.Load()) < o.Count {
			n, b, ovfl, ok, err := rx.recvmmsg(m)
			if err != nil {
				done <- err
				return
			}
			res.Datagrams += n
			res.Bytes += b
			if ok {
				res.Drops = int64(ovfl) // the socket is new: its counter started at 0
			}
			last = time.Now()
			got.Store(int64(res.Datagrams) + res.Drops)
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		done <- nil
	}()

	name := nameOf(rx.sa)
	m := newMmsg(o.Batch, o.Size, &name, false)
	start := time.Now()
	tick := time.NewTicker(time.Millisecond) // kernel drops wake nobody: look again soon
	defer tick.Stop()
	for sent := 0; sent < o.Count; {
		for sent-int(got.Load()) > o.Window-o.Batch {
			select {
			case <-wake:
			case <-tick.C:
			case err := <-done:
				if err == nil {
					err = fmt.Errorf("udpref: receiver stopped early")
				}
				return res, err
			case <-ctx.Done():
				rx.close()
				<-done
				return res, ctx.Err()
			}
		}
		n := min(o.Batch, o.Count-sent)
		if err := tx.sendmmsg(m, n); err != nil {
			rx.close()
			<-done
			return res, err
		}
		sent += n
	}
	select {
	case err := <-done:
		if err != nil {
			return res, err
		}
	case <-ctx.Done():
		rx.close()
		<-done
		return res, ctx.Err()
	}
	res.Elapsed = last.Sub(start)
	return res, nil
}

// PingPong sends a datagram of size bytes from a to b and back, iters
// times, and returns each round trip. Each end waits for its datagram in
// recvmmsg under the poller, as link/udp's receive loop does.
func PingPong(ctx context.Context, a, b netip.Addr, size, iters int) (PingPongResult, error) {
	if size <= 0 || size > 65507 || iters <= 0 {
		return PingPongResult{}, fmt.Errorf("udpref: size %d, iters %d", size, iters)
	}
	sa, err := open(a)
	if err != nil {
		return PingPongResult{}, err
	}
	defer sa.close()
	sb, err := open(b)
	if err != nil {
		return PingPongResult{}, err
	}
	defer sb.close()
	stop := context.AfterFunc(ctx, func() { sa.close(); sb.close() })
	defer stop()

	echo := make(chan error, 1)
	go func() {
		toA := nameOf(sa.sa)
		in := newMmsg(1, size, nil, false)
		out := newMmsg(1, size, &toA, false)
		for range iters {
			if _, _, _, _, err := sb.recvmmsg(in); err != nil {
				echo <- err
				return
			}
			if err := sb.sendmmsg(out, 1); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	toB := nameOf(sb.sa)
	in := newMmsg(1, size, nil, false)
	out := newMmsg(1, size, &toB, false)
	res := PingPongResult{RTTs: make([]time.Duration, 0, iters)}
	err = func() error {
		for range iters {
			t0 := time.Now()
			if err := sa.sendmmsg(out, 1); err != nil {
				return err
			}
			if _, _, _, _, err := sa.recvmmsg(in); err != nil {
				return err
			}
			res.RTTs = append(res.RTTs, time.Since(t0))
		}
		return nil
	}()
	if err != nil {
		sb.close() // stop the echo
	}
	if eerr := <-echo; err == nil {
		err = eerr
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err() // the sockets failed because the context closed them
	}
	return res, err
}
