package transport

import (
	"sync"
	"sync/atomic"
)

// The work queues are rings in "host memory" shared by the application
// (producer) and the NIC (consumer), as on hardware: the application writes
// a WQE into the slot at the producer index and publishes it by advancing
// the index (the doorbell record); the NIC reads slots below the producer
// index and frees them by advancing the consumer index. The atomics give the
// same ordering a doorbell record's memory barrier gives on hardware.

// sendRing is a send queue.
type sendRing struct {
	post      sync.Mutex // ibv_post_send is thread safe: one poster at a time
	wqe       []sendWQE
	sge       []SGE  // maxSGE slots per WQE
	inline    []byte // maxInline bytes per WQE
	depth     uint32
	maxSGE    uint32
	maxInline uint32
	pi        atomic.Uint32 // produced (application)
	ci        atomic.Uint32 // retired (completer)
}

func newSendRing(depth, maxSGE, maxInline uint32) *sendRing {
	return &sendRing{
		wqe:       make([]sendWQE, depth),
		sge:       make([]SGE, int(depth)*int(maxSGE)),
		inline:    make([]byte, int(depth)*int(maxInline)),
		depth:     depth,
		maxSGE:    maxSGE,
		maxInline: maxInline,
	}
}

func (r *sendRing) slot(i uint32) *sendWQE { return &r.wqe[i%r.depth] }

// after reports whether ring index a is past b (indices are free-running
// uint32 counters; they are never more than depth apart).
func (r *sendRing) after(a, b uint32) bool { return int32(a-b) > 0 }

func (r *sendRing) sges(i uint32) []SGE {
	s := (i % r.depth) * r.maxSGE
	w := &r.wqe[i%r.depth]
	return r.sge[s : s+uint32(w.nsge)]
}

func (r *sendRing) inlineData(i uint32) []byte {
	s := (i % r.depth) * r.maxInline
	return r.inline[s : s+r.wqe[i%r.depth].length]
}

// recvRing is a receive queue, or the ring of a shared receive queue.
type recvRing struct {
	post   sync.Mutex
	take   sync.Mutex // SRQ: several QPs (and engines) consume
	wqe    []recvWQE
	sge    []SGE
	depth  uint32
	maxSGE uint32
	pi     atomic.Uint32
	ci     atomic.Uint32
}

func newRecvRing(depth, maxSGE uint32) *recvRing {
	return &recvRing{
		wqe:    make([]recvWQE, depth),
		sge:    make([]SGE, int(depth)*int(maxSGE)),
		depth:  depth,
		maxSGE: maxSGE,
	}
}

func (r *recvRing) slot(i uint32) *recvWQE { return &r.wqe[i%r.depth] }

func (r *recvRing) sges(i uint32) []SGE {
	s := (i % r.depth) * r.maxSGE
	return r.sge[s : s+uint32(r.wqe[i%r.depth].nsge)]
}

// postRecv writes one receive WQE. The caller holds r.post.
func (r *recvRing) postRecv(wr *RecvWR) bool {
	pi := r.pi.Load()
	if pi-r.ci.Load() >= r.depth {
		return false
	}
	w := r.slot(pi)
	w.wrid = wr.WRID
	w.nsge = uint16(len(wr.SGL))
	w.length = 0
	s := (pi % r.depth) * r.maxSGE
	for i, g := range wr.SGL {
		r.sge[s+uint32(i)] = g
		w.length += uint64(g.Length)
	}
	r.pi.Store(pi + 1)
	return true
}

// count returns the number of posted, unconsumed WQEs.
func (r *recvRing) count() uint32 { return r.pi.Load() - r.ci.Load() }

// recvSlot is a receive WQE the responder has taken off a ring: a copy of
// its SGL (the slot itself is freed at once so that an SRQ can be shared).
// sge has the capacity of the ring's max SGE, allocated with the QP.
type recvSlot struct {
	wrid   uint64
	length uint64
	sge    []SGE
}

// takeRecv consumes the oldest receive WQE into dst. It reports false when
// the ring is empty.
func (r *recvRing) takeRecv(dst *recvSlot, shared bool) bool {
	if shared {
		r.take.Lock()
		defer r.take.Unlock()
	}
	ci := r.ci.Load()
	if ci == r.pi.Load() {
		return false
	}
	w := r.slot(ci)
	dst.wrid, dst.length = w.wrid, w.length
	dst.sge = append(dst.sge[:0], r.sges(ci)...)
	r.ci.Store(ci + 1)
	return true
}
