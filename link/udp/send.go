package udp

import (
	"github.com/rnic/rnic/link"
)

// txScratch is one Send call's working state: the frames that passed the
// checks, the loss decisions, and the platform's system-call arrays. Sends
// run concurrently, so each takes one from the link's pool; in steady state
// they are reused and Send allocates nothing.
type txScratch struct {
	frames  []txFrame
	keep    []bool
	sibling []*link.Buf // a batch for a sibling (toSiblings)
	kicks   []kick      // siblings to kick after the send (kickSiblings)
	sys     sysTx
}

func (l *Link) newTxScratch() *txScratch {
	s := &txScratch{}
	s.sys.init(l)
	return s
}

// Send transmits frames, taking ownership of every buffer (see link.Link):
// each is released before Send returns, once the kernel has copied it or
// it was dropped and counted. Send is safe for concurrent use. It waits
// only for room in the local socket buffer, never for the receiver.
//
// Outbound flow, in this order:
//
//  1. Closed check: on a closed link every frame is released (ClosedDrops).
//  2. Checks, per frame (checkTx): MTU (Oversize), IP/UDP structure and
//     lengths (Malformed), header fields the kernel would write otherwise
//     (Mismatch). These frames draw no fault decision.
//  3. Loss (Faults.Loss), one draw per remaining frame (Dropped).
//  4. Frames to a sibling (a link of this process) are handed to it in
//     memory (toSiblings, sibling.go).
//  5. The platform writes the UDP payloads, batched (sendmmsg, and GSO for
//     runs of equal-size IPv6 frames to one destination); frames the kernel
//     refuses are SendErrors, frames cut off by Close are ClosedDrops.
func (l *Link) Send(bufs []*link.Buf) {
	if len(bufs) == 0 {
		return
	}
	var n int
	for _, b := range bufs {
		n += b.Len()
	}
	l.c.txFrames.Add(uint64(len(bufs)))
	l.c.txBytes.Add(uint64(n))
	if l.closed.Load() {
		for _, b := range bufs {
			b.Release()
		}
		l.c.closedDrops.Add(uint64(len(bufs)))
		return
	}

	s := l.tx.Get().(*txScratch)
	var t txTally
	frames := s.frames[:0]
	for _, b := range bufs {
		var tf txFrame
		switch l.checkTx(b.Bytes(), &tf) {
		case ok:
			tf.b = b
			frames = append(frames, tf)
			continue
		case oversize:
			t.oversize++
		case mismatch:
			t.mismatch++
		case malformed:
			t.malformed++
		}
		b.Release()
	}
	if l.txLoss.on.Load() && len(frames) > 0 {
		frames = l.loseTx(s, frames, &t)
	}
	if l.o.Siblings {
		if m := siblings.m.Load(); m != nil && len(*m) > 0 && len(frames) > 0 {
			frames = l.toSiblings(s, *m, frames, &t)
		}
		// What leaves through the socket carries its ICRC: the NIC may
		// have left it out (Intact), for a sibling.
		for _, f := range frames {
			link.FixICRC(f.b)
		}
	}
	if len(frames) > 0 {
		l.sys.send(l, &s.sys, frames, &t)
	}
	t.addTo(&l.c)
	clear(frames) // drop the buffer pointers: they belong to the kernel's past
	s.frames = frames[:0]
	s.kickSiblings()
	l.tx.Put(s)
}

// loseTx applies Faults.Loss to frames, releasing the lost ones, and
// returns the survivors (compacted in place, order kept).
func (l *Link) loseTx(s *txScratch, frames []txFrame, t *txTally) []txFrame {
	keep := s.keep[:0]
	for range frames {
		keep = append(keep, true)
	}
	s.keep = keep
	t.dropped += l.txLoss.drop(keep)
	out := frames[:0]
	for i, f := range frames {
		if keep[i] {
			out = append(out, f)
		} else {
			f.b.Release()
		}
	}
	clear(frames[len(out):])
	return out
}
