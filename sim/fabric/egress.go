package fabric

import (
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/timing"
)

// PortStats count what one egress port (a host's uplink or a switch
// output port) did.
type PortStats struct {
	TxFrames  uint64 // frames accepted into the queue (and so sent)
	TxBytes   uint64 // their bytes, IP header through ICRC
	WireBytes uint64 // their bytes on the wire, Ethernet overheads included
	Drops     uint64 // frames dropped because the queue was full
	DropBytes uint64
	// ECNMarked counts frames marked Congestion Experienced here;
	// ECNNotCapable frames that would have been marked but were not
	// ECN-capable (sent as they were).
	ECNMarked     uint64
	ECNNotCapable uint64
	// MaxQueueBytes is the deepest the queue got, counting the frame being
	// transmitted.
	MaxQueueBytes int
	// QueueWait is the total time frames waited before their first bit was
	// sent; BusyPs the transmitter's busy time in picoseconds.
	QueueWait sim.Time
	BusyPs    int64
}

// egress is one output port: a byte-limited FIFO in front of a
// transmitter, and the cable behind it. It holds every frame it accepted
// until the frame arrives at the far end: frames whose last bit has not
// been sent are in the buffer (the tail of q from index sent on), the
// others are on the cable.
type egress struct {
	tx       *timing.Wire
	limit    int // buffer bytes; 0 is unlimited
	ecn      ECNConfig
	q        ring[inFlight]
	sent     int      // frames at the head of q that have left the buffer
	bufBytes int      // bytes of the frames in the buffer
	armed    bool     // an arrival event is scheduled for q's head
	last     sim.Time // the latest time a frame was offered (enqueue times never go back)
	st       PortStats
}

type inFlight struct {
	f      Frame
	done   sim.Time // last bit sent
	arrive sim.Time // last bit at the far end
}

func newEgress(cfg timing.WireConfig, limit int, ecn ECNConfig) *egress {
	w, err := timing.NewWire(cfg)
	if err != nil {
		panic(err) // Config.validate has checked it
	}
	return &egress{tx: w, limit: limit, ecn: ecn}
}

// drain forgets, as buffer occupancy, the frames whose last bit was sent
// by time at.
func (e *egress) drain(at sim.Time) {
	for e.sent < e.q.len() {
		x := e.q.at(e.sent)
		if x.done > at {
			return
		}
		e.bufBytes -= x.f.Len
		e.sent++
	}
}

// enqueue offers f to the port at time at (non-decreasing across calls;
// an earlier time is taken as the latest so far, so the frame queues
// behind those offered before it).
// It returns the arrival time at the far end and whether f was accepted;
// a rejected frame still belongs to the caller. rng is drawn from only
// when the queue depth is between the ECN thresholds.
func (e *egress) enqueue(at sim.Time, f Frame, rng randFloat) (arrive sim.Time, ok bool) {
	at = max(at, e.last)
	e.last = at
	e.drain(at)
	if e.limit > 0 && e.bufBytes+f.Len > e.limit {
		e.st.Drops++
		e.st.DropBytes += uint64(f.Len)
		return 0, false
	}
	if e.ecn.Enabled && e.ecn.shouldMark(e.bufBytes, rng) {
		if f.ecnCapable() {
			f.markCE()
			e.st.ECNMarked++
		} else {
			e.st.ECNNotCapable++
		}
	}
	done, arrive := e.tx.Send(at, f.Len)
	e.bufBytes += f.Len
	e.q.push(inFlight{f: f, done: done, arrive: arrive})
	e.st.MaxQueueBytes = max(e.st.MaxQueueBytes, e.bufBytes)
	return arrive, true
}

// stats returns the port's counters, the transmitter's included.
func (e *egress) stats() PortStats {
	st := e.st
	w := e.tx.Stats()
	st.TxFrames = w.Frames
	st.TxBytes = w.IPBytes
	st.WireBytes = w.WireBytes
	st.BusyPs = w.BusyPs
	st.QueueWait = sim.Time(w.WaitPs / 1000)
	return st
}

// pop removes the frame at the head, which has arrived at the far end.
func (e *egress) pop() Frame {
	x := e.q.pop()
	if e.sent > 0 {
		e.sent--
	} else {
		e.bufBytes -= x.f.Len // not yet drained: arrival implies sent
	}
	return x.f
}

// randFloat is the source of ECN marking draws (Sim.Rand).
type randFloat interface{ Float64() float64 }

// ECNConfig sets RED-style marking at a switch output port, by the queue
// depth a frame finds when it arrives: below MinBytes never, at MaxBytes
// and above always, in between with a probability rising linearly from 0
// to MaxProbability (DCQCN's marking).
type ECNConfig struct {
	Enabled        bool
	MinBytes       int
	MaxBytes       int
	MaxProbability float64
}

func (c *ECNConfig) shouldMark(queued int, rng randFloat) bool {
	switch {
	case queued < c.MinBytes:
		return false
	case queued >= c.MaxBytes:
		return true
	}
	p := c.MaxProbability * float64(queued-c.MinBytes) / float64(c.MaxBytes-c.MinBytes)
	return rng.Float64() < p
}
