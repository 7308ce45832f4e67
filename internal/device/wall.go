package device

import (
	"context"

	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
)

// Wall is the wall-clock driver: internal/nic's NIC, whose engine
// goroutine and links run in real time beside the program's threads.
type Wall struct {
	*nic.Device
}

var _ Driver = Wall{}

// Features: everything but metadata mode.
func (Wall) Features() Features { return Features{GSI: true, Processes: true} }

// SetupCQ makes a poll that finds c empty drive the NIC itself
// (transport.CQ.Poll: the polling thread is the NIC's best chance to run).
func (w Wall) SetupCQ(c *transport.CQ) { c.Progress = w.Progress }

// HostTime is real: it has passed.
func (Wall) HostTime(HostOp, int) error { return nil }

func (Wall) Take(c *transport.CQ, wc []transport.WC) int { return c.Poll(wc) }

func (Wall) WaitCQ(ctx context.Context, c *transport.CQ, wc []transport.WC) (int, error) {
	return c.Wait(ctx, wc)
}

func (w Wall) WaitEvent(ctx context.Context, done <-chan struct{}) (transport.Event, error) {
	select {
	case ev := <-w.Events():
		return ev, nil
	case <-ctx.Done():
		return transport.Event{}, ctx.Err()
	case <-done:
		return transport.Event{}, ErrClosed
	}
}

// Closed: a Wait blocked on a CQ wakes by its Shutdown.
func (Wall) Closed([]*transport.CQ) {}
