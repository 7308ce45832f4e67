package rnic

import (
	"context"
	"errors"
	"fmt"

	"github.com/rnic/rnic/internal/transport"
)

type engine = transport.Engine

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	dev   *Device
	c     *transport.CQ
	index uint32
	dead  bool
}

// ErrCQOverrun is returned by Wait once completions were lost because the
// CQ was full; the CQ is then in error (IBV_EVENT_CQ_ERR).
var ErrCQOverrun = transport.ErrCQOverrun

// CreateCQ creates a completion queue with room for cqe completions
// (ibv_create_cq).
func (d *Device) CreateCQ(cqe int) (*CQ, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	if cqe < 1 || cqe > d.attr.MaxCQE {
		return nil, fmt.Errorf("rnic: CreateCQ: %d entries out of range [1, %d]", cqe, d.attr.MaxCQE)
	}
	cqn, index, ok := d.d.CQs.Alloc()
	if !ok {
		return nil, fmt.Errorf("rnic: CreateCQ: all %d CQs in use", d.attr.MaxCQ)
	}
	c := transport.NewCQ(cqn, cqe)
	c.Progress = d.d.Progress
	cq := &CQ{dev: d, c: c, index: index}
	c.Opaque = cq
	d.d.CQs.Set(index, c)
	return cq, nil
}

// Device returns the CQ's device.
func (cq *CQ) Device() *Device { return cq.dev }

// Handle returns the CQ number.
func (cq *CQ) Handle() uint32 { return cq.c.CQN }

// Depth returns the number of entries.
func (cq *CQ) Depth() int { return cq.c.Depth() }

// Poll moves up to len(wc) completions into wc, oldest first, and returns
// how many (ibv_poll_cq). It never blocks and does not allocate.
func (cq *CQ) Poll(wc []WC) int { return cq.c.Poll(wc) }

// Wait blocks until at least one completion is available, then polls like
// Poll; it returns ctx.Err() if ctx ends first, and ErrCQOverrun once the
// CQ has overflowed.
func (cq *CQ) Wait(ctx context.Context, wc []WC) (int, error) { return cq.c.Wait(ctx, wc) }

// ReqNotify arms the completion channel for the next completion (or with
// solicitedOnly, the next solicited or failed one): ibv_req_notify_cq.
func (cq *CQ) ReqNotify(solicitedOnly bool) { cq.c.ReqNotify(solicitedOnly) }

// Events returns the completion channel (ibv_get_cq_event): a value
// arrives when an armed notification fires.
func (cq *CQ) Events() <-chan struct{} { return cq.c.Events() }

// Destroy frees the CQ (ibv_destroy_cq). It fails while QPs use it.
func (cq *CQ) Destroy() error {
	if cq.dead {
		return errors.New("rnic: CQ already destroyed")
	}
	if n := cq.c.Refs.Load(); n > 0 {
		return fmt.Errorf("%w: CQ %d is used by %d QPs", ErrBusy, cq.c.CQN, n)
	}
	cq.dev.d.Engine(func(e *engine) {
		cq.dev.d.CQs.Release(cq.index)
		e.ForgetCQ(cq.c.CQN)
	})
	cq.dead = true
	return nil
}

func cqOf(c *transport.CQ) *CQ {
	cq, _ := c.Opaque.(*CQ)
	return cq
}
