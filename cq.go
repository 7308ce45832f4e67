package rnic

import (
	"context"
	"errors"
	"fmt"
	"github.com/rnic/rnic/internal/device"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/transport"
)

type engine = transport.Engine

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	dev   *Device
	c     *transport.CQ
	index uint32

	mu   sync.Mutex // serializes Destroy
	dead atomic.Bool
}

// ErrCQOverrun is returned by Poll and Wait once the CQ is empty after it
// overflowed: the NIC had a completion to write and no free entry, so
// completions were lost and the CQ is in error (IBTA 11.4.2.1; the device
// raises EventCQErr).
var ErrCQOverrun = errors.New("rnic: completion queue overrun")

// CreateCQ creates a completion queue with room for cqe completions
// (ibv_create_cq).
func (d *Device) CreateCQ(cqe int) (*CQ, error) {
	return d.createCQ(cqe, nil)
}

// createCQ creates a CQ whose ring is the program's memory m (the host
// interface's), or, m nil, the CQ's own.
func (d *Device) createCQ(cqe int, m *transport.CQMem) (*CQ, error) {
	if err := d.usable(); err != nil {
		return nil, fmt.Errorf("rnic: CreateCQ: %w", err)
	}
	if cqe < 1 || cqe > d.attr.MaxCQE {
		return nil, fmt.Errorf("rnic: CreateCQ: %d entries out of range [1, %d]", cqe, d.attr.MaxCQE)
	}
	cqn, index, ok := d.cqt.Alloc()
	if !ok {
		return nil, fmt.Errorf("rnic: CreateCQ: all %d CQs in use", d.attr.MaxCQ)
	}
	var c *transport.CQ
	if m != nil {
		var err error
		if c, err = transport.NewCQInMem(cqn, m); err != nil {
			d.cqt.Release(index)
			return nil, fmt.Errorf("rnic: CreateCQ: %w", err)
		}
	} else {
		c = transport.NewCQ(cqn, cqe)
	}
	d.d.SetupCQ(c) // the clock's way with CQs
	cq := &CQ{dev: d, c: c, index: index}
	c.Opaque = cq
	// Registered under the device's lock, which Close takes to collect
	// the CQs it wakes: a CQ is either refused here or shut down there.
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		d.cqt.Release(index)
		return nil, fmt.Errorf("rnic: CreateCQ: %w", d.errClosed())
	}
	d.cqs[cq] = struct{}{}
	d.mu.Unlock()
	d.cqt.Set(index, c)
	return cq, nil
}

// Device returns the CQ's device.
func (cq *CQ) Device() *Device { return cq.dev }

// Handle returns the CQ number.
func (cq *CQ) Handle() uint32 { return cq.c.CQN }

// Depth returns the number of entries.
func (cq *CQ) Depth() int { return cq.c.Depth() }

// usable returns nil while the CQ and its device live.
func (cq *CQ) usable() error {
	if err := cq.dev.usable(); err != nil {
		return err
	}
	if cq.dead.Load() {
		return cq.errDestroyed()
	}
	return nil
}

func (cq *CQ) errDestroyed() error {
	return fmt.Errorf("%w: CQ %d was destroyed", ErrClosed, cq.c.CQN)
}

// Poll moves up to len(wc) completions into wc, oldest first, and returns
// how many (ibv_poll_cq): fewer than len(wc) only when the CQ is empty.
// It never blocks and does not allocate. Once the CQ is empty after an
// overrun it returns ErrCQOverrun; on a destroyed CQ or a closed device,
// an error wrapping ErrClosed.
//
// On the wall clock, a poll that finds no completion for wc runs the
// NIC's pending work on the calling goroutine (the frames its link
// received, due timers, the QPs ready to send), as the thread that waits
// is the NIC's best chance to run; Poll(nil) does only that. A program
// that polls memory for a peer's RDMA WRITE (perftest's write_lat) calls
// it while it spins, so that the WRITE is taken in by the waiting thread
// rather than by a NIC goroutine that must be woken. (A virtual clock's
// NIC runs in the clock's time: there a poll only passes the host's.)
func (cq *CQ) Poll(wc []WC) (int, error) {
	if err := cq.usable(); err != nil {
		return 0, err
	}
	drv := cq.dev.d
	// The poll's host time passes first (a virtual clock's: the clock
	// goes on meanwhile, and the CQ may be destroyed).
	if err := drv.HostTime(device.PollCQ, 1); err != nil {
		return 0, err
	}
	if err := cq.usable(); err != nil {
		return 0, err
	}
	n := drv.Take(cq.c, wcs(wc)) // decoded into wc (convert.go)
	if n > 1 {
		// The completions are the caller's now; a run that ends
		// meanwhile is the next call's error.
		_ = drv.HostTime(device.PollCQ, n-1)
	}
	if n == 0 && cq.c.Overrun() {
		return 0, ErrCQOverrun
	}
	return n, nil
}

