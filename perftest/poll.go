package perftest

import (
	"context"
	"fmt"
	"time"

	"github.com/rnic/rnic"
)

// waitCQ waits for completions on cq until deadline and returns how many
// it took into wcs. Without -e it busy-polls, as perftest does (a tight
// ibv_poll_cq loop; an empty Poll drives the NIC itself). With -e it sleeps on the
// CQ's completion channel as perftest does (ctx_notify_events): when the
// CQ is empty, wait for the event, re-arm the CQ (ibv_req_notify_cq),
// then poll; an event whose completions an earlier poll took finds none,
// and the wait goes on. Completions already in the CQ are taken without
// waiting, as perftest polls until the CQ is empty after an event. The
// CQ is armed once before the test (armEvents); after each re-arming
// either an event is pending or the CQ is still armed, so no completion
// is slept through.
func (s *session) waitCQ(ctx context.Context, cq *rnic.CQ, wcs []rnic.WC, deadline time.Time) (int, error) {
	if s.p.Clock != nil {
		// In virtual time a thread sleeps on the CQ until the model
		// makes a completion visible (and pays the poll time per
		// completion taken); the clock ends a wait nothing can end.
		return cq.Wait(ctx, wcs)
	}
	if !s.p.Events {
		for i := 0; ; i++ {
			if n, err := cq.Poll(wcs); n > 0 || err != nil {
				return n, err
			}
			if i%64 == 63 { // the clock and the context, now and then
				if err := ctx.Err(); err != nil {
					return 0, err
				}
				if !time.Now().Before(deadline) {
					return 0, context.DeadlineExceeded
				}
			}
		}
	}
	if n, err := cq.Poll(wcs); n > 0 || err != nil {
		return n, err
	}
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	for {
		select {
		case <-cq.Events():
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tm.C:
			return 0, context.DeadlineExceeded
		}
		if err := cq.ReqNotify(false); err != nil {
			return 0, err
		}
		if n, err := cq.Poll(wcs); n > 0 || err != nil {
			return n, err
		}
	}
}

// waitEither sleeps until the send or the receive CQ, both armed, has a
// completion (an event on either), or until deadline.
func (s *session) waitEither(ctx context.Context, deadline time.Time) error {
	if s.p.Clock != nil {
		return nil // the caller polls both CQs again; each Poll costs virtual time
	}
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	select {
	case <-s.res.sendCQ.Events():
	case <-s.res.recvCQ.Events():
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return context.DeadlineExceeded
	}
	return nil
}

// armEvents arms the CQs for -e, as the tests' main()s do before the
// traffic.
func (s *session) armEvents() {
	if s.p.Events {
		s.res.sendCQ.ReqNotify(false)
		s.res.recvCQ.ReqNotify(false)
	}
}

// side names this side in messages: perftest's machine.
func (s *session) side() string {
	if s.p.client {
		return "client"
	}
	return "server"
}

// completionError reports a completion in error (NOTIFY_COMP_ERROR_*),
// and says what the usual cause is when it is a buffer too small on one
// side: perftest's two sides do not tell each other -s or -a, so a
// server started without the client's -a (or with a smaller -s) has
// buffers too small for the client's larger messages.
func (s *session) completionError(side string, wc rnic.WC, size int, scnt, ccnt uint64) error {
	err := fmt.Errorf("perftest: completion with error at %s: status %v, wr_id %d, opcode %v (scnt=%d, ccnt=%d)", side, wc.Status, wc.WRID, wc.Opcode, scnt, ccnt)
	switch wc.Status {
	case rnic.WCRemAccessErr, rnic.WCRemInvReqErr, rnic.WCLocLenErr:
		flags := fmt.Sprintf("-s %d", s.p.Config.Size)
		if s.p.All {
			flags = "-a"
		} else if s.p.Config.Size == 0 {
			flags = "the default -s"
		}
		return fmt.Errorf("%w: a %d-byte message does not fit the buffer of one side; perftest's sides do not tell each other -s or -a, so start both with the same (this side has %s)", err, size, flags)
	}
	return err
}
