package rnic

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rnic/rnic/internal/transport"
)

// SRQInitAttr creates a shared receive queue (struct ibv_srq_init_attr).
type SRQInitAttr struct {
	MaxWR  uint32
	MaxSGE uint32
	// Limit arms the SRQ limit event at creation (0: disarmed).
	Limit uint32
}

// SRQ is a shared receive queue (struct ibv_srq).
type SRQ struct {
	pd   *PD
	s    *transport.SRQ
	mu   sync.Mutex
	dead bool
}

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (pd *PD) CreateSRQ(a SRQInitAttr) (*SRQ, error) {
	at := pd.dev.attr
	if a.MaxWR == 0 || int(a.MaxWR) > at.MaxSRQWR {
		return nil, fmt.Errorf("rnic: CreateSRQ: max_wr %d out of range [1, %d]", a.MaxWR, at.MaxSRQWR)
	}
	if int(a.MaxSGE) > at.MaxSRQSGE {
		return nil, fmt.Errorf("rnic: CreateSRQ: max_sge %d exceeds %d", a.MaxSGE, at.MaxSRQSGE)
	}
	if err := pd.get(); err != nil {
		return nil, err
	}
	srq := &SRQ{pd: pd, s: transport.NewSRQ(pd.dev.nextSRQ(), pd.pdn, a.MaxWR, max(a.MaxSGE, 1))}
	srq.s.Opaque = srq
	if err := srq.s.Arm(a.Limit); err != nil {
		pd.put()
		return nil, fmt.Errorf("rnic: CreateSRQ: %w", err)
	}
	return srq, nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wrs ...RecvWR) error {
	n, err := s.s.PostRecv(wrs)
	if err != nil {
		return &WRError{Index: n, Err: err}
	}
	return nil
}

// Arm sets the limit: when fewer than limit WQEs remain, the device raises
// IBV_EVENT_SRQ_LIMIT_REACHED once and disarms (ibv_modify_srq with
// IBV_SRQ_LIMIT). 0 disarms.
func (s *SRQ) Arm(limit uint32) error { return s.s.Arm(limit) }

// Limit returns the armed limit (0: disarmed).
func (s *SRQ) Limit() uint32 { return s.s.Limit() }

// Posted returns the number of receive WQEs posted and not yet consumed.
func (s *SRQ) Posted() uint32 { return s.s.Posted() }

// Destroy frees the SRQ (ibv_destroy_srq). It fails while QPs use it.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errors.New("rnic: SRQ already destroyed")
	}
	if n := s.s.Refs.Load(); n > 0 {
		return fmt.Errorf("%w: SRQ %d is used by %d QPs", ErrBusy, s.s.SRQN, n)
	}
	s.dead = true
	s.pd.put()
	return nil
}

// CreateAH creates an address handle for UD sends (ibv_create_ah). It
// holds a reference on the PD until ah.Destroy.
func (pd *PD) CreateAH(a AHAttr) (*AH, error) {
	r, err := pd.dev.route(&a)
	if err != nil {
		return nil, fmt.Errorf("rnic: CreateAH: %w", err)
	}
	if err := pd.get(); err != nil {
		return nil, fmt.Errorf("rnic: CreateAH: %w", err)
	}
	return transport.NewAH(r, pd.pdn, func() error { pd.put(); return nil }), nil
}
