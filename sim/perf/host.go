package perf

import (
	"context"
	"math"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/sim"
)

// The application threads of a host, as perftest's: each is a thread of
// the run's virtual clock that drives its QPs through the public API —
// PostSend (the profile's post time, then the doorbell), CQ.Wait (a
// completion is seen when the model has written its CQE to host memory,
// one poll time each) and, for write_lat, WaitWrite (perftest polls the
// buffer for the peer's data).

// thread is one application thread: its QPs and their completion queue.
type thread struct {
	h      *host
	cq     *rnic.CQ
	qps    []*qpRun
	byQP   map[uint32]*qpRun
	wcs    []rnic.WC
	active int // QPs whose part is not done
}

// run is the thread's body: start each QP, then react to what the NIC
// makes visible until every QP has done its part.
func (th *thread) run() {
	r := th.h.run
	if r.start > 0 && r.vc.Sleep(time.Duration(r.start)) != nil {
		return
	}
	for _, q := range th.qps {
		if q.start() {
			th.active++
		}
	}
	for th.active > 0 && r.err == nil {
		if r.spec.Test == WriteLat {
			th.writeLat()
			continue
		}
		n, err := th.cq.Wait(context.Background(), th.wcs)
		if err != nil {
			r.fail(err)
			return
		}
		seen := r.now()
		for i := range th.wcs[:n] {
			wc := &th.wcs[i]
			q := th.byQP[wc.QPNum]
			if r.trace != nil {
				r.trace(seen, th.h, "host polls the completion")
			}
			if q == nil {
				continue
			}
			if wc.Status != rnic.WCSuccess {
				r.errors++
				q.failed()
				continue
			}
			q.completion(wc, seen)
		}
	}
}

// writeLat waits for the peer's WRITE into one of the thread's buffers:
// the client's round trip ends, the server answers. Between pings the
// thread takes its own send completions, as perftest polls its CQ once
// per iteration.
func (th *thread) writeLat() {
	r := th.h.run
	var waiting []*rnic.QP
	for _, q := range th.qps {
		if !q.over {
			waiting = append(waiting, q.qp)
		}
	}
	qp, err := r.vc.WaitWrite(r.spec.Size, waiting...)
	if err != nil {
		r.fail(err)
		return
	}
	seen := r.now()
	if r.trace != nil {
		r.trace(seen, th.h, "host sees the data")
	}
	q := th.byQP[qp.QPN()]
	if q.client {
		q.roundTrip(seen)
	} else {
		q.post()
		q.pongs++
		if q.pongs == q.peer.iters {
			q.finish()
		}
	}
	n, err := th.cq.Poll(th.wcs)
	if err != nil {
		r.fail(err)
		return
	}
	for _, wc := range th.wcs[:n] {
		if wc.Status != rnic.WCSuccess {
			r.errors++
			if q := th.byQP[wc.QPNum]; q != nil {
				q.failed()
			}
		}
	}
}

// start begins a QP's part of the test and reports whether it has one
// (a WRITE, READ or atomic bandwidth test's server only answers in its
// NIC).
func (q *qpRun) start() bool {
	sp := &q.h.run.spec
	switch {
	case !q.client:
		switch sp.Test {
		case SendBW, SendLat:
			q.postRecvs(min(sp.Iters, sp.RxDepth))
			return true
		case WriteLat:
			return true
		}
		return false
	case sp.Test == SendLat:
		q.postRecvs(2)
		q.post()
	case latency(sp.Test):
		q.post()
	default:
		q.fill(sp.TxDepth)
	}
	return true
}

// failed ends the part of a QP that completed a work request in error
// (retry or RNR retries exhausted, or flushed): an RC QP is in the error
// state then and completes nothing more, so its thread would wait for
// ever. The run ends with the errors counted (wc_errors).
func (q *qpRun) failed() {
	if !q.over {
		q.finish()
	}
}

// finish marks the QP's part done.
func (q *qpRun) finish() {
	q.over = true
	q.th.active--
	if q.client {
		q.h.run.finished++
	}
}

// post posts the QP's next operation: the post time passes, then the
// doorbell.
func (q *qpRun) post() { q.postList(1) }

