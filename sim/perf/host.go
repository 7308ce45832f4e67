package perf

import (
	"context"
	"errors"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/perftest"
	"github.com/rnic/rnic/sim"
)

// The application threads of a host. Each is a thread of the run's
// virtual clock that runs perftest's own loop over its QPs
// (perftest.RunWorker: run_iter_bw, run_iter_lat_write, ...): it posts
// (the profile's post time, then the doorbell), sleeps on its CQ until
// the model makes completions visible and takes up to 16 per poll (the
// poll time each), and in write_lat waits for the peer's WRITE. What a
// run measures comes from the loop's observer (thread.Posted and
// Completed), on the clock's time.

// thread is one application thread: its QPs and their completion
// queues (two in SEND tests, whose loops wait on each separately).
type thread struct {
	h              *host
	sendCQ, recvCQ *rnic.CQ
	qps            []*qpRun
}

// run is the thread's body: from its tenant's start, perftest's loop for
// its side until every QP has done its part. A completion in error ends
// the thread's part (perftest stops at it), counted in the result's
// errors; the clock ending the run leaves it unfinished.
func (th *thread) run() {
	r := th.h.run
	if len(th.qps) == 0 {
		return // more threads than QPs
	}
	if r.start > 0 && r.vc.Sleep(time.Duration(r.start)) != nil {
		return
	}
	err := perftest.RunWorker(context.Background(), th.config())
	if err != nil {
		if errors.Is(err, rnic.ErrTimeLimit) || errors.Is(err, rnic.ErrDeadlock) || errors.Is(err, rnic.ErrRunOver) {
			r.fail(err)
			return
		}
		r.errors++
	}
	for _, q := range th.qps {
		if !q.over {
			q.finish()
		}
	}
}

// config is the thread's part as perftest's loop takes it.
func (th *thread) config() perftest.WorkerConfig {
	r := th.h.run
	sp := &r.spec
	c := perftest.NewConfig(sp.Test)
	c.Clock = r.vc
	c.Size, c.Iters = sp.Size, sp.Iters
	c.TxDepth, c.CQMod, c.PostList = sp.TxDepth, sp.CQMod, sp.PostList
	if sp.Test == SendBW || sp.Test == SendLat {
		c.RxDepth = sp.RxDepth // the RDMA tests' servers post no receives
	}
	c.Inline = sp.Inline
	if sp.AtomicType == CmpAndSwap {
		c.Atomic = perftest.CmpAndSwap
	}
	client := th.qps[0].client
	w := perftest.WorkerConfig{Config: c, Client: client, SendCQ: th.sendCQ, RecvCQ: th.recvCQ,
		CycleBuffer: sp.Footprint, Metadata: sp.Metadata, Observer: th}
	if client {
		w.Stop, w.Rate = time.Duration(r.stop), r.rate
		if sp.Random {
			w.Random = r.vc.Rand()
		}
	} else {
		w.RecvEvery = time.Duration(sp.RecvEvery)
	}
	h := th.h
	for _, q := range th.qps {
		wq := perftest.WorkerQP{QP: q.qp, MR: h.mrs[q.idx], Local: h.base[q.idx], Target: h.target(q.idx),
			Remote: q.peer.h.target(q.peer.idx), RKey: q.rkey}
		if sp.Test == AtomicBW {
			switch sp.AtomicTarget {
			case AtomicPerQP:
				w.FixedRemote = true
			case AtomicShared:
				srv := q.peer.h
				w.FixedRemote, wq.Remote, wq.RKey = true, srv.base[0], srv.mrs[0].RKey()
			}
		}
		w.QPs = append(w.QPs, wq)
	}
	return w
}

// Posted is the loop posting n work requests of its QP i from local
// address addr: a latency test's sample is the time since the QP's
// previous post (perftest's measure: half of it for WRITE and SEND
// ping-pongs); random offsets and SENDs note what they sent, for the
// data check.
func (th *thread) Posted(i, n int, addr uint64, at time.Duration) {
	q := th.qps[i]
	r := q.h.run
	sp := &r.spec
	now := sim.Time(at)
	if r.trace != nil && q.client && (sp.Test == WriteBW || sp.Test == WriteLat) {
		r.trace(now, q.h, "host starts posting the WRITE")
	}
	off := int(addr - q.h.base[q.idx])
	q.lastOff = off
	if q.touched != nil {
		q.touched[off/slotStep(sp.Size)] = true
	}
	if !q.client || !latency(sp.Test) {
		return
	}
	if q.posts > 0 {
		lat := now - q.lastPost
		if sp.Test != ReadLat {
			lat /= 2
		}
		if q.posts > sp.Warmup {
			r.lat.Add(int64(lat))
			r.latMin = min(r.latMin, lat)
			r.latSum += float64(lat)
			r.latN++
		}
	}
	q.posts++
	q.lastPost = now
}

// Rung is the loop's post call returning: the WQEs are written and the
// doorbell rung.
func (th *thread) Rung(i int, at time.Duration) {
	q := th.qps[i]
	r := q.h.run
	if r.trace != nil && q.client && (r.spec.Test == WriteBW || r.spec.Test == WriteLat) {
		r.trace(sim.Time(at), q.h, "WQE built, doorbell written")
	}
}

// Completed is the loop seeing n operations of its QP i done: a client's
// are measured, each as one operation of the message size.
func (th *thread) Completed(i, n int, at time.Duration) {
	q := th.qps[i]
	r := q.h.run
	now := sim.Time(at)
	if r.trace != nil {
		what := "host polls the completion"
		if r.spec.Test == WriteLat {
			what = "host sees the data"
		}
		r.trace(now, q.h, what)
	}
	if !q.client {
		return
	}
	for range n {
		q.done++
		r.measure(q, r.spec.Size, now)
	}
	if q.done == r.spec.Iters {
		q.finish()
	}
}

// finish marks the QP's part done.
func (q *qpRun) finish() {
	q.over = true
	if q.client {
		q.h.run.finished++
	}
}

// slotStep is how far consecutive messages are apart in a QP's buffer,
// as perftest moves through its cycle buffer: the message size rounded
// up to a 64-byte cache line.
func slotStep(size int) int { return (size + 63) / 64 * 64 }
