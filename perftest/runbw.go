package perftest

import (
	"context"
	"errors"
	"fmt"

	"github.com/rnic/rnic"
)

// pollBatch is how many completions one poll takes (CTX_POLL_BATCH).
const pollBatch = 16

// sender is one QP's send work request and its progress through the
// buffers (the ctx->wr / scnt / ccnt of perftest).
type sender struct {
	q       *qpRes
	wr      rnic.SendWR
	sge     [1]rnic.SGE
	myAddr  uint64 // first local address
	remAddr uint64 // first remote address
	scnt    uint64
	ccnt    uint64
}

// newSender prepares QP q's work request for messages of size bytes
// (ctx_set_send_reg_wqes).
func (s *session) newSender(i int, size int) *sender {
	p, q := s.p, s.res.qps[i]
	sd := &sender{q: q, myAddr: q.mr.Addr(), remAddr: q.rem.VAddr}
	length := size
	if p.Test.Verb() == VerbAtomic {
		length = defSizeAtomic
	}
	sd.sge[0] = rnic.SGE{Addr: sd.myAddr, Length: uint32(length), LKey: q.mr.LKey()}
	sd.wr = rnic.SendWR{WRID: uint64(i), SGL: sd.sge[:], RemoteAddr: sd.remAddr, RKey: q.rem.RKey}
	switch p.Test.Verb() {
	case VerbWrite:
		sd.wr.Opcode = rnic.WRRDMAWrite
	case VerbRead:
		sd.wr.Opcode = rnic.WRRDMARead
	case VerbSend:
		sd.wr.Opcode = rnic.WRSend
		if p.Conn == rnic.UD {
			sd.wr.AH, sd.wr.RemoteQPN, sd.wr.RemoteQKey = q.ah, q.rem.QPN, defQKey
		}
	case VerbAtomic:
		if p.Atomic == FetchAndAdd {
			sd.wr.Opcode, sd.wr.CompareAdd = rnic.WRAtomicFetchAndAdd, atomicAdd
		} else {
			sd.wr.Opcode, sd.wr.Swap = rnic.WRAtomicCmpAndSwp, atomicSwap
		}
	}
	if (p.Test.Verb() == VerbSend || p.Test.Verb() == VerbWrite) && size <= p.inline {
		sd.wr.Flags |= rnic.SendInline
	}
	return sd
}

// post posts the work request, signaled or not.
func (sd *sender) post(signaled bool) error {
	if signaled {
		sd.wr.Flags |= rnic.SendSignaled
	} else {
		sd.wr.Flags &^= rnic.SendSignaled
	}
	if err := sd.q.qp.PostSend(sd.wr); err != nil {
		return fmt.Errorf("perftest: couldn't post send: qp %d scnt=%d: %w", sd.wr.WRID, sd.scnt, err)
	}
	return nil
}

// advance moves the addresses on to the next slot of the cycle buffer,
// as perftest does for messages up to half of it (increase_loc_addr,
// increase_rem_addr), and counts the post.
func (sd *sender) advance(size int, p *params) {
	if size <= p.cycleBuffer/2 {
		step := inc(size, p.cacheLine)
		wrap := (sd.scnt+1)%uint64(p.cycleBuffer/step) == 0
		sd.sge[0].Addr += uint64(step)
		if wrap {
			sd.sge[0].Addr = sd.myAddr
		}
		if p.Test.Verb() != VerbSend {
			sd.wr.RemoteAddr += uint64(step)
			if wrap {
				sd.wr.RemoteAddr = sd.remAddr
			}
		}
	}
	sd.scnt++
}

// runBW is run_iter_bw: the client posts messages of size bytes on every
// QP, at most txDepth outstanding per QP, one signaled every cqMod, and
// times posts and completions.
func (s *session) runBW(ctx context.Context, size int) (BWReport, error) {
	p, nq := s.p, len(s.res.qps)
	senders := make([]*sender, nq)
	for i := range senders {
		senders[i] = s.newSender(i, size)
	}
	iters := uint64(p.iters)
	tot := iters * uint64(nq)
	stamps := 1
	if !p.noPeak {
		stamps = int(tot)
	}
	tposted, tcompleted := make([]int64, stamps), make([]int64, stamps)
	clk := newClock()
	dur := newDurTimer(p)
	dur.start(clk.now())
	cqMod := uint64(p.cqMod)
	var totS, totC, measured uint64
	wcs := make([]rnic.WC, pollBatch)
	prog := newProgress(s.errw, p.Test.String())
	if p.noPeak && !dur.on {
		tposted[0] = clk.now()
	}
	for totS < tot || totC < tot || (dur.on && !dur.ended(clk.now())) {
		for _, sd := range senders {
			for (sd.scnt < iters || dur.on) && sd.scnt-sd.ccnt+1 <= uint64(p.txDepth) {
				now := clk.now()
				if dur.ended(now) {
					break
				}
				if !p.noPeak {
					tposted[totS] = now
				}
				signaled := cqMod == 1 || sd.scnt%cqMod == cqMod-1 || (!dur.on && sd.scnt == iters-1)
				if err := sd.post(signaled); err != nil {
					return BWReport{}, err
				}
				sd.advance(size, p)
				totS++
			}
		}
		if !(totC < tot || (dur.on && totC < totS)) {
			continue
		}
		deadline := clk.at(clk.now()).Add(s.timeout())
		if dur.on {
			deadline = clk.at(dur.end())
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		n, err := s.res.sendCQ.Wait(wctx, wcs)
		cancel()
		if err != nil {
			if dur.on && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				break // the run is over
			}
			return BWReport{}, s.stalled(err, "completion", totC, tot)
		}
		now := clk.now()
		for _, wc := range wcs[:n] {
			if wc.Status != rnic.WCSuccess {
				return BWReport{}, fmt.Errorf("perftest: completion with error at client: status %v, wr_id %d (scnt=%d, ccnt=%d)", wc.Status, wc.WRID, totS, totC)
			}
			if wc.WRID >= uint64(nq) {
				return BWReport{}, fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
			}
			senders[wc.WRID].ccnt += cqMod
			totC += cqMod
			if !p.noPeak {
				tcompleted[min(totC, tot)-1] = now
			}
			if dur.sampling(now) {
				measured += cqMod
			}
		}
		prog.tick(max(totC, measured), tot, p.Duration)
	}
	if dur.on {
		tposted[0], tcompleted[0] = dur.window()
		return computeBW(size, int(measured), tposted, tcompleted, true, p.cqMod, p.ReportGbits), nil
	}
	if p.noPeak {
		tcompleted[0] = clk.now()
	}
	return computeBW(size, int(tot), tposted, tcompleted, p.noPeak, p.cqMod, p.ReportGbits), nil
}

