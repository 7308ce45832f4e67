package mem

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rnic/rnic/link"
)

// Port is one NIC's link onto a Switch. Faults apply to the frames it
// sends; frames addressed to it go to the dispatcher given to Attach.
type Port struct {
	sw    *Switch
	addr  netip.Addr
	mtu   int
	epoch time.Time // zero of the delay line's clock

	closeOnce sync.Once
	closed    atomic.Bool
	perfect   atomic.Bool // faults do nothing: Send skips the egress lock
	intact    atomic.Bool // faults change no bits (no Corrupt): link.Intact

	// rx is the receiving side.
	rx struct {
		gate gate
		d    atomic.Pointer[dispatcher] // nil until Attach
	}
	in ingress // frames waiting for the receiver to make room

	// The sending side's backpressure: its frames waiting in receivers'
	// ingress queues, and how many may wait (-1: lossless, no limit; the
	// NIC is paused instead).
	backlog atomic.Int64
	buffer  int

	// eg is the sending side's fault state and delay line.
	eg struct {
		sync.Mutex
		inj     injector
		line    line
		seq     uint64 // send order of delayed frames, to break ties
		closed  bool
		running bool // routineDelayLine started
	}
	wake   chan struct{} // a new earliest frame is on the line
	done   chan struct{} // closed by Close to stop routineDelayLine
	exited chan struct{} // closed by routineDelayLine on return

	c counters
}

// dispatcher boxes the interface for atomic.Pointer, with the optional
// interfaces it implements.
type dispatcher struct {
	link.Dispatcher
	recv  link.Receiver // nil: it takes every frame Deliver gives it
	waker link.Waker
}

var (
	_ link.Link       = (*Port)(nil)
	_ link.Drainer    = (*Port)(nil)
	_ link.Backlogger = (*Port)(nil)
)

// Addr returns the port's address (unmapped).
func (p *Port) Addr() netip.Addr { return p.addr }

// MTU returns the largest frame the port sends.
func (p *Port) MTU() int { return p.mtu }

// Attach sets the dispatcher that receives frames addressed to this port.
// Until it is called, frames for the port are dropped and counted as
// Unattached by their sender; Attach(nil) detaches again.
func (p *Port) Attach(d link.Dispatcher) {
	if d == nil {
		p.rx.d.Store(nil)
		return
	}
	box := &dispatcher{Dispatcher: d}
	box.recv, _ = d.(link.Receiver)
	box.waker, _ = d.(link.Waker)
	p.rx.d.Store(box)
}

// SetFaults changes the port's faults at run time (tests turn loss on and
// off; "peer gone" is Loss 1) and re-seeds its decisions from f.Seed.
// Frames already on the delay line keep their schedule.
func (p *Port) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	p.eg.Lock()
	defer p.eg.Unlock()
	p.setFaults(f)
	return nil
}

// setFaults makes f the port's egress faults (egress lock held, or the
// port not yet in use): the injector and the flags Send reads without it.
func (p *Port) setFaults(f Faults) {
	p.eg.inj.reset(f, p.addr)
	p.perfect.Store(f.perfect())
	p.intact.Store(f.Corrupt == 0)
}

// Intact reports whether the port delivers frames exactly as sent (its
// faults corrupt none): the NIC may then leave their ICRC out
// (link.Intact). Frames that a corruption fault hits get their ICRC
// computed before the bit flips, so that the receiver's check finds it.
func (p *Port) Intact() bool { return p.intact.Load() }

// DeliversInline reports that the port hands frames over on the sender's
// goroutine with no lock held (link.Inline).
func (p *Port) DeliversInline() bool { return true }

// Stats returns the port's counters, each read atomically (but not all at
// one instant while frames are moving).
func (p *Port) Stats() Stats {
	s := p.c.snapshot()
	s.Waiting = uint64(p.backlog.Load())
	return s
}

// Close detaches the port from its switch (its address routes nowhere and
// may be reused), waits for Deliver calls into its dispatcher that are in
// flight, releases the frames on its delay line (counted as ClosedDrops)
// and stops its goroutine. After Close returns no Deliver into this port's
// dispatcher starts. It must not be called from inside that dispatcher.
// Closing again returns ErrClosed, after the first Close has finished.
func (p *Port) Close() error {
	err := ErrClosed
	p.closeOnce.Do(func() {
		err = nil
		p.close()
	})
	return err
}

// Closed reports whether Close was called. rnic.Open refuses a closed
// port instead of starting a NIC that can send nothing.
func (p *Port) Closed() bool { return p.closed.Load() }

func (p *Port) close() {
	p.closed.Store(true)
	p.sw.remove(p)
	p.rx.gate.close()
	p.in.release()

	p.eg.Lock()
	p.eg.closed = true
	running := p.eg.running
	var n uint64
	for len(p.eg.line) > 0 {
		p.eg.line.pop().b.Release()
		n++
	}
	p.eg.Unlock()
	p.c.closedDrops.Add(n)

	if running {
		close(p.done)
		<-p.exited
	}
}
