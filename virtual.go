package rnic

import (
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/rnic/rnic/internal/device"
)

// VirtualClock runs devices in virtual time. It is a handle: the clock is
// the device layer's virtual-time driver, package sim/vclock, whose New
// makes one (with a hardware profile, a seed, a trace). Each device opened
// with Options.Clock is the same NIC core as in real time, driven as a
// timing model of the clock's hardware profile (SRAM cache misses, WQE
// fetches and DMA crossing a PCIe model, processing units, the profile's
// line rate), on a simulated fabric shared by the clock's devices. The
// program's threads run one at a time under the clock's scheduler, so a
// run is a function of the seed and the program: the same program gives
// the same completions, at the same virtual times, with the same trace,
// every time.
//
// A program in virtual time:
//
//   - runs its work inside Run, in the function given to Run and in
//     threads started with Go (both may open devices, post, poll and
//     wait). Setting up outside Run (Open, RegMR, CreateQP, Connect) is
//     allowed; it takes no virtual time.
//   - waits only through the API: CQ.Wait, CQ.Poll (each call costs the
//     profile's poll time, so a busy-poll loop advances the clock),
//     GetAsyncEvent, the clock's Sleep, WaitWrite and Settle, and
//     Thread.Wait.
//     Each is a point where the scheduler may run another thread or
//     advance time.
//   - must not block on anything else — channels, mutexes, sync.WaitGroup,
//     time.Sleep, network or file I/O between its threads, or a CQ's
//     Events channel — and must not start goroutines of its own that call
//     the API: one thread holds the clock at a time, and a thread that
//     blocks elsewhere holds it forever. Shared variables between threads
//     need no locks (only one thread runs at a time) but order only
//     through the API's waits.
//   - reads time with the clock's Now; context deadlines run on the wall
//     clock and are only a safety net.
//
// A PostSend costs the profile's post time (host.post_send_ns) before the
// doorbell, a Poll its poll time (host.poll_cq_ns) per call and per extra
// completion taken. Completions become visible when the model says their
// CQE write has reached host memory.
type VirtualClock struct {
	c device.Clock
}

func init() {
	device.WrapClock = func(c device.Clock) any { return &VirtualClock{c: c} }
	device.ClockOf = func(vc any) device.Clock {
		if v, ok := vc.(*VirtualClock); ok {
			return v.c
		}
		return nil
	}
	device.DriverOf = func(dev any) device.Driver {
		if d, ok := dev.(*Device); ok {
			return d.d
		}
		return nil
	}
}

// ErrDeadlock is wrapped by the error a blocked call returns when no
// thread of a virtual-time program can run and the NICs have nothing
// left to do: the waits can never end.
var ErrDeadlock = device.ErrDeadlock

// ErrRunOver is wrapped by the error blocked calls of other threads
// return once Run's function has returned.
var ErrRunOver = device.ErrRunOver

// ErrTimeLimit is wrapped by the error the waits return once virtual time
// reaches the clock's limit (SetLimit).
var ErrTimeLimit = device.ErrTimeLimit

// Now returns the virtual time since the clock was made.
func (v *VirtualClock) Now() time.Duration { return v.c.Now() }

// Thread is one thread of a virtual-time program (VirtualClock.Go).
type Thread struct{ t device.Thread }

// Go starts f as a thread of the program; it runs when the scheduler
// gets to it (after the running thread waits). Call it before or inside
// Run.
func (v *VirtualClock) Go(f func()) *Thread { return &Thread{v.c.Go(f)} }

// Wait waits until t's function has returned. It is a yield point: it
// returns an error (wrapping ErrDeadlock, ErrRunOver or ErrTimeLimit) if
// the run ends first.
func (t *Thread) Wait() error { return t.t.Wait() }

// Run runs main as a thread of the program, with the threads started by
// Go, in virtual time, and returns when main returns: nil, or an error
// wrapping ErrDeadlock if the program stopped with every thread waiting
// and nothing in flight, or ErrTimeLimit if virtual time reached the
// clock's limit (the blocked calls returned that error). Threads still
// running then see their waits fail with ErrRunOver, one at a time, until
// each returns. Run may be called again to go on.
func (v *VirtualClock) Run(main func()) error { return v.c.Run(main) }

