package link

import "sync"

// Headroom is the space every Buf reserves in front of its frame, so that a
// link can push an outer header (Ethernet for pcap, or a GSO/GRO prefix)
// without moving the frame.
const Headroom = 64

// Size classes of packet buffers, in bytes of frame capacity (headroom not
// counted). The largest RoCE frame is IPv6 (40) + UDP (8) + BTH (12) +
// AtomicETH (28) or RETH+ImmDt (20) + 4096 B payload + pad (3) + ICRC (4),
// well under MaxFrame. BigFrame serves batched (GSO/GRO) socket I/O.
const (
	SmallFrame = 256
	MaxFrame   = 4096 + 256
	BigFrame   = 65536
)

// Buf is one packet buffer: a frame (a RoCEv2 packet from its IP header to
// its ICRC) inside a fixed allocation with headroom. A Buf has exactly one
// owner at a time; Send and Deliver hand ownership over, and the last owner
// calls Release. Buffers come from pools so that the steady data path does
// not allocate.
type Buf struct {
	mem  []byte // whole allocation: Headroom + capacity
	off  int    // start of the frame within mem
	n    int    // frame length
	pool *sync.Pool

	// Flags carry what a link knows about the frame that the frame itself
	// does not say (for example that its IP header was rebuilt by the
	// receiver and cannot be checked by the ICRC).
	Flags Flags

	// Next links buffers into intrusive queues (rx rings, delay lines)
	// without allocating; only the current owner may use it.
	Next *Buf

	// released catches a second Release by the same owner. It is a
	// plain flag: a Buf has one owner at a time, and an atomic here would
	// be a full fence after every packet's payload copy.
	released bool
	// ref, when set, holds the frame's payload in place of the bytes at
	// refAt (see SetRef): memory of the sender's, lent by lenders.
	ref     []byte
	refAt   int
	lenders [2]Lender
	// consumer, when set, is told once that the frame is released
	// (SetConsumer).
	consumer Consumer
}

// Lender is memory a frame's payload may refer to instead of carrying its
// bytes (see Buf.SetRef): a sender's registered region, or its QP. Borrow
// reports whether the memory is still lent and, if so, keeps it so until
// Return; a lender that takes it back (a region deregistered, a QP
// destroyed) waits for the borrows in progress to end, and every later
// Borrow fails. Borrows are short: a copy of one payload, nothing that
// waits on another NIC.
type Lender interface {
	Borrow() bool
	Return()
}

// Consumer learns that a frame sent by reference is done with: whoever
// held it last released it (Release), having copied its payload, dropped
// it or lost it. A sender whose work completes once its frames are sent
// (UC, UD) may give the buffer back to its program only then. Consumed
// runs on the releasing goroutine, possibly a NIC's that holds its own
// engine: it must not block.
type Consumer interface {
	Consumed()
}

// Flags describe a frame's provenance.
type Flags uint8

const (
	// FlagIPRebuilt: the IP and UDP headers were rebuilt by the receiver
	// from socket metadata, so fields the sender's kernel wrote (the IPv4
	// Identification) are unknown and the ICRC cannot be verified.
	FlagIPRebuilt Flags = 1 << iota
	// FlagNoICRC: the sender did not compute the ICRC because its link
	// promised to deliver the frame intact (Intact); the receiver takes
	// it unchecked. A link that changes the frame (a corruption fault) or
	// shows it to anyone (a capture) computes the ICRC first and clears
	// the flag (FixICRC).
	FlagNoICRC
)

var pools = [...]struct {
	size int
	pool sync.Pool
}{
	{size: SmallFrame},
	{size: MaxFrame},
	{size: BigFrame},
}

func init() {
	for i := range pools {
		size := pools[i].size
		p := &pools[i].pool
		p.New = func() any {
			return &Buf{mem: make([]byte, Headroom+size), pool: p}
		}
	}
}

// Get returns a buffer whose frame is n bytes long (contents undefined).
// It panics if n exceeds BigFrame: callers size frames from the MTU.
func Get(n int) *Buf {
	for i := range pools {
		if n <= pools[i].size {
			b := pools[i].pool.Get().(*Buf)
			b.off, b.n, b.Flags, b.Next = Headroom, n, 0, nil
			b.released = false
			return b
		}
	}
	panic("link: frame larger than BigFrame")
}

// Bytes returns the frame.
func (b *Buf) Bytes() []byte { return b.mem[b.off : b.off+b.n : b.off+b.n] }

// Len returns the frame length.
func (b *Buf) Len() int { return b.n }

// Cap returns the largest frame length SetLen accepts.
func (b *Buf) Cap() int { return len(b.mem) - b.off }

// SetLen sets the frame length, keeping its start. It panics past Cap.
func (b *Buf) SetLen(n int) {
	if n < 0 || b.off+n > len(b.mem) {
		panic("link: SetLen out of range")
	}
	b.n = n
}