// postList posts the QP's next k operations (fewer if the run has fewer
// left) in one call: the post time of each passes, then one doorbell.
func (q *qpRun) postList(k int) {
	r := q.h.run
	if q.client {
		q.cut()
		k = min(k, q.iters-q.posted)
	}
	if k <= 0 {
		return
	}
	start := r.now()
	for i := range k {
		q.wr[i] = q.next(i, start)
	}
	err := q.qp.PostSend(q.wr[:k]...)
	if r.trace != nil && q.wr[0].Opcode == rnic.WRRDMAWrite {
		r.trace(start, q.h, "host starts posting the WRITE")
		r.trace(r.now(), q.h, "WQE built, doorbell written")
	}
	if err != nil {
		r.errors++
	}
}

// fill posts lists of the spec's length while the send queue has room
// for one (free slots counted in q.room), as perftest -l does; the run's
// last list may be shorter.
func (q *qpRun) fill(freed int) {
	r := q.h.run
	q.room += freed
	for {
		q.cut()
		if q.posted >= q.iters {
			return
		}
		k := min(r.spec.PostList, q.iters-q.posted)
		if r.rate > 0 {
			k = min(k, q.due) // posted at the tenant's rate: what is due
		}
		if k == 0 || q.room < k {
			return
		}
		q.room -= k
		if r.rate > 0 {
			q.due -= k
		}
		q.postList(k)
	}
}

// cut ends a client's operations at its tenant's stop time: the next one
// it posts is its last (signaled, so that it retires the ones before).
func (q *qpRun) cut() {
	r := q.h.run
	if r.stop > 0 && q.client && q.iters > q.posted+1 && r.now() >= r.stop {
		q.iters = q.posted + 1
	}
}

// next builds the QP's next work request in list slot i, posted at start.
func (q *qpRun) next(i int, start sim.Time) rnic.SendWR {
	r := q.h.run
	sp := &r.spec
	wr := rnic.SendWR{WRID: uint64(q.posted)}
	if !q.client || (q.posted+1)%sp.CQMod == 0 || q.posted+1 == q.iters {
		wr.Flags = rnic.SendSignaled
	}
	off := q.off
	if sp.Random && !latency(sp.Test) {
		off = int(r.vc.Rand().Uint64N(uint64(sp.Footprint/sp.Size))) * sp.Size
		if q.touched != nil {
			q.touched[off/sp.Size] = true
		}
	} else {
		q.off += sp.Size
		if q.off+sp.Size > sp.Footprint {
			q.off = 0
		}
	}
	q.lastOff = off // a SEND lands at the start of the receive buffer: the check needs the last one's source
	q.sge[i] = rnic.SGE{Addr: q.h.base[q.idx] + uint64(off), Length: uint32(sp.Size), LKey: q.h.mrs[q.idx].LKey()}
	wr.SGL = q.sge[i : i+1] // PostSend copies the WR into the send queue
	wr.RemoteAddr, wr.RKey = q.raddr+uint64(off), q.rkey
	switch sp.Test {
	case WriteBW, WriteLat:
		wr.Opcode = rnic.WRRDMAWrite
	case ReadBW, ReadLat:
		wr.Opcode = rnic.WRRDMARead
	case SendBW, SendLat:
		wr.Opcode = rnic.WRSend
	case AtomicBW:
		wr.Opcode, wr.CompareAdd = rnic.WRAtomicFetchAndAdd, 1
		if sp.AtomicType == CmpAndSwap {
			wr.Opcode, wr.CompareAdd, wr.Swap = rnic.WRAtomicCmpAndSwp, uint64(q.posted), uint64(q.posted)+1
		}
		wr.SGL[0].Addr = q.h.base[q.idx] + uint64(off&^7)
		switch sp.AtomicTarget {
		case AtomicPerQP:
			wr.RemoteAddr = q.raddr
		case AtomicShared:
			srv := q.peer.h
			wr.RemoteAddr, wr.RKey = srv.base[0], srv.mrs[0].RKey()
		default:
			wr.RemoteAddr = q.raddr + uint64(off&^7)
		}
	}
	if sp.Size <= sp.Inline && (wr.Opcode == rnic.WRRDMAWrite || wr.Opcode == rnic.WRSend) {
		wr.Flags |= rnic.SendInline
	}
	if q.client {
		q.posted++
		if latency(sp.Test) {
			// perftest takes its timestamp before ibv_post_send.
			q.started = append(q.started, start)
		}
	}
	return wr
}