// SetLimit ends the run when virtual time would pass t: the program's
// waits then return an error wrapping ErrTimeLimit (its threads should
// return), and so does Run. It bounds programs that may never finish (a
// peer that never answers, with rnr_retry 7, retries forever). Zero
// removes the limit.
func (v *VirtualClock) SetLimit(t time.Duration) { v.c.SetLimit(t) }

// Sleep lets the calling thread wait d of virtual time.
func (v *VirtualClock) Sleep(d time.Duration) error { return v.c.Sleep(d) }

// Settle waits until no other thread can run and the NICs have nothing
// left to do (every frame delivered, every completion written): a
// program's last step, after which the model's statistics are final.
func (v *VirtualClock) Settle() error { return v.c.Settle() }

// WaitWrite waits until n bytes of RDMA WRITE data that a peer wrote
// through one of qps (its responder placed them) are visible in host
// memory, consumes them and returns that QP, the first of qps in order
// if several have them; it then costs the profile's poll time, the read
// that sees them. It is the virtual-time form of polling buffers for a
// peer's WRITE (perftest's write_lat), which a thread may not spin on:
// plain memory reads take no virtual time and are no yield point. The
// QPs are of one device of the clock, which needs the clock's
// WatchWrites option (sim/vclock).
func (v *VirtualClock) WaitWrite(n int, qps ...*QP) (*QP, error) {
	if len(qps) == 0 {
		return nil, errors.New("rnic: WaitWrite of no QP")
	}
	d := qps[0].pd.dev
	if d.clock != v {
		return nil, errors.New("rnic: WaitWrite: the QP's device is not on this clock")
	}
	for _, qp := range qps[1:] {
		if qp.pd.dev != d {
			return nil, errors.New("rnic: WaitWrite: the QPs are on different devices")
		}
	}
	var qpn func(int) (uint32, error)
	if len(qps) == 1 {
		qpn = qps[0].waitQPN()
	} else {
		qs := slices.Clone(qps) // the closure keeps a copy: the caller's slice stays on its stack
		qpn = func(i int) (uint32, error) {
			if err := qs[i].usable(); err != nil {
				return 0, err
			}
			return qs[i].QPN(), nil
		}
	}
	i, err := v.c.WaitWrite(d.d, n, len(qps), qpn)
	if err != nil {
		return nil, err
	}
	return qps[i], nil
}

// waitQPN returns WaitWrite's view of the QP alone: its number while it
// is usable.
func (qp *QP) waitQPN() func(int) (uint32, error) {
	if qp.waitFn == nil {
		qp.waitFn = func(int) (uint32, error) {
			if err := qp.usable(); err != nil {
				return 0, err
			}
			return qp.QPN(), nil
		}
	}
	return qp.waitFn
}

// Rand returns the simulation's seeded generator, which the model's own
// random choices share: a program that draws from it stays a function of
// the seed.
func (v *VirtualClock) Rand() *rand.Rand { return v.c.Rand() }

// Events returns how many events the simulation has delivered: the
// simulator's unit of work.
func (v *VirtualClock) Events() uint64 { return v.c.Events() }

// Pipe returns the two ends of an in-memory, full-duplex connection
// between threads of the clock, for programs that exchange endpoints
// over a net.Conn (Exchange, the perftest package): a Read waits through
// the clock (a yield point, like CQ.Wait) until the other end writes or
// closes; a Write never waits. Moving bytes takes no virtual time.
// Deadlines are accepted and not kept: in virtual time the waits end by
// the clock's rules (deadlock, the run's end, its limit), and a wall
// clock's deadline would make the run depend on the machine. Reads and
// Writes must come from the clock's threads.
func (v *VirtualClock) Pipe() (net.Conn, net.Conn) { return v.c.Pipe() }
