package udp

import (
	"encoding/binary"
	"unsafe"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
	"golang.org/x/sys/unix"
)

// rxCtrlSize is the control buffer of one received datagram: SO_RXQ_OVFL
// (u32), IP_TOS (u8) or IPV6_TCLASS (int), IP_TTL or IPV6_HOPLIMIT (int),
// and UDP_GRO (int).
var rxCtrlSize = 4 * unix.CmsgSpace(4)

// groSlot is the size of a receive slot with GRO: the largest UDP payload.
const groSlot = 1 << 16

// maxGROSegments is the most datagrams the kernel merges into one GRO
// super-datagram (UDP_GRO_CNT_MAX).
const maxGROSegments = 64

// maxGROSlots bounds the slots of a GRO ring: each may hold dozens of
// frames, so fewer are needed, and each costs 64 KiB.
const maxGROSlots = 16

// ring is the receive goroutine's state: one recvmmsg vector whose slots
// are link.Bufs (handed to the NIC as they are, with the IP and UDP
// headers written in front of the payload) or, with GRO, fixed 64 KiB
// buffers whose frames are copied out.
type ring struct {
	l   *Link
	raw bool // reading the raw socket: datagrams start at the IP header
	gro bool
	off int // where a datagram lands in its slot's frame: 0 raw, the header length otherwise

	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	ctrl  []byte
	slots []*link.Buf // without GRO
	big   [][]byte    // with GRO

	out     []*link.Buf // frames of the current batch, for Deliver
	keep    []bool      // RxLoss decisions
	pending []*link.Buf // frames the NIC had no room for, oldest first

	n     int        // datagrams the last recvmmsg returned
	errno unix.Errno // its error, if any
	read  func(fd uintptr) bool
	ovfl  uint32 // last SO_RXQ_OVFL value seen
}

func newRing(l *Link, raw, gro bool) *ring {
	r := &ring{l: l, raw: raw, gro: gro && !raw}
	if !raw {
		r.off = l.hl
	}
	n := l.o.Batch
	if r.gro {
		n = min(n, maxGROSlots)
		r.big = make([][]byte, n)
		for i := range r.big {
			r.big[i] = make([]byte, groSlot)
		}
	} else {
		r.slots = make([]*link.Buf, n)
	}
	r.hdrs = make([]mmsghdr, n)
	r.iovs = make([]unix.Iovec, n)
	r.names = make([]unix.RawSockaddrInet6, n)
	r.ctrl = make([]byte, n*rxCtrlSize)
	outCap := n
	if r.gro {
		outCap = n * maxGROSegments
	}
	r.out = make([]*link.Buf, 0, outCap)
	r.keep = make([]bool, outCap)
	for i := range n {
		h := &r.hdrs[i].Hdr
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		if !raw {
			h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		}
		h.Control = &r.ctrl[i*rxCtrlSize]
		if r.gro {
			r.iovs[i].Base = &r.big[i][0]
			r.iovs[i].SetLen(groSlot)
		} else {
			r.refill(i)
		}
	}
	r.read = r.recvmmsg
	return r
}

// refill puts a fresh buffer in slot i.
func (r *ring) refill(i int) {
	b := link.Get(link.MaxFrame)
	r.slots[i] = b
	p := b.Bytes()[r.off:]
	r.iovs[i].Base = &p[0]
	r.iovs[i].SetLen(len(p))
}

// free releases the slots' buffers and the frames still pending.
func (r *ring) free() {
	for i, b := range r.slots {
		if b != nil {
			b.Release()
			r.slots[i] = nil
		}
	}
	for _, b := range r.pending {
		b.Release()
	}
	clear(r.pending)
	r.pending = r.pending[:0]
	r.l.sys.pending.Store(0)
}

// recvmmsg is the RawConn.Read callback: false means "nothing yet, wait
// until readable".
func (r *ring) recvmmsg(fd uintptr) bool {
	for i := range r.hdrs {
		h := &r.hdrs[i].Hdr
		if !r.raw {
			h.Namelen = unix.SizeofSockaddrInet6
		}
		h.SetControllen(rxCtrlSize)
		h.Flags = 0
	}
	for {
		// Raw, as sendmmsg (send_linux.go): MSG_DONTWAIT never waits.
		n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd,
			uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EAGAIN:
			return false
		case unix.EINTR:
			continue
		}
		r.n, r.errno = int(n), e
		return true
	}
}

