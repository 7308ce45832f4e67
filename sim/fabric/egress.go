package fabric

import (
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/timing"
)

// Priorities is the number of traffic classes (IEEE 802.1p priorities) a
// port keeps apart: queues, PFC and counters are per priority.
const Priorities = 8

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
	// PFC: pause (XOFF) and resume (XON) frames this port sent upstream
	// for its ingress and received for its egress, and how long its
	// priorities were paused (summed over priorities).
	PausesSent, ResumesSent         uint64
	PausesReceived, ResumesReceived uint64
	PausedTime                      sim.Time
	// Queues breaks the counters down by priority.
	Queues [Priorities]QueueStats
}

// QueueStats count one priority's queue of an egress port.
type QueueStats struct {
	TxFrames, TxBytes uint64
	Drops, DropBytes  uint64
	// HeadroomDrops are lossless frames dropped because the PFC headroom
	// of their ingress ran out (too little headroom for the link's delay).
	HeadroomDrops uint64
	ECNMarked     uint64
	MaxQueueBytes int
	// PFC frames for this priority, as for PortStats; PausedTime is how
	// long the priority could not send because of a pause.
	PausesSent, ResumesSent         uint64
	PausesReceived, ResumesReceived uint64
	PausedTime                      sim.Time
}

// add sums o into s; MaxQueueBytes takes the larger.
func (s *PortStats) add(o PortStats) {
	s.TxFrames += o.TxFrames
	s.TxBytes += o.TxBytes
	s.WireBytes += o.WireBytes
	s.Drops += o.Drops
	s.DropBytes += o.DropBytes
	s.ECNMarked += o.ECNMarked
	s.ECNNotCapable += o.ECNNotCapable
	s.MaxQueueBytes = max(s.MaxQueueBytes, o.MaxQueueBytes)
	s.QueueWait += o.QueueWait
	s.BusyPs += o.BusyPs
	s.PausesSent += o.PausesSent
	s.ResumesSent += o.ResumesSent
	s.PausesReceived += o.PausesReceived
	s.ResumesReceived += o.ResumesReceived
	s.PausedTime += o.PausedTime
	for p := range s.Queues {
		q, r := &s.Queues[p], &o.Queues[p]
		q.TxFrames += r.TxFrames
		q.TxBytes += r.TxBytes
		q.Drops += r.Drops
		q.DropBytes += r.DropBytes
		q.HeadroomDrops += r.HeadroomDrops
		q.ECNMarked += r.ECNMarked
		q.MaxQueueBytes = max(q.MaxQueueBytes, r.MaxQueueBytes)
		q.PausesSent += r.PausesSent
		q.ResumesSent += r.ResumesSent
		q.PausesReceived += r.PausesReceived
		q.ResumesReceived += r.ResumesReceived
		q.PausedTime += r.PausedTime
	}
}

// egress is one output port: a buffer in front of a transmitter, and the
// cable behind it. It holds every frame it accepted until the frame
// arrives at the far end.
//
// It works in one of two modes. An analytic egress (a plain FIFO, the
// default) computes each frame's departure when the frame is offered: the
// frames whose last bit has not been sent are the tail of q from index
// sent on, the others are on the cable, and the only events are arrivals.
// A scheduled egress (priorities with PFC or a shared buffer) keeps
// waiting frames in a queue per priority and picks the next one when the
// transmitter frees, skipping paused priorities; it costs one more event
// per frame (kindTxDone), and q holds only the cable.
type egress struct {
	id    int32 // index in Fabric.egresses, the events' Arg
	tx    *timing.Wire
	limit int // buffer bytes; 0 is unlimited (or the switch's MMU decides)
	ecn   ECNConfig
	// Where frames go: a host, or port inPort of a switch. owner is the
	// switch this egress belongs to (nil for a host's uplink), port its
	// number there.
	toHost    *Port
	toSw      *Switch
	toPort    int32
	owner     *Switch
	port      int32
	scheduled bool
	q         ring[inFlight]
	sent      int      // analytic: frames at the head of q that have left the buffer
	bufBytes  int      // bytes of the frames in the buffer
	armed     bool     // an arrival event is scheduled for q's head
	last      sim.Time // the latest time a frame was offered (enqueue times never go back)
	waitNs    sim.Time // scheduled: time frames waited in the priority queues
	st        PortStats
	sched     *schedState // scheduled mode only
	// watch, if set, is told the buffer's depth whenever it changes (a
	// frame queued or sent; for an analytic port, at each frame queued,
	// and at the last one's departure if the queue had emptied since).
	watch    func(at sim.Time, bytes int)
	lastDone sim.Time
	// onResume, if set, is called when PFC resumes a priority here.
	onResume func()
}

// schedState is the part of an egress used only in scheduled mode.
type schedState struct {
	cls      [Priorities]ring[queued]
	clsBytes [Priorities]int
	waitPs   [Priorities]int64 // serialization time of the frames waiting in each of cls
	cur      queued            // the frame being transmitted (valid if busy)
	busy     bool
	txArmed  bool             // a kindTxDone event is pending for txAt
	txAt     sim.Time         // when it is due
	txGen    uint32           // stale kindTxDone events carry an older generation
	paused   [Priorities]bool // by PFC from the far end
	pausedAt [Priorities]sim.Time
}

