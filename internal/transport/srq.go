package transport

import (
	"fmt"
	"sync/atomic"

	"github.com/rnic/rnic/internal/queue"
)

// SRQ is a shared receive queue: one pool of receive WQEs for many QPs.
type SRQ struct {
	SRQN   uint32
	PD     uint32
	Opaque any
	ring   *recvRing

	// limit is the srq_limit watermark: when a WQE is taken and fewer
	// than limit remain, the NIC raises IBV_EVENT_SRQ_LIMIT_REACHED once
	// and disarms (limit back to 0), as ibv_modify_srq describes.
	limit atomic.Uint32

	// Refs counts the QPs attached; destroy fails while it is non-zero.
	Refs atomic.Int32
}

// NewSRQ returns an SRQ of maxWR WQEs of up to maxSGE SGEs, in m if not
// nil (the application's ring: maxWR must be its slot count).
func NewSRQ(srqn, pd, maxWR, maxSGE uint32, m *RingMem) (*SRQ, error) {
	if m != nil && !m.fits(maxWR, queue.RecvHeaderLen) {
		return nil, fmt.Errorf("%w: a receive ring of %d bytes in %d-byte slots for %d WRs", ErrAttr, len(m.Mem), m.SlotLen, maxWR)
	}
	return &SRQ{SRQN: srqn, PD: pd, ring: newRecvRing(maxWR, maxSGE, m)}, nil
}

// PostRecv posts receive WQEs to the SRQ.
func (s *SRQ) PostRecv(wrs []RecvWR) (int, error) { return postRecvs(s.ring, wrs) }

// BeginPostRecv, PostRecvWQE and EndPostRecv are PostRecv one work
// request at a time, under one hold of the posting lock (see
// QP.BeginPostSend).
func (s *SRQ) BeginPostRecv() { s.ring.post.Lock() }

// PostRecvWQE writes one receive work request; wr is not retained.
func (s *SRQ) PostRecvWQE(wr *RecvWR) error { return postRecvWQE(s.ring, wr) }

// EndPostRecv releases the posting lock.
func (s *SRQ) EndPostRecv() { s.ring.post.Unlock() }

// Arm sets the limit watermark (0 disarms). It fails if the limit exceeds
// the queue depth.
func (s *SRQ) Arm(limit uint32) error {
	if limit > s.ring.depth {
		return fmt.Errorf("%w: srq_limit %d exceeds max_wr %d", ErrInvalidWR, limit, s.ring.depth)
	}
	s.limit.Store(limit)
	return nil
}

// Limit returns the armed watermark (0: disarmed).
func (s *SRQ) Limit() uint32 { return s.limit.Load() }

// MaxWR returns the queue depth; MaxSGE the largest SGL.
func (s *SRQ) MaxWR() uint32  { return s.ring.depth }
func (s *SRQ) MaxSGE() uint32 { return s.ring.maxSGE }

// Posted returns the number of WQEs posted and not yet consumed.
func (s *SRQ) Posted() uint32 { return s.ring.count() }

// take consumes a WQE for a QP and reports whether the limit event fires.
func (s *SRQ) take(dst *recvSlot) (r takeResult, limitReached bool) {
	if r = s.ring.takeRecv(dst, true); r != takeOK {
		return r, false
	}
	if l := s.limit.Load(); l != 0 && s.ring.count() < l {
		// Fire once: only the caller that disarms reports it.
		limitReached = s.limit.CompareAndSwap(l, 0)
	}
	return takeOK, limitReached
}
