package udp

import (
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/link"
)

// Siblings: the links of one process that set Options.Siblings reach
// each other in memory. A frame whose destination is the address and
// port of such a link (a sibling: the NICs one "rnic nic serve" runs) is
// handed to that link's dispatcher as its receive path would hand it a
// datagram, with no system call on either side and no copy: the frame,
// buffer and all, is the receiver's. Every other frame goes through the
// socket: each link still serves the peers outside the process.
//
// The frame arrives as it was sent. Through the kernel, an IPv4 frame's
// ID and flags are not reported and the link rebuilds them
// (link.FlagIPRebuilt); here nothing is rebuilt, and a frame the NIC
// built without its ICRC (Intact) is taken without one. The sender's Faults.Loss and the receiver's
// Faults.RxLoss apply as on the socket path.
//
// A receiver whose queue is full (link.Receiver) keeps what it could not
// take in its sibling inbox, in order, and offers it again when the NIC
// drains (Drained), as the socket's buffer holds the datagrams the NIC
// had no room for; a full inbox drops the rest (Stats.SiblingDrops), as
// a full socket buffer does.

// Intact reports whether the NIC may leave the ICRC out of the frames it
// sends (link.Intact): on a link with Siblings, yes — a frame handed to
// a sibling arrives as it was built, in memory, and the sibling's NIC
// takes it unchecked, as checksum offload on a loopback device does;
// a frame that leaves through the socket gets its ICRC first (Send).
// Without Siblings every frame crosses the kernel: no.
func (l *Link) Intact() bool { return l.o.Siblings }

// siblingInbox is how many frames a link holds for a full receiver:
// about what the socket's buffer (sockBuf, 8 MiB) holds of MTU 4096
// frames.
const siblingInbox = 2048

// siblingKey names a link by the address and port frames are sent to.
type siblingKey struct {
	addr [16]byte // IPv4 in the first 4 bytes, or IPv6
	port uint16
	v6   bool
}

// siblings are the open links of the process, copy on write.
var siblings struct {
	mu sync.Mutex
	m  atomic.Pointer[map[siblingKey]*Link]
}

// inbox holds the frames siblings sent to a link that its dispatcher had
// no room for.
type inbox struct {
	mu   sync.Mutex // also orders deliveries against Close
	q    []*link.Buf
	keep []bool // deliver's scratch
	n    atomic.Int32
}

func (l *Link) siblingKey() siblingKey {
	return siblingKey{addr: l.src, port: l.o.Port, v6: l.o.v6}
}

// joinSiblings makes the link reachable in memory by the process's other
// links. A link bound to no particular address (the wildcard) is not:
// its frames' destination says which address it was.
func (l *Link) joinSiblings() {
	if !l.o.Siblings || l.addr.IsUnspecified() {
		return
	}
	siblings.mu.Lock()
	defer siblings.mu.Unlock()
	m := map[siblingKey]*Link{}
	if old := siblings.m.Load(); old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[l.siblingKey()] = l
	siblings.m.Store(&m)
}

// leaveSiblings ends the link's in-memory reach and releases what its
// inbox holds; no sibling delivers to it once it returns.
func (l *Link) leaveSiblings() {
	siblings.mu.Lock()
	if old := siblings.m.Load(); old != nil && (*old)[l.siblingKey()] == l {
		m := map[siblingKey]*Link{}
		for k, v := range *old {
			if v != l {
				m[k] = v
			}
		}
		siblings.m.Store(&m)
	}
	siblings.mu.Unlock()
	l.sib.mu.Lock()
	for _, b := range l.sib.q {
		b.Release()
	}
	l.c.closedDrops.Add(uint64(len(l.sib.q)))
	clear(l.sib.q)
	l.sib.q = l.sib.q[:0]
	l.sib.n.Store(0)
	l.sib.mu.Unlock()
}