type inFlight struct {
	f      Frame
	done   sim.Time // last bit sent
	arrive sim.Time // last bit at the far end
}

// queued is a frame waiting in a scheduled egress.
type queued struct {
	f      Frame
	ready  sim.Time // when it may start (after the switch's forwarding latency)
	inPort int32    // the owner switch's ingress port, for its MMU; -1 for none
	pool   uint8    // where the MMU holds its bytes (poolNone, poolShared, poolHeadroom)
}

func newEgress(cfg timing.WireConfig, limit int, ecn ECNConfig) *egress {
	w, err := timing.NewWire(cfg)
	if err != nil {
		panic(err) // Config.validate has checked it
	}
	return &egress{tx: w, limit: limit, ecn: ecn, toPort: -1, port: -1}
}

// drain forgets, as buffer occupancy, the frames whose last bit was sent
// by time at (analytic mode).
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

// enqueue offers f to an analytic port at time at (non-decreasing across
// calls; an earlier time is taken as the latest so far, so the frame
// queues behind those offered before it).
// It returns the arrival time at the far end and whether f was accepted;
// a rejected frame still belongs to the caller. rng is drawn from only
// when the queue depth is between the ECN thresholds.
func (e *egress) enqueue(at sim.Time, f Frame, rng randFloat) (arrive sim.Time, ok bool) {
	at = max(at, e.last)
	e.last = at
	e.drain(at)
	qs := &e.st.Queues[f.Prio]
	if e.limit > 0 && e.bufBytes+f.Len > e.limit {
		e.countDrop(f)
		return 0, false
	}
	e.mark(&f, e.bufBytes, rng)
	if e.watch != nil && e.bufBytes == 0 && e.lastDone > 0 && e.lastDone < at {
		e.watch(e.lastDone, 0)
	}
	done, arrive := e.tx.Send(at, f.Len)
	e.bufBytes += f.Len
	e.lastDone = done
	if e.watch != nil {
		e.watch(at, e.bufBytes)
	}
	e.q.push(inFlight{f: f, done: done, arrive: arrive})
	e.st.MaxQueueBytes = max(e.st.MaxQueueBytes, e.bufBytes)
	qs.TxFrames++
	qs.TxBytes += uint64(f.Len)
	qs.MaxQueueBytes = max(qs.MaxQueueBytes, e.bufBytes)
	return arrive, true
}

// mark applies the port's ECN marking to f, which finds depth bytes
// queued ahead of it.
func (e *egress) mark(f *Frame, depth int, rng randFloat) {
	if !e.ecn.Enabled || !e.ecn.shouldMark(depth, rng) {
		return
	}
	if f.ecnCapable() {
		f.markCE()
		e.st.ECNMarked++
		e.st.Queues[f.Prio].ECNMarked++
	} else {
		e.st.ECNNotCapable++
	}
}

func (e *egress) countDrop(f Frame) {
	e.st.Drops++
	e.st.DropBytes += uint64(f.Len)
	qs := &e.st.Queues[f.Prio]
	qs.Drops++
	qs.DropBytes += uint64(f.Len)
}

// stats returns the port's counters, the transmitter's included, with
// pauses still in force counted up to now.
func (e *egress) stats(now sim.Time) PortStats {
	st := e.st
	w := e.tx.Stats()
	st.TxFrames = w.Frames
	st.TxBytes = w.IPBytes
	st.WireBytes = w.WireBytes
	st.BusyPs = w.BusyPs
	st.QueueWait = sim.Time(w.WaitPs/1000) + e.waitNs
	if s := e.sched; s != nil {
		for p := range Priorities {
			if s.paused[p] {
				st.Queues[p].PausedTime += now - s.pausedAt[p]
				st.PausedTime += now - s.pausedAt[p]
			}
		}
	}
	return st
}

// pop removes the frame at the head, which has arrived at the far end.
func (e *egress) pop() Frame {
	x := e.q.pop()
	switch {
	case e.scheduled:
	case e.sent > 0:
		e.sent--
	default:
		e.bufBytes -= x.f.Len // not yet drained: arrival implies sent
	}
	return x.f
}

// freeAt returns when the port will have sent what it holds but the
// frames of paused priorities: the transmitter's free time; in scheduled
// mode, the frames still waiting in priorities not paused sent back to
// back from then (or from now, or from the last one's ready time, if
// later).
func (e *egress) freeAt(now sim.Time) sim.Time {
	t := e.tx.FreeAt()
	if s := e.sched; s != nil {
		var ps int64
		for p, w := range s.waitPs {
			if !s.paused[p] {
				ps += w
			}
		}
		if ps > 0 {
			t = max(t, now, e.last) + sim.Time((ps+999)/1000)
		}
	}
	return t
}

// randFloat is the source of ECN marking draws (Sim.Rand).
type randFloat interface{ Float64() float64 }

// ECNConfig sets RED-style marking at a switch output port, by the queue
// depth a frame finds when it arrives: below MinBytes never, at MaxBytes
// and above always, in between with a probability rising linearly from 0
// to MaxProbability (DCQCN's marking). With priorities kept apart the
// depth is that of the frame's priority queue.
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
