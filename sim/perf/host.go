package perf

import (
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
)

// The application thread of a host, as perftest's: it posts work requests
// and reacts to completions (and, in write_lat, to data written into its
// memory) in the order they become visible, one at a time.

// hostPost schedules a post for q after its thread is free and has spent
// the profile's post time.
func (h *host) hostPost(q *qpRun, now sim.Time) {
	q.postReq = now
	_, done := q.cpu.Serve(now, sim.Time(h.run.prof.Host.PostSendNs))
	h.run.s.Schedule(sim.Event{At: done, Kind: evPost, Ptr: q, H: h.run})
}

// start begins a QP's part of the test.
func (q *qpRun) start() {
	r := q.h.run
	sp := &r.spec
	now := r.s.Now()
	switch {
	case !q.client:
		if sp.Test == SendBW || sp.Test == SendLat {
			q.postRecvs(min(sp.Iters, sp.TxDepth*2))
		}
	case sp.Test == SendLat:
		q.postRecvs(2)
		q.h.hostPost(q, now)
	case sp.Test.latency():
		q.h.hostPost(q, now)
	default:
		for range min(sp.TxDepth, sp.Iters) {
			q.queued++
			q.h.hostPost(q, now)
		}
	}
}

// post posts the QP's next operation (the host thread has built it).
func (q *qpRun) post() {
	r := q.h.run
	sp := &r.spec
	if q.client && q.posted >= sp.Iters {
		return
	}
	if q.queued > 0 {
		q.queued--
	}
	wr := transport.SendWR{WRID: uint64(q.posted)}
	if !q.client || (q.posted+1)%sp.CQMod == 0 || q.posted+1 == sp.Iters {
		wr.Flags = transport.SendSignaled
	}
	off := q.off
	if sp.Random && !sp.Test.latency() {
		off = int(r.s.Rand().Uint64N(uint64(sp.Footprint/sp.Size))) * sp.Size
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
	sge := transport.SGE{Addr: q.h.base[q.idx] + uint64(off), Length: uint32(sp.Size), LKey: q.h.mrs[q.idx]}
	q.sge[0] = sge
	wr.SGL = q.sge[:] // PostSend copies the WR into the send queue
	wr.RemoteAddr, wr.RKey = q.raddr+uint64(off), q.rkey
	switch sp.Test {
	case WriteBW, WriteLat:
		wr.Opcode = transport.WRRDMAWrite
	case ReadBW, ReadLat:
		wr.Opcode = transport.WRRDMARead
	case SendBW, SendLat:
		wr.Opcode = transport.WRSend
	case AtomicBW:
		wr.Opcode = transport.WRAtomicFetchAndAdd
		wr.CompareAdd = 1
		wr.RemoteAddr = q.raddr + uint64(off&^7)
		wr.SGL[0].Addr = q.h.base[q.idx] + uint64(off&^7)
	}
	if sp.Size <= sp.Inline && (wr.Opcode == transport.WRRDMAWrite || wr.Opcode == transport.WRSend) {
		wr.Flags |= transport.SendInline
	}
	if q.client {
		q.posted++
		if sp.Test.latency() {
			// perftest takes its timestamp before ibv_post_send.
			q.started = append(q.started, q.postReq)
		}
	}
	if r.trace != nil && wr.Opcode == transport.WRRDMAWrite {
		r.trace(q.postReq, q.h, "host starts posting the WRITE")
		r.trace(r.s.Now(), q.h, "WQE built, doorbell written")
	}
	q.wr[0] = wr
	if _, err := q.qp.PostSend(q.wr[:]); err != nil {
		r.errors++
	}
}

// postRecvs posts n receive work requests.
func (q *qpRun) postRecvs(n int) {
	sp := &q.h.run.spec
	for range n {
		wr := transport.RecvWR{WRID: uint64(q.recvs),
			SGL: []transport.SGE{{Addr: q.h.base[q.idx], Length: uint32(max(sp.Size, 1)), LKey: q.h.mrs[q.idx]}}}
		if _, err := q.qp.PostRecv([]transport.RecvWR{wr}); err != nil {
			q.h.run.errors++
			return
		}
		q.recvs++
	}
}

// CQEVisible is the NIC telling the host that n completions of cq can now
// be polled. The thread polls them (paying the poll time each) and reacts.
func (h *host) CQEVisible(cq *transport.CQ, n int) {
	r := h.run
	for n > 0 {
		k := cq.Poll(h.wcs[:min(n, len(h.wcs))])
		if k == 0 {
			break
		}
		n -= k
		for _, wc := range h.wcs[:k] {
			q := h.byQP[wc.QPNum]
			if q == nil {
				continue
			}
			_, seen := q.cpu.Serve(r.s.Now(), sim.Time(r.prof.Host.PollCQNs))
			if r.trace != nil {
				r.trace(seen, h, "host polls the completion")
			}
			if wc.Status != transport.WCSuccess {
				r.errors++
				continue
			}
			q.completion(&wc, seen)
		}
	}
}

// completion reacts to one polled completion.
func (q *qpRun) completion(wc *transport.WC, seen sim.Time) {
	r := q.h.run
	sp := &r.spec
	recv := wc.Opcode == transport.WCRecv
	switch {
	case sp.Test == SendLat && recv:
		q.postRecvs(1)
		if q.client {
			q.roundTrip(seen)
		} else {
			q.h.hostPost(q, seen)
		}
	case sp.Test == SendBW && recv:
		if q.recvs < sp.Iters {
			q.postRecvs(1)
		}
	case !q.client:
		// A server's own send completion (write_lat's, send_lat's): nothing.
	case sp.Test == ReadLat:
		q.roundTrip(seen)
	case sp.Test.latency():
		// write_lat and send_lat measure on the peer's data, not on the
		// local completion.
	default:
		// A signaled completion retires the unsignaled work requests
		// posted before it (completions come in order).
		n := int(wc.WRID) + 1 - q.done
		for range n {
			q.done++
			r.measure(q, sp.Size)
		}
		if q.done == sp.Iters {
			r.qpFinished()
			return
		}
		for range n {
			if q.posted+q.queued < sp.Iters {
				q.queued++
				q.h.hostPost(q, seen)
			}
		}
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
	r.measure(q, sp.Size)
	if q.done == sp.Iters {
		r.qpFinished()
		return
	}
	q.h.hostPost(q, seen)
}

// WriteVisible is the NIC telling the host that an RDMA WRITE into QP
// qpn's region is visible: write_lat's pong (server) or round trip
// (client), which perftest detects by polling the buffer's last byte.
func (h *host) WriteVisible(qpn uint32, bytes int) {
	r := h.run
	if r.spec.Test != WriteLat {
		return
	}
	q := h.byQP[qpn]
	if q == nil {
		return
	}
	q.pingSeen += bytes
	if q.pingSeen < r.spec.Size {
		return // not the whole message yet
	}
	q.pingSeen -= r.spec.Size
	_, seen := q.cpu.Serve(r.s.Now(), sim.Time(r.prof.Host.PollCQNs))
	if r.trace != nil {
		r.trace(seen, h, "host sees the data")
	}
	if q.client {
		q.roundTrip(seen)
	} else {
		h.hostPost(q, seen)
	}
}
