package udp

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GSO limits: segments per datagram (the kernel's UDP_MAX_SEGMENTS is 64
// on older kernels, 128 on newer) and UDP payload bytes per datagram (the
// UDP length field, and the IPv6 payload length, are 16 bits).
const (
	maxGSOSegments = 64
	maxGSOPayload  = 65535 - 8
)

// txCtrlSize is the control buffer of one outgoing message: UDP_SEGMENT
// (u16), IPV6_TCLASS or IP_TOS (int) and IPV6_HOPLIMIT or IP_TTL (int),
// each in its own aligned cmsg.
var txCtrlSize = unix.CmsgSpace(2) + 2*unix.CmsgSpace(4)

// sysTx is a Send call's system-call state: one sendmmsg vector of up to
// Batch messages carrying up to Batch frames, built in place and reused.
// write is bound once so that passing it to RawConn.Write does not
// allocate.
type sysTx struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // IPv4 links use the first 16 bytes as a sockaddr_in
	ctrl  []byte
	first []int  // first[m] is the index of message m's first frame; first[len] ends the last
	scope uint32 // for link-local IPv6 destinations

	// Progress of one sendmmsg vector, shared with write.
	msgs, next int        // messages built; the next one to send
	calls      uint64     // sendmmsg calls made
	failed     []int      // messages the kernel refused, in order
	gsoErr     unix.Errno // set when a GSO message was refused with EIO: stop, retry without GSO
	write      func(fd uintptr) bool
}

func (x *sysTx) init(l *Link) {
	n := l.o.Batch
	x.hdrs = make([]mmsghdr, n)
	x.iovs = make([]unix.Iovec, n)
	x.names = make([]unix.RawSockaddrInet6, n)
	x.ctrl = make([]byte, n*txCtrlSize)
	x.first = make([]int, n+1)
	x.failed = make([]int, 0, n)
	x.write = x.sendmmsg
	x.scope = l.sys.scope
}

// send writes frames, Batch frames per sendmmsg call, and releases every
// buffer. A GSO datagram that the kernel refuses with EIO (the route's
// device cannot checksum it, as wireguard-go found) turns GSO off for the
// link, and its frames are sent again one per datagram.
func (s *sys) send(l *Link, x *sysTx, frames []txFrame, t *txTally) {
	for len(frames) > 0 {
		gso := s.gso.Load()
		nf := x.build(l, frames, gso)
		x.next, x.gsoErr, x.failed, x.calls = 0, 0, x.failed[:0], 0
		err := s.udpRC.Write(x.write)
		runtime.KeepAlive(frames)
		t.batches += x.calls

		// Messages [0, next) went to the kernel, except those that failed.
		sentMsgs := x.next
		if err != nil { // closed while waiting for room: the rest is lost
			t.cls += uint64(x.first[x.msgs] - x.first[sentMsgs])
		}
		if x.gsoErr != 0 {
			s.gso.Store(false)
			l.c.gsoFallbacks.Add(1)
			l.fallback("GSO", x.gsoErr)
			nf = x.first[sentMsgs] // resend from the refused message on
		}
		f := 0
		for m := 0; m < sentMsgs; m++ {
			segs := x.first[m+1] - x.first[m]
			if f < len(x.failed) && x.failed[f] == m {
				t.errs += uint64(segs)
				f++
				continue
			}
			t.sent += uint64(segs)
			if segs > 1 {
				t.gso += uint64(segs)
			}
			for _, fr := range frames[x.first[m]:x.first[m+1]] {
				t.sentBytes += uint64(fr.b.Len())
			}
		}
		for _, fr := range frames[:nf] {
			fr.b.Release()
		}
		frames = frames[nf:]
		if err != nil { // and the frames no vector has carried yet
			for _, fr := range frames {
				fr.b.Release()
			}
			t.cls += uint64(len(frames))
			return
		}
	}
}