// receiver is one QP's receive work request (ctx->rwr) and the address
// of its next receive buffer.
type receiver struct {
	q      *qpRes
	wr     rnic.RecvWR
	sge    [1]rnic.SGE
	base   uint64
	posted uint64 // receive WRs posted in this run
	unused uint64 // completed and not yet re-posted
}

// postRecvs posts rxDepth receives of size bytes on every QP
// (ctx_set_recv_wqes) and returns the receivers. A UD receive has room
// for the 40-byte GRH in front of the message.
func (s *session) postRecvs(size int) ([]*receiver, error) {
	p := s.p
	rs := make([]*receiver, len(s.res.qps))
	for i, q := range s.res.qps {
		r := &receiver{q: q, base: q.mr.Addr() + uint64(q.buffSize)}
		length := size
		if p.Conn == rnic.UD {
			r.base += uint64(p.cacheLine - udAddition)
			length += udAddition
		}
		r.sge[0] = rnic.SGE{Addr: r.base, Length: uint32(length), LKey: q.mr.LKey()}
		r.wr = rnic.RecvWR{WRID: uint64(i), SGL: r.sge[:]}
		for range p.rxDepth {
			if err := r.post(size, p); err != nil {
				return nil, err
			}
		}
		r.sge[0].Addr = r.base
		rs[i] = r
	}
	return rs, nil
}

// post posts the receive and moves on to the next buffer slot.
func (r *receiver) post(size int, p *params) error {
	if err := r.q.qp.PostRecv(r.wr); err != nil {
		return fmt.Errorf("perftest: couldn't post recv: qp %d: %w", r.wr.WRID, err)
	}
	if length := int(r.sge[0].Length); length <= p.cycleBuffer/2 {
		r.sge[0].Addr += uint64(inc(size, p.cacheLine))
		if (r.posted+1)%uint64(p.cycleBuffer/inc(size, p.cacheLine)) == 0 {
			r.sge[0].Addr = r.base
		}
	}
	r.posted++
	return nil
}

// runBWServer is run_iter_bw_server: send_bw's server counts the
// messages it receives, re-posting receives, and times the first and
// the last.
func (s *session) runBWServer(ctx context.Context, size int, rs []*receiver) (BWReport, error) {
	p, nq := s.p, len(rs)
	iters := uint64(p.iters)
	tot := iters * uint64(nq)
	clk := newClock()
	dur := newDurTimer(p)
	var first int64
	var rcnt, measured uint64
	started := false
	wcs := make([]rnic.WC, pollBatch)
	prog := newProgress(s.errw, p.Test.String())
	for rcnt < tot || (dur.on && !dur.ended(clk.now())) {
		deadline := clk.at(clk.now()).Add(s.timeout())
		if dur.on && started {
			deadline = clk.at(dur.end())
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		n, err := s.res.recvCQ.Wait(wctx, wcs)
		cancel()
		if err != nil {
			if dur.on && started && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				break
			}
			return BWReport{}, s.stalled(err, "message", rcnt, tot)
		}
		now := clk.now()
		if !started {
			started, first = true, now // set_on_first_rx_packet
			dur.start(now)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != rnic.WCSuccess {
				return BWReport{}, fmt.Errorf("perftest: completion with error at server: status %v, wr_id %d (rcnt=%d)", wc.Status, wc.WRID, rcnt)
			}
			if wc.WRID >= uint64(nq) {
				return BWReport{}, fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
			}
			r := rs[wc.WRID]
			rcnt++
			r.unused++
			if dur.sampling(now) {
				measured++
			}
			if (dur.on || r.posted+1 <= iters) && r.unused >= 1 {
				if err := r.post(size, p); err != nil {
					return BWReport{}, err
				}
				r.unused--
			}
		}
		prog.tick(max(rcnt, measured), tot, p.Duration)
	}
	last := clk.now()
	if dur.on {
		from, to := dur.window()
		return computeBW(size, int(measured), []int64{from}, []int64{to}, true, p.cqMod, p.ReportGbits), nil
	}
	return computeBW(size, int(tot), []int64{first}, []int64{last}, true, p.cqMod, p.ReportGbits), nil
}
