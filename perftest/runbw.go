package perftest

import (
	"context"
	"errors"
	"fmt"
	"math"
	mbits "math/bits"
	"time"

	"github.com/rnic/rnic"
)

// pollBatch is how many completions one poll takes (CTX_POLL_BATCH).
const pollBatch = 16

// sender is one QP's send work requests, a post list of postList of them
// (the ctx->wr of perftest, chained), and its progress through the
// buffers (scnt, ccnt).
type sender struct {
	q       *qpRes
	idx     int // the QP's index: its work requests' wr_id
	wrs     []rnic.SendWR
	sges    []rnic.SGE
	myAddr  uint64 // first local address
	remAddr uint64 // first remote address
	scnt    uint64
	ccnt    uint64
	iters   uint64 // its messages: the run's, or fewer once a Worker's stop time passed
	due     uint64 // a paced Worker's messages due and not yet posted
}

// newSender prepares QP i's work requests for messages of size bytes
// (ctx_set_send_reg_wqes): a post list whose entries use consecutive
// slots of the cycle buffer, each entry signaled when its place in the
// list is a multiple of the CQ moderation. Latency tests use one entry
// and set its flags themselves.
func (s *session) newSender(i int, size int) *sender {
	p, q := s.p, s.res.qps[i]
	n := p.postList
	sd := &sender{q: q, idx: i, myAddr: q.buf, remAddr: q.rem.VAddr, wrs: make([]rnic.SendWR, n), sges: make([]rnic.SGE, n), iters: uint64(p.iters)}
	length := size
	if p.Test.Verb() == VerbAtomic {
		length = defSizeAtomic
	}
	bw := p.Test.Kind() == BW
	for j := range n {
		sge := rnic.SGE{Addr: sd.myAddr, Length: uint32(length), LKey: q.mr.LKey()}
		wr := rnic.SendWR{WRID: uint64(i), RemoteAddr: sd.remAddr, RKey: q.rem.RKey}
		if j > 0 {
			prev := &sd.wrs[j-1]
			sge.Addr, wr.RemoteAddr = sd.sges[j-1].Addr, prev.RemoteAddr
			if bw && size <= p.cycleBuffer/2 {
				sge.Addr = nextAddr(sge.Addr, sd.myAddr, size, uint64(j-1), p)
			}
			if bw && !p.fixedRemote && (p.Test.Verb() == VerbAtomic || size <= p.cycleBuffer/2 && p.Test.Verb() != VerbSend) {
				wr.RemoteAddr = nextAddr(wr.RemoteAddr, sd.remAddr, size, uint64(j-1), p)
			}
		}
		sd.sges[j] = sge
		if (j+1)%p.cqMod == 0 {
			wr.Flags = rnic.SendSignaled
		}
		switch p.Test.Verb() {
		case VerbWrite:
			wr.Opcode = rnic.WRRDMAWrite
		case VerbRead:
			wr.Opcode = rnic.WRRDMARead
		case VerbSend:
			wr.Opcode = rnic.WRSend
			if p.Conn == rnic.UD {
				wr.AH, wr.RemoteQPN, wr.RemoteQKey = q.ah, q.rem.QPN, defQKey
			}
		case VerbAtomic:
			if p.Atomic == FetchAndAdd {
				wr.Opcode, wr.CompareAdd = rnic.WRAtomicFetchAndAdd, atomicAdd
			} else {
				wr.Opcode, wr.Swap = rnic.WRAtomicCmpAndSwp, atomicSwap
			}
		}
		if (p.Test.Verb() == VerbSend || p.Test.Verb() == VerbWrite) && size <= p.inline {
			wr.Flags |= rnic.SendInline
		}
		sd.wrs[j] = wr
	}
	for j := range sd.wrs {
		sd.wrs[j].SGL = sd.sges[j : j+1]
	}
	if p.random != nil && bw {
		sd.randomize(size, p)
	}
	return sd
}

// nextAddr is perftest's increase_loc_addr / increase_rem_addr: the next
// slot of the cycle buffer after message cnt, back to first at the end.
func nextAddr(a, first uint64, size int, cnt uint64, p *params) uint64 {
	step := inc(size, p.cacheLine)
	if (cnt+1)%uint64(p.cycleBuffer/step) == 0 {
		return first
	}
	return a + uint64(step)
}