// Push grows the frame at its front by n bytes of headroom and returns the
// new front (to be filled by the caller).
func (b *Buf) Push(n int) []byte {
	if n > b.off {
		panic("link: Push beyond headroom")
	}
	b.off -= n
	b.n += n
	b.refAt += n // a payload sent by reference stays where it was
	return b.mem[b.off : b.off+n]
}

// Pull drops n bytes from the front of the frame.
func (b *Buf) Pull(n int) {
	if n > b.n {
		panic("link: Pull beyond frame")
	}
	b.off += n
	b.n -= n
	b.refAt -= n
}

// Clone returns a new buffer holding a copy of the frame (used by fault
// injectors that duplicate packets; never on the normal data path). The
// copy of a frame whose consumer waits for it (SetConsumer) carries the
// payload's bytes: the consumer hears of the original only, and the
// memory is the program's again once it has, while the copy may still
// be on its way.
func (b *Buf) Clone() *Buf {
	c := Get(b.n)
	copy(c.Bytes(), b.Bytes())
	c.Flags = b.Flags
	c.ref, c.refAt, c.lenders = b.ref, b.refAt, b.lenders
	if b.consumer != nil && b.Borrow() {
		copy(c.Bytes()[b.refAt:], b.ref)
		b.Return()
		c.ref, c.lenders = nil, [2]Lender{}
	}
	return c
}

// Release returns the buffer to its pool. Releasing twice is a bug in the
// owner and panics, because a buffer in two owners' hands means one of them
// reads or writes memory that is no longer its own.
func (b *Buf) Release() {
	if b.released {
		panic("link: Buf released twice")
	}
	b.released = true
	b.Next = nil
	b.ref, b.lenders = nil, [2]Lender{}
	if c := b.consumer; c != nil {
		b.consumer = nil
		b.pool.Put(b)
		c.Consumed()
		return
	}
	b.pool.Put(b)
}

// Frames sent by reference. Within one process (link/mem) a sender may
// leave a frame's payload in its own registered memory and hand over a
// reference to it: the receiving NIC's DMA engine then copies the bytes
// straight into their target, one copy where carrying them takes two.
// The buffer belongs to the NIC until the work request completes: RC's
// completes only once the responder has placed the bytes (its ACK says
// so), and a sender whose work completes once sent (UC, UD) waits until
// its frames are released instead (SetConsumer). The lenders guard the
// rest: a region
// deregistered or a QP destroyed while frames are in flight takes its
// memory back, and a receiver that finds it gone drops the frame, as a
// wire would have lost it.
//
// Such a frame's bytes at the payload's place are undefined, and it is
// sent FlagNoICRC (its link promised to deliver it intact). A link that
// changes or shows a frame calls FixICRC, which puts the payload's bytes
// in the frame first (Materialize).

// SetRef makes payload, lent by l0 and l1 (either may be nil), the
// frame's payload bytes at offset at of the frame, in place of the
// frame's own bytes there, which are left undefined.
func (b *Buf) SetRef(at int, payload []byte, l0, l1 Lender) {
	if at < 0 || at+len(payload) > b.n {
		panic("link: SetRef out of the frame")
	}
	b.ref, b.refAt, b.lenders = payload, at, [2]Lender{l0, l1}
}

// SetConsumer has c told once that the frame is released (Consumer).
// A frame sent by reference that already has a consumer panics: one
// frame, one sender.
func (b *Buf) SetConsumer(c Consumer) {
	if b.consumer != nil {
		panic("link: frame already has a consumer")
	}
	b.consumer = c
}

// Ref returns the payload a frame refers to and its offset in the frame;
// nil if the frame carries its bytes.
func (b *Buf) Ref() ([]byte, int) { return b.ref, b.refAt }

// Borrow keeps the memory a frame refers to lent until Return, and
// reports whether it still is (every lender). A frame that carries its
// bytes borrows nothing and reports true.
func (b *Buf) Borrow() bool {
	if b.ref == nil {
		return true
	}
	for i, l := range b.lenders {
		if l != nil && !l.Borrow() {
			for _, o := range b.lenders[:i] {
				if o != nil {
					o.Return()
				}
			}
			return false
		}
	}
	return true
}

// Return ends a Borrow that succeeded.
func (b *Buf) Return() {
	if b.ref == nil {
		return
	}
	for _, l := range b.lenders {
		if l != nil {
			l.Return()
		}
	}
}

// Materialize copies the payload a frame refers to into the frame and
// makes it an ordinary frame. It reports false, and leaves the frame as
// it is, if the memory is no longer lent: the receiver will drop it.
func (b *Buf) Materialize() bool {
	if b.ref == nil {
		return true
	}
	if !b.Borrow() {
		return false
	}
	copy(b.Bytes()[b.refAt:], b.ref)
	b.Return()
	b.ref, b.lenders = nil, [2]Lender{}
	return true
}
