package perftest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rnic/rnic"
)

// latRun is the state shared by the latency loops.
type latRun struct {
	s        *session
	size     int
	iters    uint64
	clk      clock
	dur      *durTimer
	tposted  []int64
	measured uint64
	wc       [1]rnic.WC
	prog     *progress
	cpu      *cpuUtil
	polled   [1]byte // write_lat: the byte pollByte reads
}

func (s *session) newLatRun(size int) *latRun {
	p := s.p
	l := &latRun{s: s, size: size, iters: uint64(p.iters), clk: s.newClock(), dur: newDurTimer(p), prog: newProgress(s.errw, p.Test.String())}
	if p.observer == nil { // a Worker's observer has the time stamps
		l.tposted = make([]int64, max(p.iters, 1))
	}
	return l
}

// report computes the run's result; rtt is 2 for ping-pongs, 1 for READ.
func (l *latRun) report(rtt int) LatReport {
	l.done()
	if l.dur.on {
		from, to := l.dur.window()
		return computeLatDuration(l.size, int(l.measured), to-from, rtt)
	}
	return computeLat(l.size, int(l.iters), l.tposted, rtt)
}

// wait waits for one completion on cq (polling, or with -e sleeping on
// its events), for at most the timeout, or in a -D run until it ends
// (ended).
func (l *latRun) wait(ctx context.Context, cq *rnic.CQ, what string, done uint64) (ended bool, err error) {
	deadline := time.Now().Add(l.s.timeout())
	if l.dur.on && l.dur.started {
		deadline = l.clk.at(l.dur.end())
	}
	if _, err := l.s.waitCQ(ctx, cq, l.wc[:], deadline); err != nil {
		if l.dur.on && l.dur.started && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return true, nil
		}
		return false, l.s.stalled(err, what, done, l.iters)
	}
	if wc := l.wc[0]; wc.Status != rnic.WCSuccess {
		return false, l.s.completionError(l.s.side(), wc, l.size, done, done)
	}
	return false, nil
}

// startDur starts a -D run's clock (and its CPU readings) once.
func (l *latRun) startDur() {
	if !l.dur.started {
		l.dur.start(l.clk.now())
		l.cpu = l.s.newCPUUtil(l.clk, l.dur)
	}
}

// done ends the run: the CPU utilization for the report.
func (l *latRun) done() {
	l.cpu.stop()
	l.s.cpu = l.cpu.percent()
}

// stamp records the post of message scnt (iterations mode) from the
// buffer at addr.
func (l *latRun) stamp(scnt uint64, addr uint64) {
	if o := l.s.p.observer; o != nil {
		o.Posted(0, 1, addr, l.clk.abs(l.clk.now()))
		return
	}
	if !l.dur.on {
		l.tposted[scnt] = l.clk.now()
	}
}

// rung tells a Worker's observer that the post call returned.
func (l *latRun) rung() {
	if o := l.s.p.observer; o != nil {
		o.Rung(0, l.clk.abs(l.clk.now()))
	}
}

// arrived tells a Worker's observer that a round trip's answer (the
// peer's message, or the READ's completion) is here.
func (l *latRun) arrived() {
	if o := l.s.p.observer; o != nil {
		o.Completed(0, 1, l.clk.abs(l.clk.now()))
	}
}

// count counts one round trip if it falls in a -D run's measured part.
func (l *latRun) count() {
	if l.dur.sampling(l.clk.now()) {
		l.measured++
	}
}

// more reports whether a counter is below the iterations, or a -D run
// goes on.
func (l *latRun) more(n uint64) bool {
	if l.dur.on {
		return !l.dur.ended(l.clk.now())
	}
	return n < l.iters
}

// runWriteLat is run_iter_lat_write: a ping-pong of RDMA WRITEs. Each
// side writes the message's last byte (the iteration number) before
// posting and polls its own buffer's last byte for the peer's WRITE,
// through MR.ReadAt. The server writes first.
func (s *session) runWriteLat(ctx context.Context, size int) (LatReport, error) {
	l := s.newLatRun(size)
	q := s.res.qps[0]
	sd := s.newSender(0, size)
	sd.wrs[0].Flags |= rnic.SendSignaled
	postOff := q.offset(q.buf) + int64(size-1)
	pollOff := q.offset(q.my.VAddr) + int64(size-1)
	l.startDur()
	var scnt, ccnt, rcnt uint64
	for l.more(scnt) || (!l.dur.on && (ccnt < l.iters || rcnt < l.iters)) {
		if l.more(rcnt) && !(scnt < 1 && !s.p.client) {
			rcnt++
			ended, err := s.pollByte(ctx, q.qp, q.mr, pollOff, byte(rcnt), l)
			if err != nil {
				return LatReport{}, err
			}
			if ended {
				break
			}
			l.arrived()
		}
		if l.more(scnt) {
			l.stamp(scnt, sd.sges[0].Addr)
			scnt++
			if s.p.metadata {
				// No bytes to mark: the peer waits for the WRITE itself.
			} else if _, err := q.mr.WriteAt([]byte{byte(scnt)}, postOff); err != nil {
				return LatReport{}, err
			}
			if err := q.qp.PostSend(sd.wrs[0]); err != nil {
				return LatReport{}, fmt.Errorf("perftest: couldn't post send: scnt=%d: %w", scnt, err)
			}
			l.rung()
		}
		if l.dur.ended(l.clk.now()) {
			break
		}
		if l.more(ccnt) {
			ended, err := l.wait(ctx, s.res.sendCQ, "completion", ccnt)
			if err != nil || ended {
				return l.report(2), err
			}
			ccnt++
			l.count()
		}
		l.prog.tick(max(ccnt, l.measured), l.iters, s.p.Duration)
	}
	return l.report(2), nil
}