// postRecvs posts n receive work requests.
func (q *qpRun) postRecvs(n int) {
	sp := &q.h.run.spec
	for range n {
		q.rsge[0] = rnic.SGE{Addr: q.h.base[q.idx], Length: uint32(max(sp.Size, 1)), LKey: q.h.mrs[q.idx].LKey()}
		if err := q.qp.PostRecv(rnic.RecvWR{WRID: uint64(q.recvs), SGL: q.rsge[:]}); err != nil {
			q.h.run.errors++
			return
		}
		q.recvs++
	}
}

// recvLoop is a send_bw server's receive poster (Spec.RecvEvery): every
// RecvEvery it posts one receive on each of the host's QPs that has fewer
// than rx_depth outstanding, until every QP has posted its iterations.
func (h *host) recvLoop() {
	r := h.run
	sp := &r.spec
	for {
		if r.vc.Sleep(time.Duration(sp.RecvEvery)) != nil || r.err != nil {
			return
		}
		left := false
		for _, q := range h.qps {
			if q.recvs < q.peer.iters {
				left = true
				if q.recvs-q.received < sp.RxDepth {
					q.postRecvs(1)
				}
			}
		}
		if !left {
			return
		}
	}
}

// rateLoop is a rate-limited tenant's poster on one client host: from the
// tenant's start, every 1/rate each of the host's QPs has one more
// operation due, posted at once if its send queue has room (else when a
// completion frees it), until every QP has posted its operations.
func (h *host) rateLoop() {
	r := h.run
	every := sim.Time(math.Round(1e9 / r.rate))
	next := r.start
	for {
		// Deadlines, not sleeps of a period: posting takes the thread
		// time of its own.
		next += every
		if r.vc.Sleep(time.Duration(max(next-r.now(), 0))) != nil || r.err != nil {
			return
		}
		left := false
		for _, q := range h.qps {
			if q.posted < q.iters && !q.over {
				left = true
				q.due++
				q.fill(0)
			}
		}
		if !left {
			return
		}
	}
}

// completion reacts to one polled completion, seen at seen.
func (q *qpRun) completion(wc *rnic.WC, seen sim.Time) {
	r := q.h.run
	sp := &r.spec
	recv := wc.Opcode == rnic.WCRecv
	switch {
	case sp.Test == SendLat && recv:
		q.postRecvs(1)
		if q.client {
			q.roundTrip(seen)
			return
		}
		q.post()
		q.pongs++
		if q.pongs == q.peer.iters {
			q.finish()
		}
	case sp.Test == SendBW && recv:
		q.received++
		if q.recvs < q.peer.iters && sp.RecvEvery == 0 {
			q.postRecvs(1)
		}
		if q.received == q.peer.iters {
			q.finish()
		}
	case !q.client:
		// A server's own send completion (send_lat's): nothing.
	case sp.Test == ReadLat:
		q.roundTrip(seen)
	case latency(sp.Test):
		// send_lat measures on the peer's data, not on the local
		// completion.
	default:
		// A signaled completion retires the unsignaled work requests
		// posted before it (completions come in order).
		n := int(wc.WRID) + 1 - q.done
		for range n {
			q.done++
			r.measure(q, sp.Size, seen)
		}
		if q.done == q.iters {
			q.finish()
			return
		}
		q.fill(n)
	}
}

// roundTrip ends a latency test's iteration at seen and starts the next.
func (q *qpRun) roundTrip(seen sim.Time) {
	r := q.h.run
	sp := &r.spec
	i := q.done
	lat := seen - q.started[i]
	if sp.Test != ReadLat {
		lat /= 2 // perftest reports half the round trip for write and send
	}
	q.done++
	if q.done > sp.Warmup {
		r.lat.Add(int64(lat))
		r.latMin = min(r.latMin, lat)
		r.latSum += float64(lat)
		r.latN++
	}
	r.measure(q, sp.Size, seen)
	if q.done == q.iters {
		q.finish()
		return
	}
	q.post()
}

// pollBatch is how many completions a thread takes per poll, perftest's
// CTX_POLL_BATCH.
const pollBatch = 16
