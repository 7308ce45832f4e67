package rnic

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/transport"
)

// SRQInitAttr creates a shared receive queue (struct ibv_srq_init_attr).
type SRQInitAttr struct {
	// MaxWR is the number of receive work requests it holds (max_wr).
	MaxWR uint32
	// MaxSGE bounds the SGEs of one work request (max_sge; 0 is taken as 1).
	MaxSGE uint32
	// Limit arms the SRQ limit event at creation (srq_limit; 0: disarmed).
	Limit uint32
}

// SRQ is a shared receive queue (struct ibv_srq).
type SRQ struct {
	pd   *PD
	s    *transport.SRQ
	mu   sync.Mutex // serializes Destroy
	dead atomic.Bool
}

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (pd *PD) CreateSRQ(a SRQInitAttr) (*SRQ, error) { return pd.createSRQ(a, nil) }

// createSRQ creates an SRQ whose ring is mem if not nil: a host
// interface's ring, which the engine reads (a.MaxWR is its slot count).
func (pd *PD) createSRQ(a SRQInitAttr, mem *transport.RingMem) (*SRQ, error) {
	if err := pd.usable(); err != nil {
		return nil, fmt.Errorf("rnic: CreateSRQ: %w", err)
	}
	at := pd.dev.attr
	if a.MaxWR == 0 || int(a.MaxWR) > at.MaxSRQWR {
		return nil, fmt.Errorf("rnic: CreateSRQ: max_wr %d out of range [1, %d]", a.MaxWR, at.MaxSRQWR)
	}
	if int(a.MaxSGE) > at.MaxSRQSGE {
		return nil, fmt.Errorf("rnic: CreateSRQ: max_sge %d exceeds %d", a.MaxSGE, at.MaxSRQSGE)
	}
	if err := pd.get(); err != nil {
		return nil, fmt.Errorf("rnic: CreateSRQ: %w", err)
	}
	s, err := transport.NewSRQ(pd.dev.nextSRQ(), pd.pdn, a.MaxWR, max(a.MaxSGE, 1), mem)
	if err != nil {
		pd.put()
		return nil, fmt.Errorf("rnic: CreateSRQ: %w", err)
	}
	srq := &SRQ{pd: pd, s: s}
	srq.s.Opaque = srq
	if err := srq.s.Arm(a.Limit); err != nil {
		pd.put()
		return nil, fmt.Errorf("rnic: CreateSRQ: %w", err)
	}
	return srq, nil
}

// usable returns nil while the SRQ and its device live.
func (s *SRQ) usable() error {
	if err := s.pd.dev.usable(); err != nil {
		return err
	}
	if s.dead.Load() {
		return fmt.Errorf("%w: SRQ %d was destroyed", ErrClosed, s.s.SRQN)
	}
	return nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv);
// errors as QP.PostSend. It does not allocate.
func (s *SRQ) PostRecv(wrs ...RecvWR) error {
	if err := s.usable(); err != nil {
		return &WRError{Index: 0, Err: err}
	}
	s.s.BeginPostRecv()
	defer s.s.EndPostRecv()
	for i := range wrs {
		var t transport.RecvWR
		recvWR(&wrs[i], &t)
		if err := s.s.PostRecvWQE(&t); err != nil {
			return &WRError{Index: i, Err: err}
		}
	}
	return nil
}

// Arm sets the limit: when fewer than limit WQEs remain, the device raises
// IBV_EVENT_SRQ_LIMIT_REACHED once and disarms (ibv_modify_srq with
// IBV_SRQ_LIMIT). 0 disarms.
func (s *SRQ) Arm(limit uint32) error {
	if err := s.usable(); err != nil {
		return fmt.Errorf("rnic: Arm SRQ: %w", err)
	}
	if err := s.s.Arm(limit); err != nil {
		return fmt.Errorf("rnic: Arm SRQ: %w", err)
	}
	return nil
}

// Limit returns the armed limit (0: disarmed).
func (s *SRQ) Limit() uint32 { return s.s.Limit() }

// Posted returns the number of receive WQEs posted and not yet consumed.
func (s *SRQ) Posted() uint32 { return s.s.Posted() }

// Destroy frees the SRQ (ibv_destroy_srq). It fails with ErrBusy while QPs
// use it. Every later call on it, a second Destroy included, returns an
// error wrapping ErrClosed.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("rnic: Destroy SRQ: %w", err)
	}
	var busy int32
	s.pd.dev.d.Engine(func(*engine) { // see CQ.Destroy
		if busy = s.s.Refs.Load(); busy == 0 {
			s.dead.Store(true)
		}
	})
	if busy > 0 {
		return fmt.Errorf("%w: SRQ %d is used by %d QPs", ErrBusy, s.s.SRQN, busy)
	}
	s.pd.put()
	return nil
}

// CreateAH creates an address handle for UD sends (ibv_create_ah). It
// holds a reference on the PD until ah.Destroy.
func (pd *PD) CreateAH(a AHAttr) (*AH, error) {
	if err := pd.usable(); err != nil {
		return nil, fmt.Errorf("rnic: CreateAH: %w", err)
	}
	r, err := pd.dev.route(&a)
	if err != nil {
		return nil, fmt.Errorf("rnic: CreateAH: %w", err)
	}
	if err := pd.get(); err != nil {
		return nil, fmt.Errorf("rnic: CreateAH: %w", err)
	}
	t, err := pd.dev.aht.New(r, pd.pdn, nil)
	if err != nil {
		pd.put()
		return nil, fmt.Errorf("rnic: CreateAH: %w (max_ah %d)", err, transport.MaxAH)
	}
	return &AH{pd: pd, ah: t, attr: a}, nil
}