// post posts the work request (one) signaled or not.
func (sd *sender) post(signaled bool) error {
	wr := &sd.wrs[0]
	if signaled {
		wr.Flags |= rnic.SendSignaled
	} else {
		wr.Flags &^= rnic.SendSignaled
	}
	return sd.postList()
}

// postList posts the whole post list with one doorbell.
func (sd *sender) postList() error {
	if err := sd.q.qp.PostSend(sd.wrs...); err != nil {
		return fmt.Errorf("perftest: couldn't post send: qp %d scnt=%d: %w", sd.wrs[0].WRID, sd.scnt, err)
	}
	return nil
}

// advance moves a single work request on to the next slot of the cycle
// buffer, as perftest does for messages up to half of it, and counts the
// post. A post list keeps its addresses.
func (sd *sender) advance(size int, p *params) {
	switch {
	case p.random != nil:
		sd.randomize(size, p)
	case p.postList == 1 && size <= p.cycleBuffer/2:
		sd.sges[0].Addr = nextAddr(sd.sges[0].Addr, sd.myAddr, size, sd.scnt, p)
		if p.Test.Verb() != VerbSend && !p.fixedRemote {
			sd.wrs[0].RemoteAddr = nextAddr(sd.wrs[0].RemoteAddr, sd.remAddr, size, sd.scnt, p)
		}
	}
	sd.scnt += uint64(p.postList)
}

// randomize gives each work request of the list a slot of the cycle
// buffer drawn from a Worker's generator (WorkerConfig.Random), the same
// slot locally and remotely: the access pattern of a key-value store.
func (sd *sender) randomize(size int, p *params) {
	step := inc(size, p.cacheLine)
	slots := max(uint64(p.cycleBuffer/step), 1)
	for j := range sd.wrs {
		off := p.random.Uint64N(slots) * uint64(step)
		sd.sges[j].Addr = sd.myAddr + off
		if p.Test.Verb() != VerbSend && !p.fixedRemote {
			sd.wrs[j].RemoteAddr = sd.remAddr + off
		}
	}
}

// signaled reports whether message k of a single-request sender is
// signaled: one every cqMod, and the last of an iterations run (the
// flags run_iter_bw sets and clears around each post).
func signaled(k, iters uint64, cqMod uint64, dur bool) bool {
	return cqMod == 1 || k%cqMod == cqMod-1 || (!dur && k == iters-1)
}

// rateLimiter is perftest's software rate limiter (run_iter_bw): the
// messages go in bursts of burstSize, a burst at most every gap.
type rateLimiter struct {
	on       bool
	gap      time.Duration
	burst    uint64
	deadline time.Time // the earliest start of the next burst
	sending  bool      // a burst is being sent
	sent     uint64    // messages of the burst so far
}

// newRateLimiter computes the gap between bursts for messages of size
// bytes: the rate in messages per second (truncated, as perftest's int),
// the bursts per second it makes, the gap between them.
func (s *session) newRateLimiter(size int) (*rateLimiter, error) {
	p := s.p
	rl := &rateLimiter{on: p.rateType == RateLimitSW, burst: uint64(p.burstSize)}
	if !rl.on {
		return rl, nil
	}
	var pps int
	switch p.RateUnits {
	case RateMBps:
		pps = int(p.RateLimit / float64(size) * 1048576)
	case RateGbps:
		pps = int(p.RateLimit / float64(size*8) * 1e9)
	case RatePps:
		pps = int(p.RateLimit)
	}
	bursts := pps / p.burstSize
	if bursts <= 0 {
		return nil, fmt.Errorf("perftest: rate limit %g%s is %d messages of %d bytes per second, less than one burst of %d (--burst_size)",
			p.RateLimit, [...]string{"Gb/s", "MB/s", "pps"}[p.RateUnits], pps, size, p.burstSize)
	}
	rl.gap = time.Duration(float64(time.Second) / float64(bursts))
	return rl, nil
}

