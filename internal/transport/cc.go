package transport

import (
	"math"

	"github.com/rnic/rnic/internal/hw/sched"
)

// Congestion control at the reaction point is one of two algorithms,
// chosen by the engine's configuration: DCQCN (ECN marks → CNPs → rate
// cuts, Config.DCQCN) or TIMELY (the RTT and its gradient → rate,
// Config.TIMELY). Both set a QP's sending rate, and the arbiter paces the
// QP's packets at it; what differs is the signal. rateControl is what
// they have in common, so that the rest of the engine — pacing, the RTT
// probe, the rate observer — does not know which one runs.
type rateControl interface {
	// rate is the QP's current sending rate in bits per second.
	rate() float64
	// sent accounts bytes put on the wire at now.
	sent(now int64, bytes int)
	// cnp is a congestion notification for the QP (DCQCN).
	cnp(now int64)
	// rttSample is a round trip measured at now (TIMELY).
	rttSample(now, rtt int64)
}

// ccState is one QP's congestion control context, allocated when it is
// first needed (its first packet sent or CNP): the reaction point's
// algorithm, pacing, the RTT probe, and the notification point's last
// CNP.
type ccState struct {
	rp rateControl
	// nextSend paces the QP: its next packet may start then; wakeAt is
	// the timer that rings the arbiter for it (0: off).
	nextSend, wakeAt int64
	lastCNP          int64 // NP: when the QP last sent a CNP
	sentCNP          bool
	// The RTT probe (TIMELY): one packet that asks for an ACK is timed
	// at a time, from when it is sent to the ACK that covers it; a
	// retransmission cancels it (its ACK would time the wrong copy).
	probing  bool
	probePSN uint32
	probeAt  int64
	lastRate float64 // the rate last reported to the observer
}

// congestionControlled reports whether congestion control applies to the
// QP: the connected transports (a UD QP's peers change with every
// datagram).
func (qp *QP) congestionControlled() bool { return qp.Type == RC || qp.Type == UC }

// ccOn reports whether the engine runs congestion control.
func (e *Engine) ccOn() bool { return e.cfg.DCQCN != nil || e.cfg.TIMELY != nil }

// lineRate is the rate a QP starts at and never exceeds.
func (e *Engine) lineRate() float64 {
	if e.cfg.DCQCN != nil {
		return e.cfg.DCQCN.LineRate
	}
	return e.cfg.TIMELY.LineRate
}

// cc returns the QP's congestion control context, made at line rate.
func (e *Engine) cc(qp *QP) *ccState {
	if qp.cc == nil {
		s := &ccState{}
		if c := e.cfg.DCQCN; c != nil {
			s.rp = newDCQCNRP(c, e.now)
		} else {
			s.rp = newTimelyRP(e.cfg.TIMELY)
		}
		s.lastRate = s.rp.rate()
		qp.cc = s
	}
	return qp.cc
}

// SetRateObserver has fn called each time a QP's congestion control
// changes its rate (bits per second), with the engine's time: a rate
// trajectory for the simulator's timelines. Nil stops it.
func (e *Engine) SetRateObserver(fn func(qpn uint32, now int64, bps float64)) { e.rateObs = fn }

// rateMoved reports a QP's new rate to the observer if it changed.
func (e *Engine) rateMoved(qp *QP, s *ccState) {
	if r := s.rp.rate(); r != s.lastRate {
		s.lastRate = r
		if e.rateObs != nil {
			e.rateObs(qp.QPN, e.now, r)
		}
	}
}

// ccSent accounts a turn's bytes on the wire: the algorithm's counters,
// and the pacing of the QP's next packet at its rate.
func (e *Engine) ccSent(qp *QP, now int64, bytes int) {
	s := e.cc(qp)
	s.rp.sent(now, bytes)
	s.pace(now, bytes)
	e.rateMoved(qp, s)
}

// pace sets when the QP may send after bytes left at now: their time at
// its rate, after what it was already due to wait.
func (s *ccState) pace(now int64, bytes int) {
	s.nextSend = max(s.nextSend, now) + int64(math.Ceil(float64(bytes)*8e9/s.rp.rate()))
}

// ccCNP is the reaction point's CNP: the algorithm's cut.
func (e *Engine) ccCNP(qp *QP) {
	s := e.cc(qp)
	s.rp.cnp(e.now)
	e.rateMoved(qp, s)
}

// rateGate is the arbiter's rate limiter (sched.Gate) when congestion
// control runs: it refuses the turn of a QP whose rate lets it send
// nothing yet, and arms the timer that rings it when it may (paced); the
// QPs it admits go on to next, the timing model's gate, if any.
type rateGate struct {
	e    *Engine
	next sched.Gate
}

func (g rateGate) Admit(q uint32, gr sched.Grant) (sched.Grant, bool) {
	if qp := g.e.QPByIndex(q); qp != nil && !qp.destroyed && g.e.paced(qp) {
		return gr, false
	}
	if g.next != nil {
		return g.next.Admit(q, gr)
	}
	return gr, true
}

// Parked forwards to the timing model's gate (sched.Parker): the QPs it
// holds back. The rate limiter's own refusals are not parked in this
// sense: their doorbells still make them ready.
func (g rateGate) Parked(q uint32) bool {
	p, ok := g.next.(sched.Parker)
	return ok && p.Parked(q)
}

// paced reports whether the QP must wait before it sends again, and arms
// its wake-up then.
func (e *Engine) paced(qp *QP) bool {
	s := qp.cc
	if s == nil || s.nextSend <= e.now || s.rp.rate() >= e.lineRate() {
		return false
	}
	s.wakeAt = s.nextSend
	e.schedule(qp)
	return true
}

// probeSent starts timing a packet that asks for an ACK, if TIMELY runs
// and no probe is out; a retransmission cancels the probe instead.
func (e *Engine) probeSent(qp *QP, psn uint32, resend bool) {
	if e.cfg.TIMELY == nil || !qp.congestionControlled() {
		return
	}
	s := e.cc(qp)
	switch {
	case resend:
		s.probing = false
	case !s.probing:
		s.probing, s.probePSN, s.probeAt = true, psn, e.now
	}
}

// probeAcked ends the probe if through, the last PSN an ACK covers, is at
// or past it: a round trip for the algorithm.
func (e *Engine) probeAcked(qp *QP, through uint32) {
	s := qp.cc
	if s == nil || !s.probing || int32((through-s.probePSN)<<8) < 0 {
		return
	}
	s.probing = false
	s.rp.rttSample(e.now, e.now-s.probeAt)
	e.rateMoved(qp, s)
}