// Polling the buffer: spin first, as perftest does, then nap, so that a
// wait longer than a few tens of microseconds leaves the CPU to the NICs'
// goroutines (on a small machine, two spinning peers starve the packets
// they wait for).
const (
	pollSpins = 500
	pollNap   = 2 * time.Microsecond
)

// pollByte waits until the byte at off of mr is want: the peer's WRITE
// has landed. It gives up after the timeout, or when a -D run ends.
func (s *session) pollByte(ctx context.Context, qp *rnic.QP, mr *rnic.MR, off int64, want byte, l *latRun) (ended bool, err error) {
	b := l.polled[:] // in the run, not on the stack: ReadAt would move it to the heap on every call
	if vc := s.p.Clock; vc != nil {
		// In virtual time memory reads are no yield point: wait for the
		// peer's message (one WRITE of the message size) to be visible,
		// then look. Regions of metadata have no byte to look at: the
		// WRITE's arrival is the answer.
		if s.p.metadata {
			if _, err := vc.WaitWrite(l.size, qp); err != nil {
				return false, fmt.Errorf("perftest: waiting for the peer's RDMA WRITE %d: %w", want, err)
			}
			return false, nil
		}
		for {
			if _, err := mr.ReadAt(b, off); err != nil || b[0] == want {
				return false, err
			}
			if _, err := vc.WaitWrite(l.size, qp); err != nil {
				return false, fmt.Errorf("perftest: waiting for the peer's RDMA WRITE %d: %w", want, err)
			}
		}
	}
	deadline := time.Now().Add(s.timeout())
	for spin := 0; ; spin++ {
		if _, err := mr.ReadAt(b, off); err != nil {
			return false, err
		}
		if b[0] == want {
			return false, nil
		}
		if l.dur.ended(l.clk.now()) {
			return true, nil
		}
		if spin%256 == 255 {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if time.Now().After(deadline) {
				return false, fmt.Errorf("perftest: the peer's RDMA WRITE %d did not arrive within %v", want, s.timeout())
			}
		}
		if spin < pollSpins {
			// An empty poll of the send CQ drives the NIC on this thread
			// (rnic.CQ.Poll), as a poll that finds nothing does, and
			// yields: the peer's WRITE is taken in here, not by a NIC
			// goroutine that must be woken for it.
			if _, err := s.res.sendCQ.Poll(nil); err != nil && !errors.Is(err, rnic.ErrCQOverrun) {
				return false, err
			}
		} else {
			time.Sleep(pollNap)
		}
	}
}

// runReadLat is run_iter_lat: the client READs the server's buffer, one
// READ at a time; a sample is the time between posts.
func (s *session) runReadLat(ctx context.Context, size int) (LatReport, error) {
	l := s.newLatRun(size)
	sd := s.newSender(0, size)
	sd.wrs[0].Flags |= rnic.SendSignaled
	l.startDur()
	for scnt := uint64(0); l.more(scnt); {
		l.stamp(scnt, sd.sges[0].Addr)
		scnt++
		if err := sd.q.qp.PostSend(sd.wrs[0]); err != nil {
			return LatReport{}, fmt.Errorf("perftest: couldn't post send: scnt=%d: %w", scnt, err)
		}
		l.rung()
		ended, err := l.wait(ctx, s.res.sendCQ, "completion", scnt-1)
		if err != nil || ended {
			return l.report(1), err
		}
		l.arrived()
		l.count()
		l.prog.tick(max(scnt, l.measured), l.iters, s.p.Duration)
	}
	return l.report(1), nil
}

// runSendLat is run_iter_lat_send: a SEND/RECV ping-pong, the client
// sending first. Receives were posted before the handshake (rs).
func (s *session) runSendLat(ctx context.Context, size int, rs []*receiver) (LatReport, error) {
	p := s.p
	l := s.newLatRun(size)
	sd := s.newSender(0, size)
	r := rs[0]
	var scnt, rcnt uint64
	for l.more(scnt) || (!l.dur.on && rcnt < l.iters) {
		if l.more(rcnt) && !(scnt < 1 && p.client) {
			ended, err := l.wait(ctx, s.res.recvCQ, "message", rcnt)
			if err != nil {
				return LatReport{}, err
			}
			if ended {
				break
			}
			l.startDur() // set_on_first_rx_packet
			rcnt++
			l.count()
			l.arrived()
			if l.dur.on || rcnt+uint64(p.rxDepth) <= l.iters {
				if err := r.q.qp.PostRecv(r.wr); err != nil {
					return LatReport{}, fmt.Errorf("perftest: couldn't post recv: rcnt=%d: %w", rcnt, err)
				}
			}
		}
		if l.more(scnt) {
			l.stamp(scnt, sd.sges[0].Addr)
			scnt++
			signaled := scnt%uint64(p.cqMod) == 0 || (!l.dur.on && scnt == l.iters)
			if err := sd.post(signaled); err != nil {
				return LatReport{}, err
			}
			l.rung()
			if signaled {
				ended, err := l.wait(ctx, s.res.sendCQ, "completion", scnt)
				if err != nil || ended {
					return l.report(2), err
				}
			}
		}
		l.prog.tick(max(rcnt, l.measured), l.iters, p.Duration)
	}
	return l.report(2), nil
}
