package transport

import (
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/queue"
)

// The work queues are rings in host memory shared by the application
// (producer) and the NIC (consumer), as on hardware: the application writes
// a WQE into the slot at the producer index and publishes it by advancing
// the index (the doorbell record); the NIC reads slots below the producer
// index and frees them by advancing the consumer index. The atomics give the
// same ordering a doorbell record's memory barrier gives on hardware.
//
// A send queue's slots are in the one format of the queues in host memory
// (internal/queue): a Go program's PostSend encodes its work requests into
// them, as a C program's library does into its rings. The engine fetches a
// WQE from its slot when the requester comes to it (fetchSend): it decodes
// the slot once into its own copy, the WQE's context in wqe and sge, which
// it checks and works from; the slot's memory is the application's again
// once the WQE is retired.

// sendRing is a send queue.
type sendRing struct {
	post    sync.Mutex // ibv_post_send is thread safe: one poster at a time
	mem     []byte     // depth slots of slotLen bytes: host memory, the application's
	slotLen uint32
	wqe     []sendWQE // the engine's copy of each fetched WQE, with its progress
	sge     []SGE     // maxSGE slots per WQE: the fetched SGLs
	// own: the ring is the library's (no RingMem), written only by
	// writeSendWQE, whose check decodes each WQE into wqe and sge before
	// it publishes it: the engine takes those and does not decode the
	// slot a second time. An application's ring (RingMem) is decoded at
	// fetch: what it wrote is not trusted.
	own       bool
	depth     uint32
	maxSGE    uint32
	maxInline uint32
	// pi is the producer index: piOwn, or the application's own word
	// (RingMem.PI), which it may write anything into: the engine reads it,
	// never trusts it (fetchSend).
	pi      *atomic.Uint32
	piOwn   atomic.Uint32
	ci      atomic.Uint32  // retired (completer): the engine's, authoritative
	ciPub   *atomic.Uint32 // where ci is published for the application, or nil
	fetched uint32         // engine-owned: WQEs below it are in wqe
	// bad: the producer index was one the ring never had (more than
	// its depth past the consumer index); nothing more is fetched.
	bad bool
}

// RingMem is a queue's slots in memory an application shares with the
// NIC (a host interface's ring, which a C program's library writes): the
// engine reads its slots there and its producer index from PI, and
// publishes its consumer index to CI (if not nil), the slots the
// application may write again. The slot count, len(Mem)/SlotLen, is the
// queue's depth.
type RingMem struct {
	Mem     []byte
	SlotLen uint32
	PI, CI  *atomic.Uint32
	// Done, on a QP's receive queue, is where the engine publishes the
	// receive WQEs retired (their CQEs written, flushed ones too): the
	// application keeps at most the queue's depth posted and not
	// retired, since a WQE taken off the ring is the responder's until
	// its completion.
	Done *atomic.Uint32
}

// fits reports whether m is a ring of depth slots of at least header
// bytes each (8-byte aligned), with a producer index.
func (m *RingMem) fits(depth uint32, header int) bool {
	return m.PI != nil && depth > 0 && m.SlotLen >= uint32(header) && m.SlotLen%8 == 0 &&
		uint64(len(m.Mem)) == uint64(depth)*uint64(m.SlotLen)
}

func newSendRing(depth, maxSGE, maxInline uint32, m *RingMem) *sendRing {
	r := &sendRing{
		wqe:       make([]sendWQE, depth),
		sge:       make([]SGE, int(depth)*int(maxSGE)),
		depth:     depth,
		maxSGE:    maxSGE,
		maxInline: maxInline,
	}
	r.pi, r.own = &r.piOwn, m == nil
	if m != nil {
		r.mem, r.slotLen, r.pi, r.ciPub = m.Mem, m.SlotLen, m.PI, m.CI
		return r
	}
	r.slotLen = uint32(queue.WQESize(int(maxSGE), int(maxInline)))
	r.mem = make([]byte, int(depth)*int(r.slotLen))
	return r
}

// setCI retires the WQEs below ci and publishes it.
func (r *sendRing) setCI(ci uint32) {
	r.ci.Store(ci)
	if r.ciPub != nil {
		r.ciPub.Store(ci)
	}
}

func (r *sendRing) slot(i uint32) *sendWQE { return &r.wqe[i%r.depth] }

// slotSGE returns the room for ring index i's fetched SGL.
func (r *sendRing) slotSGE(i uint32) []SGE {
	return r.sge[(i%r.depth)*r.maxSGE:][:r.maxSGE]
}

// slotMem returns the memory of ring index i's slot.
func (r *sendRing) slotMem(i uint32) []byte {
	o := (i % r.depth) * r.slotLen
	return r.mem[o : o+r.slotLen : o+r.slotLen]
}

// after reports whether ring index a is past b (indices are free-running
// uint32 counters; they are never more than depth apart).
func (r *sendRing) after(a, b uint32) bool { return int32(a-b) > 0 }

func (r *sendRing) sges(i uint32) []SGE {
	s := (i % r.depth) * r.maxSGE
	w := &r.wqe[i%r.depth]
	return r.sge[s : s+uint32(w.nsge)]
}

// inlineData returns a fetched inline WQE's payload: in its slot, where
// the poster put it (its length was checked against the slot at fetch).
func (r *sendRing) inlineData(i uint32) []byte {
	return r.slotMem(i)[queue.WQEHeaderLen:][:r.wqe[i%r.depth].length]
}

