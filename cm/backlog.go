package cm

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/rnic/rnic"
)

// backlog is what a Listener and a UDListener share: the service they
// hold on the device's CM and the queue of requests Next waits on.
type backlog[R interface{ Reject([]byte) error }] struct {
	a    *agent
	sid  uint64
	port uint16
	reqs chan R

	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

func newBacklog[R interface{ Reject([]byte) error }](a *agent, sid uint64, port uint16, n int) backlog[R] {
	if n <= 0 {
		n = 64
	}
	return backlog[R]{a: a, sid: sid, port: port, reqs: make(chan R, n), done: make(chan struct{})}
}

// listen registers self, the listener, for the service ID.
func (b *backlog[R]) listen(self listener) error {
	return b.a.do(func(m *machine) error {
		if m.listeners[b.sid] != nil {
			return fmt.Errorf("cm: listen on port %d of %s: %w", b.port, b.a.dev.Name(), syscall.EADDRINUSE)
		}
		m.listeners[b.sid] = self
		return nil
	})
}

// offer queues a request for Next; false if the queue is full.
func (b *backlog[R]) offer(r R) bool {
	select {
	case b.reqs <- r:
		return true
	default:
		return false
	}
}

// next waits for the next request.
func (b *backlog[R]) next(ctx context.Context) (R, error) {
	var zero R
	select {
	case r := <-b.reqs:
		return r, nil
	case <-b.done:
		return zero, fmt.Errorf("cm: listener on port %d: %w", b.port, rnic.ErrClosed)
	case <-b.a.done:
		return zero, b.a.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// close stops self listening; requests not taken yet are refused.
func (b *backlog[R]) close(self listener) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("cm: listener Close: %w", rnic.ErrClosed)
	}
	b.closed = true
	close(b.done)
	b.mu.Unlock()
	_ = b.a.do(func(m *machine) error {
		if m.listeners[b.sid] == self {
			delete(m.listeners, b.sid)
		}
		return nil
	})
	for {
		select {
		case r := <-b.reqs:
			_ = r.Reject(nil)
		default:
			return nil
		}
	}
}
