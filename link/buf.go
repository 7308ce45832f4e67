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
	return b.mem[b.off : b.off+n]
}

// Pull drops n bytes from the front of the frame.
func (b *Buf) Pull(n int) {
	if n > b.n {
		panic("link: Pull beyond frame")
	}
	b.off += n
	b.n -= n
}

// Clone returns a new buffer holding a copy of the frame (used by fault
// injectors that duplicate packets; never on the normal data path).
func (b *Buf) Clone() *Buf {
	c := Get(b.n)
	copy(c.Bytes(), b.Bytes())
	c.Flags = b.Flags
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
	b.pool.Put(b)
}
