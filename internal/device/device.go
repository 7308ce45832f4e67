// Package device is the layer under the verbs API (package rnic): a
// Driver runs the NIC's core (internal/transport) on a clock, and answers
// for that clock in what the verbs do on the host's side of the NIC — how
// a poll, a wait for a completion or an event, and a post pass the
// host's time. The verbs code asks its driver and has no clock branches.
//
// Config describes a NIC for either clock, and Config.Assemble makes the
// NIC's core from it: every hardware choice (micro-TLB, MTT page choice,
// READ budget, and the defaults of the caches, DMA engines and arbiter)
// is made there once, the same on both clocks unless a virtual clock's
// profile describes other hardware.
//
// Two drivers exist: Wall, the wall clock (internal/nic's NIC: its engine
// goroutine, links with sockets, the host's own threads), and the
// virtual-time driver of package sim/vclock (the timing model of a
// hardware profile on a simulated fabric, the program's threads run one
// at a time by a deterministic scheduler), which a Clock opens.
package device

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"time"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/wire"
)

// Driver runs one NIC on a clock.
type Driver interface {
	// Engine runs f with the engine to itself: the control path's way
	// in.
	Engine(f func(e *transport.Engine))
	// Sync runs f as the host's access to registered memory.
	Sync(f func())
	// Counters returns the NIC's counters.
	Counters() (transport.Counters, nic.Pipeline)
	// Close stops the NIC; the engine has stopped when it returns.
	Close() error

	// Features says what the NIC on this clock can do.
	Features() Features
	// SetupCQ prepares a new CQ for this clock (the wall clock's polls
	// drive the NIC; a virtual clock's CQEs show when the model says).
	SetupCQ(c *transport.CQ)
	// HostTime lets the calling thread spend the host's time for op on n
	// work requests or completions. On the wall clock the time is real
	// and already spent; a virtual clock passes it (its other threads
	// run meanwhile), and may end the run: an error.
	HostTime(op HostOp, n int) error
	// Take moves up to len(wc) completions of c into wc (CQ.Poll's
	// work, its HostTime aside).
	Take(c *transport.CQ, wc []transport.WC) int
	// WaitCQ waits until c has completions and takes them, or ctx ends,
	// or c is shut down (destroyed, or its device closed: c.Err).
	WaitCQ(ctx context.Context, c *transport.CQ, wc []transport.WC) (int, error)
	// WaitEvent waits for the NIC's next asynchronous event, for ctx to
	// end, or for done (the device closed: it returns ErrClosed).
	WaitEvent(ctx context.Context, done <-chan struct{}) (transport.Event, error)
	// Closed wakes what waits on the closed device's CQs.
	Closed(cqs []*transport.CQ)
}

// HostOp is a host-side operation that costs the host time.
type HostOp uint8

const (
	PostSend HostOp = iota // building n send WQEs, before the doorbell
	PollCQ                 // a CQ poll, or taking n more completions
)

// Features say what a driver's NIC can do beyond the common verbs.
type Features struct {
	// Metadata: regions have lengths and no bytes (a virtual clock's
	// metadata mode): only RegMRMetadata registers.
	Metadata bool
	// GSI: the NIC has QP1.
	GSI bool
	// Processes: the NIC reaches other processes' memory (the host
	// interface's REG_MR).
	Processes bool
}

// ErrClosed is what WaitEvent returns when done closes; the verbs layer
// replaces it with its own.
var ErrClosed = errors.New("device: closed")

// Clock is a clock of virtual time (sim/vclock's), as the verbs layer's
// VirtualClock handle passes its calls on.
type Clock interface {
	// Open starts a NIC on the clock.
	Open(c Config) (Driver, NIC, error)
	Now() time.Duration
	Go(f func()) Thread
	Run(main func()) error
	SetLimit(t time.Duration)
	Sleep(d time.Duration) error
	Settle() error
	// WaitWrite waits until n bytes of RDMA WRITE data placed through
	// one of k QPs of the NIC d (qpn(i): the i-th QP's number, or an
	// error if it is gone) are visible, and returns that QP's index.
	WaitWrite(d Driver, n int, k int, qpn func(i int) (uint32, error)) (int, error)
	Rand() *rand.Rand
	Events() uint64
	Pipe() (net.Conn, net.Conn)
}

// Thread is one thread of a virtual-time program.
type Thread interface {
	Wait() error
}

// NIC is what an opened NIC gives the verbs layer: its tables and its
// identity.
type NIC struct {
	Name string
	ATU  *atu.ATU
	QPs  *transport.Table[transport.QP]
	CQs  *transport.Table[transport.CQ]
	AHs  *transport.AHTable
	GID  wire.GID
	Core transport.CoreConfig
	MTU  wire.MTU
}

// The virtual-time errors (package rnic exports them).
var (
	ErrDeadlock  = errors.New("rnic: virtual time: every thread waits and nothing is in flight")
	ErrRunOver   = errors.New("rnic: virtual time: the run is over")
	ErrTimeLimit = errors.New("rnic: virtual time: the time limit is reached")
)

// Hooks between the verbs layer and a clock's package, which imports it
// (package rnic sets them when it loads): WrapClock makes a verbs-layer
// handle (*rnic.VirtualClock) of a Clock, ClockOf takes it back, DriverOf
// gives a device's (*rnic.Device) driver.
var (
	WrapClock func(Clock) any
	ClockOf   func(vc any) Clock
	DriverOf  func(dev any) Driver
)