// Wait blocks until at least one completion is available, then polls like
// Poll. It returns ctx.Err() if ctx ends first, ErrCQOverrun once the CQ
// is empty after an overrun, and an error wrapping ErrClosed when the CQ is
// destroyed or its device closed, including while it waits.
func (cq *CQ) Wait(ctx context.Context, wc []WC) (int, error) {
	if err := cq.usable(); err != nil {
		return 0, err
	}
	if len(wc) == 0 {
		return 0, errors.New("rnic: Wait with an empty slice")
	}
	n, err := cq.dev.d.WaitCQ(ctx, cq.c, wcs(wc))
	if errors.Is(err, transport.ErrCQOverrun) {
		return 0, ErrCQOverrun
	}
	return n, err
}

// ReqNotify arms the completion channel for the next completion (or with
// solicitedOnly, the next solicited or failed one): ibv_req_notify_cq.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if err := cq.usable(); err != nil {
		return err
	}
	cq.c.ReqNotify(solicitedOnly)
	return nil
}

// Events returns the completion channel (ibv_get_cq_event): a value
// arrives when an armed notification fires. The channel is closed when
// the CQ is destroyed or its device closed, so that a goroutine receiving
// from it wakes.
func (cq *CQ) Events() <-chan struct{} { return cq.c.Events() }

// Resize gives the CQ room for cqe completions (ibv_resize_cq), keeping
// those not yet polled. It fails if cqe is out of the device's range or
// smaller than the number of completions the CQ holds.
func (cq *CQ) Resize(cqe int) error {
	if err := cq.usable(); err != nil {
		return fmt.Errorf("rnic: Resize CQ: %w", err)
	}
	if cqe < 1 || cqe > cq.dev.attr.MaxCQE {
		return fmt.Errorf("rnic: Resize CQ: %d entries out of range [1, %d]", cqe, cq.dev.attr.MaxCQE)
	}
	if err := cq.c.Resize(cqe); err != nil {
		return fmt.Errorf("rnic: Resize CQ to %d: %w (%d unpolled)", cqe, err, cq.c.Unpolled())
	}
	return nil
}

// purge removes the completions of QP qpn it holds (a QP gone to RESET,
// for the host interface).
func (cq *CQ) purge(qpn uint32) { cq.c.Purge(qpn) }

// Destroy frees the CQ (ibv_destroy_cq). It fails with ErrBusy while QPs
// use it. A Wait blocked on it returns an error wrapping ErrClosed, as does
// every later call, a second Destroy included.
func (cq *CQ) Destroy() error {
	if err := cq.dev.usable(); err != nil {
		return fmt.Errorf("rnic: Destroy CQ: %w", err)
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.dead.Load() {
		return fmt.Errorf("rnic: Destroy CQ: %w", cq.errDestroyed())
	}
	// The references are counted and the CQ dies under the engine lock,
	// which CreateQP holds while it takes its references: a QP created
	// meanwhile either counts here or finds the CQ dead.
	var busy int32
	cq.dev.d.Engine(func(e *engine) {
		if busy = cq.c.Refs.Load(); busy > 0 {
			return
		}
		cq.dead.Store(true)
		cq.dev.cqt.Release(cq.index)
		e.ForgetCQ(cq.c.CQN)
	})
	if busy > 0 {
		return fmt.Errorf("%w: CQ %d is used by %d QPs", ErrBusy, cq.c.CQN, busy)
	}
	cq.dev.mu.Lock()
	delete(cq.dev.cqs, cq)
	cq.dev.mu.Unlock()
	cq.c.Shutdown(cq.errDestroyed())
	return nil
}

func cqOf(c *transport.CQ) *CQ {
	cq, _ := c.Opaque.(*CQ)
	return cq
}