// recvRing is a receive queue, or the ring of a shared receive queue: its
// slots in the one format (internal/queue's receive WQEs), a Go program's
// PostRecv writing them (or a C program's library, in a ring it shares
// with the NIC: RingMem), the responder taking the oldest when a message
// needs one (takeRecv), which decodes it once into the responder's copy.
type recvRing struct {
	post    sync.Mutex
	take    sync.Mutex // SRQ: several QPs (and engines) consume
	mem     []byte
	slotLen uint32
	depth   uint32
	maxSGE  uint32
	pi      *atomic.Uint32 // piOwn, or the application's word: read, never trusted
	piOwn   atomic.Uint32
	ci      atomic.Uint32  // taken: the engine's, authoritative
	ciPub   *atomic.Uint32 // where ci is published for the application, or nil
	done    uint32         // retired (a QP's own RQ; the engine's)
	donePub *atomic.Uint32 // where done is published for the application, or nil
	// bad: a slot or a producer index the ring's owner wrote is
	// malformed; the ring gives no more WQEs.
	bad atomic.Bool
}

func newRecvRing(depth, maxSGE uint32, m *RingMem) *recvRing {
	r := &recvRing{depth: depth, maxSGE: maxSGE}
	r.pi = &r.piOwn
	if m != nil {
		r.mem, r.slotLen, r.pi, r.ciPub, r.donePub = m.Mem, m.SlotLen, m.PI, m.CI, m.Done
		return r
	}
	r.slotLen = uint32(queue.RecvWQESize(int(maxSGE)))
	r.mem = make([]byte, int(depth)*int(r.slotLen))
	return r
}

// slotMem returns the memory of ring index i's slot.
func (r *recvRing) slotMem(i uint32) []byte {
	o := (i % r.depth) * r.slotLen
	return r.mem[o : o+r.slotLen : o+r.slotLen]
}

// setCI takes the WQEs below ci and publishes it.
func (r *recvRing) setCI(ci uint32) {
	r.ci.Store(ci)
	if r.ciPub != nil {
		r.ciPub.Store(ci)
	}
}

// retired counts a receive WQE whose completion was written (or lost
// to a CQ in error: its slot is free either way).
func (r *recvRing) retired() { r.setDone(r.done + 1) }

func (r *recvRing) setDone(n uint32) {
	r.done = n
	if r.donePub != nil {
		r.donePub.Store(n)
	}
}

// postRecv writes one receive WQE. The caller holds r.post.
func (r *recvRing) postRecv(wr *RecvWR) bool {
	pi := r.pi.Load()
	if pi-r.ci.Load() >= r.depth {
		return false
	}
	s := r.slotMem(pi)
	clear(s[:queue.RecvHeaderLen])
	le.PutUint64(s[queue.RecvWRID:], wr.WRID)
	s[queue.RecvNumSGE] = uint8(len(wr.SGL))
	for i, g := range wr.SGL {
		b := s[queue.RecvHeaderLen+i*queue.SGELen:]
		le.PutUint64(b[queue.SGEAddr:], g.Addr)
		le.PutUint32(b[queue.SGELength:], g.Length)
		le.PutUint32(b[queue.SGELKey:], g.LKey)
	}
	r.pi.Store(pi + 1)
	return true
}

// count returns the number of posted WQEs not yet taken (0 for a ring
// whose producer index is past what it holds: it is bad).
func (r *recvRing) count() uint32 {
	n := r.pi.Load() - r.ci.Load()
	if n > r.depth {
		return 0
	}
	return n
}

// recvSlot is a receive WQE the responder has taken off a ring: its copy,
// decoded from the slot, which is the poster's again at once (so that an
// SRQ can be shared). sge has the capacity of the ring's max SGE,
// allocated with the QP.
type recvSlot struct {
	wrid   uint64
	length uint64
	sge    []SGE
}

// The outcomes of takeRecv.
type takeResult uint8

const (
	takeOK        takeResult = iota
	takeEmpty                // nothing posted
	takeMalformed            // the slot is garbage (its wr_id in dst)
	takeBadIndex             // the producer index is one the ring never had: no WQE to name
)

// takeRecv takes the oldest receive WQE into dst.
func (r *recvRing) takeRecv(dst *recvSlot, shared bool) takeResult {
	if shared {
		r.take.Lock()
		defer r.take.Unlock()
	}
	if r.bad.Load() {
		return takeEmpty
	}
	ci := r.ci.Load()
	pi := r.pi.Load()
	if ci == pi {
		return takeEmpty
	}
	if pi-ci > r.depth {
		r.bad.Store(true)
		return takeBadIndex
	}
	s := r.slotMem(ci)
	dst.wrid, dst.length = le.Uint64(s[queue.RecvWRID:]), 0
	r.setCI(ci + 1)
	n := uint32(s[queue.RecvNumSGE])
	if n > r.maxSGE || int(n) > cap(dst.sge) || queue.RecvHeaderLen+int(n)*queue.SGELen > len(s) {
		r.bad.Store(true)
		return takeMalformed
	}
	dst.sge = dst.sge[:n]
	for i := range n {
		b := s[queue.RecvHeaderLen+int(i)*queue.SGELen:]
		g := SGE{Addr: le.Uint64(b[queue.SGEAddr:]), Length: le.Uint32(b[queue.SGELength:]), LKey: le.Uint32(b[queue.SGELKey:])}
		dst.sge[i] = g
		dst.length += uint64(g.Length)
	}
	return takeOK
}