// ready reports whether a QP may post now, starting a burst if the gap
// since the last one has passed.
func (rl *rateLimiter) ready(now time.Time) bool {
	if !rl.on || rl.sending {
		return true
	}
	if rl.deadline.After(now) {
		return false
	}
	rl.deadline, rl.sending, rl.sent = now.Add(rl.gap), true, 0
	return true
}

// posted counts n messages of the burst.
func (rl *rateLimiter) posted(n uint64) {
	if rl.on {
		if rl.sent += n; rl.sent >= rl.burst {
			rl.sending = false
		}
	}
}

// holding reports whether the limiter holds the next burst back, and
// until when.
func (rl *rateLimiter) holding() (time.Time, bool) {
	return rl.deadline, rl.on && !rl.sending
}

// runBW is run_iter_bw: this side posts messages of size bytes on every
// QP, at most txDepth outstanding per QP, one signaled every cqMod (or
// lists of postList), at the rate limiter's pace, and times posts and
// completions. A Worker's stop time and pace (WorkerConfig.Stop, Rate)
// cut and pace each QP's posts; its observer sees them.
func (s *session) runBW(ctx context.Context, size int) (BWReport, error) {
	p, nq := s.p, len(s.res.qps)
	senders := make([]*sender, nq)
	for i := range senders {
		senders[i] = s.newSender(i, size)
	}
	rl, err := s.newRateLimiter(size)
	if err != nil {
		return BWReport{}, err
	}
	iters := uint64(p.iters)
	tot := iters * uint64(nq)
	stamps := 1
	if !p.noPeak {
		stamps = int(tot)
	}
	tposted, tcompleted := make([]int64, stamps), make([]int64, stamps)
	clk := s.newClock()
	dur := newDurTimer(p)
	dur.start(clk.now())
	cpu := s.newCPUUtil(clk, dur)
	defer cpu.stop()
	cqMod, pl := uint64(p.cqMod), uint64(p.postList)
	var totS, totC, measured uint64
	wcs := make([]rnic.WC, pollBatch)
	prog := newProgress(s.errw, p.Test.String())
	if p.noPeak && !dur.on {
		tposted[0] = clk.now()
	}
	// fill posts on sd while its queue has room (and, paced, while
	// messages are due).
	// room reports whether sd may post a list: messages left (or a -D
	// run), and room for the list in its queue.
	room := func(sd *sender) bool {
		return (sd.scnt < sd.iters || dur.on) && sd.scnt-sd.ccnt+pl <= uint64(p.txDepth)
	}
	fill := func(sd *sender) error {
		for room(sd) {
			if _, held := rl.holding(); held {
				break
			}
			now := clk.now()
			if dur.ended(now) {
				break
			}
			if p.stop > 0 && !dur.on && clk.abs(now) >= p.stop && sd.iters > sd.scnt+pl {
				// The stop time passed: this list is the QP's last.
				tot -= sd.iters - (sd.scnt + pl)
				sd.iters = sd.scnt + pl
			}
			if p.rate > 0 {
				if sd.due < pl {
					break
				}
				sd.due -= pl
			}
			if !p.noPeak {
				tposted[totS] = now
			}
			if p.observer != nil {
				p.observer.Posted(sd.idx, int(pl), sd.sges[0].Addr, clk.abs(now))
			}
			var err error
			if pl == 1 {
				err = sd.post(signaled(sd.scnt, sd.iters, cqMod, dur.on))
			} else {
				err = sd.postList()
			}
			if err != nil {
				return err
			}
			if p.observer != nil {
				p.observer.Rung(sd.idx, clk.abs(clk.now()))
			}
			sd.advance(size, p)
			totS += pl
			rl.posted(pl)
		}
		return nil
	}
	over := false
	if p.rate > 0 {
		// The pace: from now, every 1/rate each QP has one more message
		// due, posted at once if its queue has room, else when a
		// completion frees it (a thread of the clock; WorkerConfig.Rate).
		pacer := p.Clock.Go(func() {
			every := time.Duration(math.Round(1e9 / p.rate))
			next := clk.abs(clk.now())
			for {
				// Deadlines, not sleeps of a period: posting takes
				// time of its own.
				next += every
				if p.Clock.Sleep(max(next-clk.abs(clk.now()), 0)) != nil || over {
					return
				}
				left := false
				for _, sd := range senders {
					if sd.scnt < sd.iters {
						left = true
						sd.due++
						if err := fill(sd); err != nil {
							s.paceErr = err
							return
						}
					}
				}
				if !left {
					return
				}
			}
		})
		defer func() {
			over = true // the pacer's next turn ends it
			pacer.Wait()
		}()
	}
	// The senders that may post: all at first; one whose queue is full
	// or whose messages are all posted leaves until a completion of its
	// own. perftest's loop visits every QP each turn; visiting only
	// these, in the same order, posts the same, without a pass over
	// thousands of QPs that cannot post for each poll.
	active := make([]uint64, (nq+63)/64)
	for i := range nq {
		active[i/64] |= 1 << (i % 64)
	}
	for totS < tot || totC < tot || (dur.on && !dur.ended(clk.now())) {
		if s.paceErr != nil {
			return BWReport{}, s.paceErr
		}
		for w, bits := range active {
			for ; bits != 0; bits &= bits - 1 {
				i := w*64 + mbits.TrailingZeros64(bits)
				sd := senders[i]
				if rl.on && !rl.ready(time.Now()) { // no clock read when there is no limit
					continue // straight to the completions until the gap is over
				}
				if err := fill(sd); err != nil {
					return BWReport{}, err
				}
				if !room(sd) || (p.rate > 0 && sd.due < pl) {
					active[w] &^= 1 << (i % 64)
				}
			}
		}
		if !(totC < tot || (dur.on && totC < totS)) {
			if until, held := rl.holding(); held {
				sleepUntil(ctx, until)
			}
			continue
		}
		deadline := clk.at(clk.now()).Add(s.timeout())
		if dur.on {
			deadline = clk.at(dur.end())
		}
		until, held := rl.holding()
		if held && until.Before(deadline) {
			deadline = until
		}
		n, err := s.waitCQ(ctx, s.res.sendCQ, wcs, deadline)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				if held && !time.Now().Before(until) {
					continue // time for the next burst
				}
				if dur.on {
					break // the run is over
				}
			}
			return BWReport{}, s.stalled(err, "completion", totC, tot)
		}
		now := clk.now()
		for _, wc := range wcs[:n] {
			if wc.Status != rnic.WCSuccess {
				return BWReport{}, s.completionError("client", wc, size, totS, totC)
			}
			if wc.WRID >= uint64(nq) {
				return BWReport{}, fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
			}
			sd := senders[wc.WRID]
			active[wc.WRID/64] |= 1 << (wc.WRID % 64)
			retired := cqMod
			if p.observer != nil {
				// A signaled completion retires the ones before it; the
				// last may retire fewer than cqMod. perftest counts
				// cqMod each and may end before the last completions of
				// some QPs; a Worker waits for every one.
				retired = min(sd.ccnt+cqMod, sd.iters) - min(sd.ccnt, sd.iters)
				if retired > 0 {
					p.observer.Completed(sd.idx, int(retired), clk.abs(now))
				}
			}
			sd.ccnt += cqMod
			totC += retired
			if !p.noPeak {
				tcompleted[min(totC, tot)-1] = now
			}
			if dur.sampling(now) {
				measured += cqMod
			}
		}
		prog.tick(max(totC, measured), tot, p.Duration)
	}
	s.cpu = cpu.percent()
	if dur.on {
		tposted[0], tcompleted[0] = dur.window()
		return computeBW(size, int(measured), tposted, tcompleted, true, p.cqMod, p.postList, p.ReportGbits), nil
	}
	if p.noPeak {
		tcompleted[0] = clk.now()
	}
	return computeBW(size, int(tot), tposted, tcompleted, p.noPeak, p.cqMod, p.postList, p.ReportGbits), nil
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
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
	done   uint64 // completed
}