// routineReceive reads datagrams until Close, turns them into frames and
// hands each batch to the dispatcher in one Deliver call (TryDeliver for a
// NIC with a bounded queue). It shares its ring with Poll: whoever holds
// l.sys.rx takes the batches that are there. When the NIC's queue is full
// it stops reading, so that the socket's buffer holds what comes next, and
// waits for the NIC to drain.
func (l *Link) routineReceive() {
	defer close(l.done)
	rc, raw := l.sys.udpRC, l.sys.rawReceive()
	if raw {
		rc = l.sys.rawRC
	}
	r := newRing(l, raw, l.sys.gro)
	l.sys.rx.Lock()
	l.sys.rx.r, l.sys.rx.rc = r, rc
	l.sys.rx.Unlock()
	defer func() {
		l.sys.rx.Lock()
		r.free()
		l.sys.rx.r = nil
		l.sys.rx.Unlock()
	}()
	// The callback takes every batch waiting and then returns false, so
	// that the runtime poller parks the goroutine until the socket is
	// readable again; it returns true (Read returns) when the NIC is full.
	take := func(fd uintptr) bool {
		l.sys.rx.Lock()
		defer l.sys.rx.Unlock()
		for {
			if !r.offerPending() {
				return true
			}
			if !r.read(fd) {
				return false
			}
			r.deliverBatch()
		}
	}
	for {
		if rc.Read(take) != nil {
			return // closed
		}
		select {
		case <-l.sys.drained:
		case <-l.sys.stop:
			return
		}
	}
}

// Drained is the NIC saying it has taken frames out of its queue
// (link.Drainer): if frames are pending, the receive goroutine offers them
// again and reads on.
func (l *Link) Drained() {
	l.drainInbox()
	if l.sys.pending.Load() == 0 {
		return
	}
	select {
	case l.sys.drained <- struct{}{}:
	default:
	}
}

// Poll takes one batch of the datagrams already queued on the socket, if
// any, without blocking, and delivers their frames (link.Poller). A
// busy-polling NIC calls it: Go's scheduler looks at its network poller
// only when a processor runs out of work, so a receive goroutine parked
// there can wait milliseconds behind a thread that spins. If the receive
// goroutine is taking a batch at the moment, Poll leaves it to it.
func (l *Link) Poll() int {
	if !l.sys.rx.TryLock() {
		return 0
	}
	defer l.sys.rx.Unlock()
	r := l.sys.rx.r
	if r == nil || l.closed.Load() {
		return 0
	}
	before := len(r.pending)
	if !r.offerPending() {
		return before - len(r.pending)
	}
	n := before
	l.sys.rx.rc.Control(func(fd uintptr) {
		if r.read(fd) {
			n += r.deliverBatch()
		}
	})
	return n
}

// offerPending offers the frames the NIC had no room for again and reports
// whether it took them all. The ring's lock is held.
func (r *ring) offerPending() bool {
	if len(r.pending) == 0 {
		return true
	}
	var t rxTally
	k, _, _ := r.l.deliver(r.pending, r.keep, &t, true, false)
	n := copy(r.pending, r.pending[k:])
	clear(r.pending[n:])
	r.pending = r.pending[:n]
	r.l.sys.pending.Store(int32(n))
	return n == 0
}

// deliverBatch turns the datagrams of the last recvmmsg into frames and
// hands them to the dispatcher; it returns how many it delivered. Those
// the NIC had no room for are kept (pending).
func (r *ring) deliverBatch() int {
	l := r.l
	var t rxTally
	if r.errno != 0 {
		t.errs++
		t.addTo(&l.c)
		return 0
	}
	t.batch = 1
	for i := range r.n {
		r.take(i, &t)
	}
	if len(r.keep) < len(r.out) {
		r.keep = make([]bool, cap(r.out))
	}
	n, rest, _ := l.deliver(r.out, r.keep, &t, true, false)
	t.addTo(&l.c)
	if len(rest) > 0 {
		r.pending = append(r.pending, rest...)
		l.sys.pending.Store(int32(len(r.pending)))
	}
	clear(r.out)
	r.out = r.out[:0]
	return n
}

