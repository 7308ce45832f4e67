package mem

import (
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/link"
)

// Lossless delivery. A NIC's receive queue is bounded (it is a
// link.Receiver): it takes what fits and refuses the rest. The switch then
// keeps the refused frames in the receiving port's ingress queue, in order,
// until the NIC has made room and calls Drained, as a lossless (PFC)
// fabric keeps frames in its buffers instead of dropping them. Nothing
// blocks: Send returns at once, so two NICs sending to each other cannot
// deadlock. What keeps the queues bounded is the senders' backpressure:
// each port counts its own frames that wait (Backlog), and its NIC's
// arbiter stops taking on new requests while that count is high (see
// link.Backlogger); the switch wakes the NIC when it has fallen to
// link.ResumeBacklog.
//
// A port made WithBuffer(n) is lossy instead: at most n of its frames wait,
// the rest are dropped (Overflow), and it reports no backlog, so its NIC is
// never paused.

// ingress is a port's queue of frames waiting for its receiver to make
// room.
type ingress struct {
	mu       sync.Mutex
	q        []waiting // q[head:] wait, oldest first
	head     int
	draining bool // a goroutine is handing frames over (drain)
	again    bool // room was made while draining: go round once more
	n        atomic.Int64
	batch    []*link.Buf // drain's scratch
}

// waiting is a frame and the port that sent it.
type waiting struct {
	b    *link.Buf
	from *Port
}

// drainBatch bounds the frames one TryDeliver of the drain offers.
const drainBatch = 64

// deliverTo hands run (frames from p) to the receiver r of port to, which
// takes what fits; the rest wait in to's ingress queue. Frames that
// already wait go first, so a sender's frames stay in order.
func (p *Port) deliverTo(to *Port, r link.Receiver, run []*link.Buf) {
	in := &to.in
	in.mu.Lock()
	if in.head == len(in.q) && !in.draining {
		in.mu.Unlock()
		n := bytesOf(run) // before the hand-over: then the frames are the NIC's
		k := r.TryDeliver(run)
		to.countRx(k, n-bytesOf(run[k:]))
		if k == len(run) {
			return
		}
		run = run[k:]
		in.mu.Lock()
	}
	for _, b := range run {
		if p.buffer >= 0 && p.backlog.Load() >= int64(p.buffer) {
			b.Release()
			p.c.overflow.Add(1)
			continue
		}
		in.q = append(in.q, waiting{b: b, from: p})
		p.backlog.Add(1)
		in.n.Add(1)
	}
	in.mu.Unlock()
	to.drain(r)
}

// Drained is the receiving NIC saying it has taken frames out of its queue
// (link.Drainer): what waits for it is handed over.
func (p *Port) Drained() {
	if p.in.n.Load() == 0 {
		return
	}
	if !p.rx.gate.enter() {
		return // closing: close releases what waits
	}
	defer p.rx.gate.leave()
	if d := p.rx.d.Load(); d != nil && d.recv != nil {
		p.drain(d.recv)
	}
}

// drain offers the waiting frames to r, oldest first, until it takes no
// more. One goroutine drains a port at a time; one that finds it busy asks
// it to go round again, since room may have been made after the drainer's
// last offer. The caller is inside the port's gate.
func (p *Port) drain(r link.Receiver) {
	in := &p.in
	in.mu.Lock()
	if in.draining {
		in.again = true
		in.mu.Unlock()
		return
	}
	in.draining = true
	for in.head < len(in.q) {
		in.again = false
		k := min(len(in.q)-in.head, drainBatch)
		in.batch = in.batch[:0]
		for _, w := range in.q[in.head : in.head+k] {
			in.batch = append(in.batch, w.b)
		}
		// Only the drainer takes from the front, and senders append at
		// the back: q[head:head+k] stay put while the lock is released.
		in.mu.Unlock()
		n := bytesOf(in.batch)
		took := r.TryDeliver(in.batch)
		p.countRx(took, n-bytesOf(in.batch[took:]))
		clear(in.batch)
		in.mu.Lock()
		for i := range took {
			w := &in.q[in.head+i]
			w.from.backlogDone(1)
			*w = waiting{}
		}
		in.head += took
		in.n.Add(-int64(took))
		if in.head == len(in.q) {
			in.q, in.head = in.q[:0], 0
		} else if in.head > len(in.q)/2 && in.head >= drainBatch {
			n := copy(in.q, in.q[in.head:])
			clear(in.q[n:])
			in.q, in.head = in.q[:n], 0
		}
		if took < k && !in.again {
			break // the receiver is full; its next Drained resumes
		}
	}
	in.draining = false
	in.mu.Unlock()
}

// release drops every waiting frame (the port is closing), counted as
// ClosedDrops of their senders.
func (in *ingress) release() {
	in.mu.Lock()
	for _, w := range in.q[in.head:] {
		w.b.Release()
		w.from.c.closedDrops.Add(1)
		w.from.backlogDone(1)
	}
	clear(in.q)
	in.q, in.head = nil, 0
	in.n.Store(0)
	in.mu.Unlock()
}

// backlogDone takes n frames off the port's backlog and wakes its NIC if
// the backlog fell to link.ResumeBacklog.
func (p *Port) backlogDone(n int64) {
	after := p.backlog.Add(-n)
	if after <= link.ResumeBacklog && after+n > link.ResumeBacklog {
		if d := p.rx.d.Load(); d != nil && d.waker != nil {
			d.waker.Wake()
		}
	}
}

// Backlog returns how many of the port's frames wait for a receiver that
// has no room (link.Backlogger); 0 for a lossy port (WithBuffer), which is
// never paused.
func (p *Port) Backlog() int {
	if p.buffer >= 0 {
		return 0
	}
	return int(p.backlog.Load())
}

// countRx counts frames (of n bytes) delivered to the port.
func (p *Port) countRx(frames, n int) {
	if frames > 0 {
		p.c.rxFrames.Add(uint64(frames))
		p.c.rxBytes.Add(uint64(n))
	}
}

// bytesOf returns the length of the frames of bufs.
func bytesOf(bufs []*link.Buf) int {
	n := 0
	for _, b := range bufs {
		n += b.Len()
	}
	return n
}