// postRecvs posts rxDepth receives of size bytes on every QP
// (ctx_set_recv_wqes) and returns the receivers. A UD receive has room
// for the 40-byte GRH in front of the message.
func (s *session) postRecvs(size int) ([]*receiver, error) {
	p := s.p
	rs := make([]*receiver, len(s.res.qps))
	for i, q := range s.res.qps {
		r := &receiver{q: q, base: q.recv}
		length := size
		if p.Conn == rnic.UD {
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
		r.sge[0].Addr = nextAddr(r.sge[0].Addr, r.base, size, r.posted, p)
	}
	r.posted++
	return nil
}

// repost re-posts a completed receive if the run still needs it.
func (r *receiver) repost(size int, p *params, dur bool) error {
	r.unused++
	if (dur || r.posted+1 <= uint64(p.iters)) && r.unused >= 1 {
		if err := r.post(size, p); err != nil {
			return err
		}
		r.unused--
	}
	return nil
}

// runBWServer is run_iter_bw_server: send_bw's server counts the
// messages it receives, re-posting receives, and times the first and
// the last.
func (s *session) runBWServer(ctx context.Context, size int, rs []*receiver) (BWReport, error) {
	p, nq := s.p, len(rs)
	iters := uint64(p.iters)
	tot := iters * uint64(nq)
	clk := s.newClock()
	dur := newDurTimer(p)
	var cpu *cpuUtil
	var first int64
	var rcnt, measured uint64
	started := false
	wcs := make([]rnic.WC, pollBatch)
	prog := newProgress(s.errw, p.Test.String())
	if p.recvEvery > 0 {
		over := false
		poster := p.Clock.Go(func() { s.postEvery(rs, size, &over) })
		defer func() {
			over = true
			poster.Wait()
		}()
	}
	for rcnt < tot || (dur.on && !dur.ended(clk.now())) {
		if s.paceErr != nil {
			return BWReport{}, s.paceErr
		}
		deadline := clk.at(clk.now()).Add(s.timeout())
		if dur.on && started {
			deadline = clk.at(dur.end())
		}
		n, err := s.waitCQ(ctx, s.res.recvCQ, wcs, deadline)
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
			cpu = s.newCPUUtil(clk, dur)
			defer cpu.stop()
		}
		for _, wc := range wcs[:n] {
			if wc.Status != rnic.WCSuccess {
				return BWReport{}, s.completionError("server", wc, size, 0, rcnt)
			}
			if wc.WRID >= uint64(nq) {
				return BWReport{}, fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
			}
			rcnt++
			if dur.sampling(now) {
				measured++
			}
			r := rs[wc.WRID]
			r.done++
			if p.observer != nil {
				p.observer.Completed(int(wc.WRID), 1, clk.abs(now))
			}
			if p.recvEvery > 0 {
				continue // the poster's to re-post
			}
			if err := r.repost(size, p, dur.on); err != nil {
				return BWReport{}, err
			}
		}
		prog.tick(max(rcnt, measured), tot, p.Duration)
	}
	last := clk.now()
	s.cpu = cpu.percent()
	if dur.on {
		from, to := dur.window()
		return computeBW(size, int(measured), []int64{from}, []int64{to}, true, p.cqMod, 1, p.ReportGbits), nil
	}
	return computeBW(size, int(tot), []int64{first}, []int64{last}, true, p.cqMod, 1, p.ReportGbits), nil
}