// take turns datagram i into frames on r.out.
func (r *ring) take(i int, t *rxTally) {
	l := r.l
	mh := &r.hdrs[i]
	n := int(mh.Len)
	src, srcPort, tos, ttl, gso := r.parseMeta(i)
	if r.raw {
		t.raw++
	} else {
		t.socket++
	}
	if mh.Hdr.Flags&unix.MSG_TRUNC != 0 {
		t.oversize++
		return
	}
	if r.raw {
		b := r.slots[i]
		b.SetLen(n)
		if l.checkRaw(b.Bytes()) != ok {
			t.malformed++
			return
		}
		r.out = append(r.out, b)
		r.refill(i)
		return
	}
	if !r.gro {
		if n < minPayload {
			t.malformed++
			return
		}
		b := r.slots[i]
		b.SetLen(r.off + n)
		l.rebuild(b, &src, srcPort, tos, ttl)
		r.out = append(r.out, b)
		r.refill(i)
		return
	}
	// GRO: the datagram may hold several frames of gso bytes each (the
	// last may be shorter); each is copied into its own buffer, since a
	// link.Buf cannot share memory.
	p := r.big[i][:n]
	if gso <= 0 || gso >= n {
		gso = n
	} else {
		segs := uint64((n + gso - 1) / gso)
		t.gro += segs
		t.socket += segs - 1
	}
	for len(p) > 0 {
		seg := p[:min(gso, len(p))]
		p = p[len(seg):]
		switch {
		case r.off+len(seg) > link.MaxFrame: // as MSG_TRUNC without GRO
			t.oversize++
			continue
		case len(seg) < minPayload:
			t.malformed++
			continue
		}
		b := link.Get(r.off + len(seg))
		copy(b.Bytes()[r.off:], seg)
		l.rebuild(b, &src, srcPort, tos, ttl)
		r.out = append(r.out, b)
	}
}

// parseMeta returns datagram i's source (socket path) and what its control
// messages say, and records the kernel's drop count.
func (r *ring) parseMeta(i int) (src [16]byte, port uint16, tos, ttl uint8, gso int) {
	ttl = wire.DefaultHopLimit // if the kernel did not say
	h := &r.hdrs[i].Hdr
	if !r.raw {
		sa := &r.names[i]
		if r.l.o.v6 {
			src = sa.Addr
		} else {
			copy(src[:4], (*unix.RawSockaddrInet4)(unsafe.Pointer(sa)).Addr[:])
		}
		port = binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	}
	b := r.ctrl[i*rxCtrlSize : i*rxCtrlSize+int(h.Controllen)]
	for len(b) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		if c.Len < unix.SizeofCmsghdr || int(c.Len) > len(b) {
			break
		}
		data := b[unix.SizeofCmsghdr:c.Len]
		switch {
		case c.Level == unix.SOL_SOCKET && c.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			if v := binary.NativeEndian.Uint32(data); v != r.ovfl {
				r.l.c.kernelDrops.Add(uint64(v - r.ovfl)) // a wrapping counter: the difference is right
				r.ovfl = v
			}
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TOS && len(data) >= 1:
			tos = data[0]
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_TCLASS && len(data) >= 4:
			tos = uint8(binary.NativeEndian.Uint32(data))
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TTL && len(data) >= 4:
			ttl = uint8(binary.NativeEndian.Uint32(data))
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
			ttl = uint8(binary.NativeEndian.Uint32(data))
		case c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && len(data) >= 4:
			gso = int(binary.NativeEndian.Uint32(data))
		}
		adv := unix.CmsgSpace(int(c.Len) - unix.SizeofCmsghdr)
		if adv > len(b) {
			break
		}
		b = b[adv:]
	}
	return
}
