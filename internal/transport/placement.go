package transport

import (
	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Placement bursts: the responder writes the payloads of a run of
// received RDMA WRITE and SEND packets, and the requester those of READ
// responses, into host memory with one DMA access (the bus's vectored
// scatter: one process_vm_writev for a program's memory, where each
// packet would make one), as a NIC's DMA engine coalesces posted writes.
// A packet that is not its message's last is checked, translated and
// accepted as before, but its payload waits (the frame holding it is
// kept) until the burst is placed: when the burst is full, when a
// message's last packet comes (a message completes only once all of its
// bytes are placed: its ACK, and any completion after it, reveal them),
// before any completion is written, and at the end of the frames
// Engine.Receive was given — before any frame leaves the NIC, so no ACK
// covers a byte not yet placed. A fault of the burst's access places the
// payloads one by one, and the packet whose payload cannot be written
// answers as it would have alone (a WRITE: a remote access error NAK at
// its PSN; a SEND: its receive fails with a local protection error and a
// remote operational error NAK; a READ response: the READ completes with
// a local protection error). The bytes of the packets before it stay
// placed, as they would on hardware; the QP's later payloads in the
// burst are dropped, its QP being in error.

// MaxPlaceBurst bounds Engine.SetPlaceBurst.
const MaxPlaceBurst = 64

// SetPlaceBurst has the engine place the payloads of up to n received
// WRITE, SEND and READ response packets with one DMA access, when the host memory behind the DMA
// engines supports it; 0 or 1 turns it off (the default: a write into
// the program's own memory costs a copy either way). A NIC that serves
// other processes turns it on. The bytes placed, the answers and the
// completions are the same either way.
func (e *Engine) SetPlaceBurst(n int) {
	e.place.max = min(max(n, 0), MaxPlaceBurst)
	if e.place.max < 2 || !e.cfg.DMA.Vectored() {
		e.place.max = 0
	}
}

// placeBurst is the run of received payloads waiting to be placed.
type placeBurst struct {
	max int
	// cur is the frame Engine.Receive is on (nil outside it): a payload
	// may wait only while its frame can be kept; held says it is, and
	// Receive leaves the frame to the burst.
	cur  *link.Buf
	held bool

	ws       []placedWrite
	segs     []atu.Seg // the extents of every waiting payload, in order
	srcs     [][]byte  // the payloads
	bufs     []*link.Buf
	bytes    int
	flushing bool  // placing now: a completion written on the way does not place again
	faults   []*QP // QPs whose payload could not be placed, in this placement
}

// placedWrite is a waiting payload: its QP, its packet's PSN, the READ
// WQE it answers (a READ response's; nil otherwise), whether it is a
// SEND's, and the end of its extents in placeBurst.segs.
type placedWrite struct {
	qp   *QP
	psn  wire.PSN
	w    *sendWQE
	send bool // a SEND's payload, into the receive WQE in progress
	end  int
}

// canDefer reports whether a received payload may wait for the burst.
// One sent by reference may not: it is borrowed only while its frame is
// received.
func (e *Engine) canDefer() bool {
	if e.place.max == 0 || e.place.cur == nil || e.cfg.Metadata {
		return false
	}
	ref, _ := e.place.cur.Ref()
	return ref == nil // a borrowed payload is placed while borrowed
}

// placeReceived writes a received payload into the translated segs, the
// way each receiver (recvWrite, recvSend, readResponse) writes them: one
// that is not its message's last (more) waits for the burst if bursts
// are on (deferPlace); otherwise the burst is placed first, then this
// payload (dmaScatter). It returns this payload's fault, and false if a
// payload of pw.qp before it in the burst faulted: that packet has
// answered already, its QP is in error, and this packet is not to be
// processed further.
func (e *Engine) placeReceived(pw placedWrite, segs []atu.Seg, src []byte, more bool) (atu.Fault, bool) {
	if more && e.canDefer() {
		return atu.OK, e.deferPlace(pw, segs, src)
	}
	if len(e.place.ws) > 0 && !e.placeWrites(pw.qp) {
		return atu.OK, false
	}
	return e.dmaScatter(pw.qp, segs, src), true
}

// scatterReceived is scatter (a local SGL) with placeReceived; through
// translation window w if not nil (one: the message is this packet).
func (e *Engine) scatterReceived(pw placedWrite, w *xlateWindow, one bool, pd uint32, sgl []SGE, off uint64, src []byte, more bool) (atu.Fault, bool) {
	var segs []atu.Seg
	var f atu.Fault
	if w != nil {
		segs, f = e.windowSGL(w, pw.qp, one, pd, sgl, off, uint64(len(src)), atu.LocalWrite)
	} else {
		segs, f = e.translateSGL(pw.qp, pd, sgl, off, uint64(len(src)), atu.LocalWrite)
	}
	ok := true
	if f == atu.OK {
		f, ok = e.placeReceived(pw, segs, src, more)
	}
	e.releaseSegs(segs)
	return f, ok
}

// deferPlace adds a translated payload to the burst, placing the burst
// first if it is full; false as placeReceived.
func (e *Engine) deferPlace(pw placedWrite, segs []atu.Seg, payload []byte) bool {
	pb := &e.place
	if len(pb.ws) == pb.max && !e.placeWrites(pw.qp) {
		return false
	}
	pb.segs = append(pb.segs, segs...)
	pw.end = len(pb.segs)
	pb.ws = append(pb.ws, pw)
	pb.srcs = append(pb.srcs, payload)
	pb.bytes += len(payload)
	if !pb.held {
		pb.bufs = append(pb.bufs, pb.cur)
		pb.held = true
	}
	return true
}

// placeWrites places the waiting payloads. It reports false if a payload
// of qp (nil: any QP) could not be placed: that packet's QP has answered
// with a remote access error and is in error.
func (e *Engine) placeWrites(qp *QP) bool {
	pb := &e.place
	if len(pb.ws) == 0 || pb.flushing {
		return true
	}
	pb.flushing = true
	n, err := e.cfg.DMA.ScatterV(pb.ws[0].qp.index, pb.segs, pb.srcs)
	if err == nil && n == pb.bytes {
		e.bill.DMAWrites += len(pb.ws)
		e.bill.DMAWriteBytes += n
	} else {
		e.placeEach()
	}
	ok := true
	for _, f := range pb.faults {
		if f == qp {
			ok = false
		}
	}
	clear(pb.faults)
	pb.faults = pb.faults[:0]
	for _, b := range pb.bufs {
		if b == pb.cur {
			pb.held = false // Receive releases the frame it is on
			continue
		}
		b.Release()
	}
	clear(pb.bufs)
	clear(pb.srcs)
	clear(pb.ws)
	clear(pb.segs)
	pb.bufs, pb.srcs, pb.ws, pb.segs, pb.bytes = pb.bufs[:0], pb.srcs[:0], pb.ws[:0], pb.segs[:0], 0
	pb.flushing = false
	return ok
}

// placeEach places the waiting payloads one by one after the burst's
// access failed: the one that faults fails its packet, as alone.
func (e *Engine) placeEach() {
	pb := &e.place
	start := 0
	for i, w := range pb.ws {
		segs := pb.segs[start:w.end]
		start = w.end
		if faulted(pb.faults, w.qp) {
			continue // its QP is in error: the rest of its WRITE is not placed
		}
		if f := e.dmaScatter(w.qp, segs, pb.srcs[i]); f != atu.OK {
			pb.faults = append(pb.faults, w.qp)
			switch {
			case w.w != nil: // a READ response (completer.readResponse)
				e.wqeDone(w.qp, w.w, WCLocProtErr)
				e.comp.afterCompletion(w.qp, true)
			case w.send: // responder.recvSend
				e.resp.recvError(w.qp, WCLocProtErr)
				e.resp.requestError(w.qp, w.psn, wire.NAKRemoteOpErr)
			default: // responder.recvWrite
				e.count(w.qp, RespRemoteAccessErrors)
				e.resp.accessError(w.qp, w.psn)
			}
		}
	}
}

func faulted(qps []*QP, qp *QP) bool {
	for _, q := range qps {
		if q == qp {
			return true
		}
	}
	return false
}