// toSiblings hands the frames addressed to a sibling to it and returns
// the others, compacted in place, order kept.
func (l *Link) toSiblings(s *txScratch, m map[siblingKey]*Link, frames []txFrame, t *txTally) []txFrame {
	out := frames[:0]
	var to *Link
	batch := s.sibling[:0]
	for _, f := range frames {
		sib := m[siblingKey{addr: f.dst, port: f.port, v6: l.o.v6}]
		if sib == nil {
			out = append(out, f)
			continue
		}
		if sib != to && len(batch) > 0 {
			s.kick(to, to.fromSibling(batch))
			batch = batch[:0]
		}
		to = sib
		batch = append(batch, f.b)
		t.sibling++
		t.siblingBytes += uint64(f.b.Len())
	}
	if len(batch) > 0 {
		s.kick(to, to.fromSibling(batch))
	}
	clear(batch)
	s.sibling = batch[:0]
	return out
}

// kick records that bytes were handed to sibling to without a wake-up:
// Send kicks its dispatcher once it is done (kickSiblings).
func (s *txScratch) kick(to *Link, bytes int) {
	if bytes == 0 {
		return
	}
	for i := range s.kicks {
		if s.kicks[i].to == to {
			s.kicks[i].bytes += bytes
			return
		}
	}
	s.kicks = append(s.kicks, kick{to, bytes})
}

// kickSiblings kicks the dispatchers of the siblings frames were handed
// to quietly (link.QuietReceiver): with no lock of any link held, the sending
// goroutine may do their work.
func (s *txScratch) kickSiblings() {
	for i, k := range s.kicks {
		if d := k.to.d.Load(); d != nil {
			if kr, ok := d.Dispatcher.(link.QuietReceiver); ok {
				kr.Delivered(k.bytes)
			}
		}
		s.kicks[i] = kick{}
	}
	s.kicks = s.kicks[:0]
}

// kick is a sibling handed frames without a wake-up, and their bytes.
type kick struct {
	to    *Link
	bytes int
}

// fromSibling takes frames a sibling sent: they join the inbox, behind
// what waits there, and the inbox is offered to the dispatcher, without
// waking it if it can be kicked; it returns the bytes handed over then.
func (l *Link) fromSibling(bufs []*link.Buf) int {
	l.sib.mu.Lock()
	defer l.sib.mu.Unlock()
	if l.closed.Load() {
		for _, b := range bufs {
			b.Release()
		}
		l.c.closedDrops.Add(uint64(len(bufs)))
		return 0
	}
	room := siblingInbox - len(l.sib.q)
	if len(bufs) > room {
		for _, b := range bufs[room:] {
			b.Release()
		}
		l.c.siblingDrops.Add(uint64(len(bufs) - room))
		bufs = bufs[:room]
	}
	l.sib.q = append(l.sib.q, bufs...)
	return l.offerInbox(true)
}

// offerInbox hands the inbox to the dispatcher, keeping what a full
// receiver does not take (quiet: without waking it, see deliver), and
// returns the bytes handed over. l.sib.mu is held.
func (l *Link) offerInbox(quiet bool) int {
	if len(l.sib.q) == 0 {
		return 0
	}
	if cap(l.sib.keep) < len(l.sib.q) {
		l.sib.keep = make([]bool, cap(l.sib.q))
	}
	var t rxTally
	k, rest, handed := l.deliver(l.sib.q, l.sib.keep, &t, true, quiet)
	t.addTo(&l.c)
	add(&l.c.siblingRx, uint64(k))
	n := copy(l.sib.q, rest) // what a full receiver did not take, in order
	clear(l.sib.q[n:])
	l.sib.q = l.sib.q[:n]
	l.sib.n.Store(int32(n))
	return handed
}

// drainInbox offers what waits in the inbox again (the NIC drained).
func (l *Link) drainInbox() {
	if l.sib.n.Load() == 0 {
		return
	}
	l.sib.mu.Lock()
	if !l.closed.Load() {
		l.offerInbox(false)
	}
	l.sib.mu.Unlock()
}