// postEvery is a Worker's receive poster (WorkerConfig.RecvEvery), a
// thread of the clock beside send_bw's server: every RecvEvery it posts
// one receive on each QP that has fewer than rx_depth outstanding, until
// every QP has posted its iterations or the run is over.
func (s *session) postEvery(rs []*receiver, size int, over *bool) {
	p := s.p
	for {
		if p.Clock.Sleep(p.recvEvery) != nil || *over {
			return
		}
		left := false
		for _, r := range rs {
			if r.posted < uint64(p.iters) {
				left = true
				if r.posted-r.done < uint64(p.rxDepth) {
					if err := r.post(size, p); err != nil {
						s.paceErr = err
						return
					}
				}
			}
		}
		if !left {
			return
		}
	}
}

// runBi is run_iter_bi: send_bw -b, where each side sends and receives
// at once. The server starts sending when the client's first message
// arrives; the report is of the messages sent.
func (s *session) runBi(ctx context.Context, size int, rs []*receiver) (BWReport, error) {
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
	clk := s.newClock()
	dur := newDurTimer(p)
	var cpu *cpuUtil
	cqMod, pl := uint64(p.cqMod), uint64(p.postList)
	var totS, totC, totR, measured uint64
	rwcs := make([]rnic.WC, max(p.rxDepth, 1))
	wcs := make([]rnic.WC, pollBatch)
	prog := newProgress(s.errw, p.Test.String())
	if p.noPeak {
		tposted[0] = clk.now()
	}
	beforeFirstRx := !p.client // the server waits for the client's first message
	if !beforeFirstRx {
		dur.start(clk.now())
		cpu = s.newCPUUtil(clk, dur)
		defer cpu.stop()
	}
	armed := false
	for (dur.on && !dur.ended(clk.now())) || totC < tot || totR < tot {
		for _, sd := range senders {
			for !beforeFirstRx && (sd.scnt < iters || dur.on) && sd.scnt-sd.ccnt+pl <= uint64(p.txDepth) {
				now := clk.now()
				if !p.noPeak {
					tposted[totS] = now
				}
				if dur.ended(now) {
					break
				}
				var err error
				if pl == 1 {
					err = sd.post(signaled(sd.scnt, iters, cqMod, dur.on))
				} else {
					err = sd.postList()
				}
				if err != nil {
					return BWReport{}, err
				}
				sd.advance(size, p)
				totS += pl
			}
		}
		// Receive first: RX has priority, so that fast sending does not
		// exhaust the peer's receives (UC, UD).
		moved := false
		n, err := s.res.recvCQ.Poll(rwcs)
		if err != nil {
			return BWReport{}, err
		}
		if n > 0 {
			moved = true
			now := clk.now()
			if beforeFirstRx {
				beforeFirstRx = false
				dur.start(now)
				cpu = s.newCPUUtil(clk, dur)
				defer cpu.stop()
			}
			for _, wc := range rwcs[:n] {
				if wc.Status != rnic.WCSuccess {
					return BWReport{}, s.completionError("receive", wc, size, totS, totR)
				}
				if wc.WRID >= uint64(nq) {
					return BWReport{}, fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
				}
				totR++
				if dur.sampling(now) {
					measured++
				}
				if err := rs[wc.WRID].repost(size, p, dur.on); err != nil {
					return BWReport{}, err
				}
			}
		}
		n, err = s.res.sendCQ.Poll(wcs)
		if err != nil {
			return BWReport{}, err
		}
		if n > 0 {
			moved = true
			now := clk.now()
			for _, wc := range wcs[:n] {
				if wc.Status != rnic.WCSuccess {
					return BWReport{}, s.completionError("send", wc, size, totS, totC)
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
		}
		if moved {
			armed = false
			prog.tick(max(totC, measured), tot, p.Duration)
			continue
		}
		// Nothing arrived: arm both CQs' notifications and poll once more
		// (a completion that came before the arming), then sleep until
		// either CQ has something, instead of spinning on a machine the
		// NICs' goroutines share.
		if !armed {
			s.res.recvCQ.ReqNotify(false)
			s.res.sendCQ.ReqNotify(false)
			armed = true
			continue
		}
		deadline := time.Now().Add(s.timeout())
		if dur.on && dur.started {
			deadline = clk.at(dur.end())
		}
		if err := s.waitEither(ctx, deadline); err != nil {
			if dur.on && dur.started && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				break
			}
			return BWReport{}, s.stalled(err, "completion", min(totC, totR), tot)
		}
		armed = false
	}
	s.cpu = cpu.percent()
	if dur.on {
		tposted[0], tcompleted[0] = dur.window()
		return computeBW(size, int(measured), tposted, tcompleted, true, p.cqMod, p.postList, p.ReportGbits), nil
	}
	if p.noPeak {
		tcompleted[0] = clk.now()
	}
	return computeBW(size, int(tot), tposted, tcompleted, p.noPeak, p.cqMod, p.postList, p.ReportGbits), nil
}

// runBWInfinitely is run_iter_bw_infinitely: this side sends as fast as
// its queues allow, until the run is stopped (ctx), and every Duration
// seconds prints the bandwidth of the period (print_bw_infinite_mode).
func (s *session) runBWInfinitely(ctx context.Context, size int) error {
	p, nq := s.p, len(s.res.qps)
	senders := make([]*sender, nq)
	for i := range senders {
		senders[i] = s.newSender(i, size)
	}
	cqMod, pl := uint64(p.cqMod), uint64(p.postList)
	var totS, totC uint64
	wcs := make([]rnic.WC, pollBatch)
	rep := s.newInfiniteReport(size)
	for {
		for _, sd := range senders {
			for sd.scnt-sd.ccnt+pl <= uint64(p.txDepth) {
				var err error
				if pl == 1 {
					err = sd.post(signaled(sd.scnt, 0, cqMod, true))
				} else {
					err = sd.postList()
				}
				if err != nil {
					return err
				}
				sd.scnt += pl // run_iter_bw_infinitely keeps the addresses
				totS += pl
			}
		}
		if totC >= totS {
			continue
		}
		deadline := earliest(time.Now().Add(s.timeout()), rep.next)
		n, err := s.waitCQ(ctx, s.res.sendCQ, wcs, deadline)
		if err != nil && !(errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !time.Now().Before(rep.next)) {
			return s.stalled(err, "completion", totC, totS)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != rnic.WCSuccess {
				return s.completionError("client", wc, size, totS, totC)
			}
			if wc.WRID >= uint64(nq) {
				return fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
			}
			senders[wc.WRID].ccnt += cqMod
			totC += cqMod
			rep.iters += cqMod
		}
		rep.tick()
	}
}

// runBWInfinitelyServer is run_iter_bw_infinitely_server: send_bw's
// server counts what arrives, re-posting receives, until stopped, with a
// report every Duration seconds.
func (s *session) runBWInfinitelyServer(ctx context.Context, size int, rs []*receiver) error {
	p, nq := s.p, len(rs)
	wcs := make([]rnic.WC, pollBatch)
	rep := s.newInfiniteReport(size)
	for {
		deadline := earliest(time.Now().Add(s.timeout()), rep.next)
		n, err := s.waitCQ(ctx, s.res.recvCQ, wcs, deadline)
		if err != nil && !(errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !time.Now().Before(rep.next)) {
			return s.stalled(err, "message", rep.iters, 0)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != rnic.WCSuccess {
				return s.completionError("server", wc, size, 0, rep.iters)
			}
			if wc.WRID >= uint64(nq) {
				return fmt.Errorf("perftest: completion for unknown wr_id %d", wc.WRID)
			}
			rep.iters++
			if err := rs[wc.WRID].repost(size, p, true); err != nil {
				return err
			}
		}
		rep.tick()
	}
}

// infiniteReport prints --run_infinitely's report every Duration
// seconds: the messages of the period over its length, no peak.
type infiniteReport struct {
	s         *session
	size      int
	iters     uint64 // messages so far
	lastIters uint64
	from      time.Time
	next      time.Time
}

func (s *session) newInfiniteReport(size int) *infiniteReport {
	now := time.Now()
	return &infiniteReport{s: s, size: size, from: now, next: now.Add(time.Duration(s.p.Duration) * time.Second)}
}

// tick prints the report if the period is over.
func (r *infiniteReport) tick() {
	now := time.Now()
	if now.Before(r.next) {
		return
	}
	p := r.s.p
	// A bidirectional RDMA run reports both directions: twice its own
	// messages (run_inf_bi_factor).
	factor := 1
	if p.Duplex && p.Test.Verb() != VerbSend {
		factor = 2
	}
	n := r.iters - r.lastIters
	rep := computeBW(factor*r.size, int(n), []int64{0}, []int64{int64(now.Sub(r.from))}, true, p.cqMod, 1, p.ReportGbits)
	rep.MsgRate *= float64(factor)
	rep.Size = uint64(r.size)
	r.s.printBW(rep)
	r.lastIters, r.from, r.next = r.iters, now, now.Add(time.Duration(p.Duration)*time.Second)
}