// build fills the vector with messages for the first frames (at most
// Batch frames) and returns how many frames they carry. With gso, a run
// of frames to one destination with one traffic class and one UDP payload
// size (the last may be shorter) becomes one message with a UDP_SEGMENT
// control message; the kernel cuts it into the same datagrams.
func (x *sysTx) build(l *Link, frames []txFrame, gso bool) int {
	hl := l.hl
	nf := min(len(frames), len(x.iovs))
	m := 0
	for i := 0; i < nf; m++ {
		fr := &frames[i]
		seg := fr.b.Len() - hl
		j, total := i+1, seg
		if gso {
			for j < nf && j-i < maxGSOSegments {
				g := &frames[j]
				n := g.b.Len() - hl
				if n > seg || total+n > maxGSOPayload || g.port != fr.port || g.tos != fr.tos || g.ttl != fr.ttl || g.dst != fr.dst {
					break
				}
				total += n
				j++
				if n < seg { // a shorter segment can only be the last
					break
				}
			}
		}
		for k := i; k < j; k++ {
			p := frames[k].b.Bytes()[hl:]
			x.iovs[k].Base = &p[0]
			x.iovs[k].SetLen(len(p))
		}
		h := &x.hdrs[m].Hdr
		h.Iov = &x.iovs[i]
		h.SetIovlen(j - i)
		h.Name = (*byte)(unsafe.Pointer(&x.names[m]))
		h.Namelen = x.setName(m, l.o.v6, fr)
		ctrl := x.ctrl[m*txCtrlSize : (m+1)*txCtrlSize]
		n := 0
		if j-i > 1 {
			n += putCmsg(ctrl[n:], unix.SOL_UDP, unix.UDP_SEGMENT, 2, uint32(seg))
		}
		if fr.tos != 0 {
			if l.o.v6 {
				n += putCmsg(ctrl[n:], unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 4, uint32(fr.tos))
			} else {
				n += putCmsg(ctrl[n:], unix.IPPROTO_IP, unix.IP_TOS, 4, uint32(fr.tos))
			}
		}
		// The frame's TTL or hop limit, always: the socket's default is a
		// sysctl, and the wire must carry what the frame (and a capture of
		// it) says.
		if l.o.v6 {
			n += putCmsg(ctrl[n:], unix.IPPROTO_IPV6, unix.IPV6_HOPLIMIT, 4, uint32(fr.ttl))
		} else {
			n += putCmsg(ctrl[n:], unix.IPPROTO_IP, unix.IP_TTL, 4, uint32(fr.ttl))
		}
		h.Control = nil
		if n > 0 {
			h.Control = &ctrl[0]
		}
		h.SetControllen(n)
		h.Flags = 0
		x.first[m] = i
		i = j
	}
	x.msgs = m
	x.first[m] = nf
	return nf
}

// setName writes the destination of message m and returns its length.
func (x *sysTx) setName(m int, v6 bool, fr *txFrame) uint32 {
	sa := &x.names[m]
	if v6 {
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: fr.dst}
		if fr.dst[0] == 0xfe && fr.dst[1]&0xc0 == 0x80 { // link-local: name the link's interface
			sa.Scope_id = x.scope
		}
		putPort(&sa.Port, fr.port)
		return unix.SizeofSockaddrInet6
	}
	sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
	*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte(fr.dst[:4])}
	putPort(&sa4.Port, fr.port)
	return unix.SizeofSockaddrInet4
}

// putPort stores a port in a sockaddr's port field, which holds it in
// network byte order.
func putPort(p *uint16, port uint16) {
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(p))[:], port)
}

// putCmsg writes one control message with a value of size 2 or 4 bytes
// (native byte order) at the start of b and returns its aligned length.
func putCmsg(b []byte, level, typ int32, size int, v uint32) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(size))
	data := b[unix.CmsgLen(0):]
	if size == 2 {
		binary.NativeEndian.PutUint16(data, uint16(v))
	} else {
		binary.NativeEndian.PutUint32(data, v)
	}
	return unix.CmsgSpace(size)
}

// sendmmsg is the RawConn.Write callback: it sends messages [next, msgs),
// returning false (wait until writable) when the socket buffer is full.
// A message the kernel refuses is recorded and skipped, as sendmmsg
// reports an error only for the first message it could not send. The
// call is raw (the scheduler is not told): with MSG_DONTWAIT it never
// waits, and a Syscall lets sysmon hand the processor to another thread
// when a batch's copy passes 20 µs, and the thread take it back after —
// futex wake-ups on every batch of a busy link (go test -bench
// 'Loopback(WriteBW|ReadBW)' ./perftest: 343-368 MB/s with Syscall,
// 618-686 raw, interleaved, three rounds).
func (x *sysTx) sendmmsg(fd uintptr) bool {
	for x.next < x.msgs {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&x.hdrs[x.next])), uintptr(x.msgs-x.next), unix.MSG_DONTWAIT, 0, 0)
		x.calls++
		switch e {
		case 0:
			x.next += int(n)
		case unix.EAGAIN:
			return false
		case unix.EINTR:
		default:
			if e == unix.EIO && x.first[x.next+1]-x.first[x.next] > 1 {
				x.gsoErr = e
				return true
			}
			x.failed = append(x.failed, x.next)
			x.next++
		}
	}
	return true
}
