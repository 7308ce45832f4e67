package transport

import (
	"fmt"
	"math"
)

// TIMELY is delay-based congestion control (Mittal et al., "TIMELY:
// RTT-based Congestion Control for the Datacenter", SIGCOMM 2015), behind
// the same reaction point as DCQCN: with Config.TIMELY set, the requester
// times one ACK-requesting packet of an RC QP at a time (the RTT probe),
// and each round trip moves the QP's rate by the RTT's gradient — up by
// Delta while the RTT is under TLow or falling (by HAIThreshold × Delta
// after that many falling samples in a row), down in proportion to a
// rising gradient, and down by Beta × (1 − THigh/RTT) above THigh. No ECN
// and no CNPs: the switch's queues reach the sender as delay.
//
// Rates are in bits per second, times in nanoseconds.
type TIMELY struct {
	// LineRate is the rate a QP starts at and never exceeds; MinRate the
	// floor of a decrease.
	LineRate, MinRate float64
	// Alpha is the weight of a new RTT difference in the gradient's
	// moving average; Beta the multiplicative decrease factor.
	Alpha, Beta float64
	// Delta is the additive increase step.
	Delta float64
	// TLow and THigh bound the RTTs the gradient rules: under TLow the
	// rate only increases, over THigh it decreases.
	TLow, THigh int64
	// MinRTT normalizes the gradient (the fabric's smallest RTT).
	MinRTT int64
	// HAIThreshold is the number of falling RTT samples in a row after
	// which an increase on a falling gradient is HAIThreshold × Delta
	// (hyperactive increase); 0 turns that off.
	HAIThreshold int
}

// Validate reports the first parameter that cannot work.
func (c *TIMELY) Validate() error {
	bad := func(f string, v any, why string) error { return fmt.Errorf("TIMELY %s %v: %s", f, v, why) }
	switch {
	case !(c.LineRate > 0) || math.IsInf(c.LineRate, 0):
		return bad("LineRate", c.LineRate, "want a positive rate")
	case !(c.MinRate > 0) || c.MinRate > c.LineRate:
		return bad("MinRate", c.MinRate, "want a positive rate up to the line rate")
	case !(c.Alpha > 0 && c.Alpha <= 1):
		return bad("Alpha", c.Alpha, "want (0, 1]")
	case !(c.Beta > 0 && c.Beta <= 1):
		return bad("Beta", c.Beta, "want (0, 1]")
	case !(c.Delta >= 0) || math.IsInf(c.Delta, 0):
		return bad("Delta", c.Delta, "want a non-negative rate")
	case c.TLow < 0 || c.THigh <= c.TLow:
		return bad("TLow/THigh", fmt.Sprint(c.TLow, "/", c.THigh), "want 0 <= TLow < THigh")
	case c.MinRTT <= 0:
		return bad("MinRTT", c.MinRTT, "want a positive time")
	case c.HAIThreshold < 0:
		return bad("HAIThreshold", c.HAIThreshold, "negative")
	}
	return nil
}

// timelyRP is TIMELY's state for one QP.
type timelyRP struct {
	c       *TIMELY
	rc      float64 // current rate
	prevRTT int64   // the last sample (0: none yet)
	rttDiff float64 // moving average of successive differences, ns
	falling int     // falling-gradient samples in a row
}

func newTimelyRP(c *TIMELY) *timelyRP { return &timelyRP{c: c, rc: c.LineRate} }

func (s *timelyRP) rate() float64   { return s.rc }
func (s *timelyRP) sent(int64, int) {}
func (s *timelyRP) cnp(int64)       {}

// rttSample is TIMELY's Algorithm 1 for one completion's RTT.
func (s *timelyRP) rttSample(_, rtt int64) {
	c := s.c
	if s.prevRTT == 0 {
		s.prevRTT = rtt // the first sample has no difference yet
		return
	}
	diff := float64(rtt - s.prevRTT)
	s.prevRTT = rtt
	// Falling RTTs in a row, whatever the rule below (as the authors'
	// code counts them): the hyperactive increase's trigger.
	if diff < 0 {
		s.falling++
	} else {
		s.falling = 0
	}
	s.rttDiff = (1-c.Alpha)*s.rttDiff + c.Alpha*diff
	gradient := s.rttDiff / float64(c.MinRTT)
	switch {
	case rtt < c.TLow:
		s.rc += c.Delta
	case rtt > c.THigh:
		s.rc *= 1 - c.Beta*(1-float64(c.THigh)/float64(rtt))
	case gradient <= 0:
		n := 1.0
		if c.HAIThreshold > 0 && s.falling >= c.HAIThreshold {
			n = float64(c.HAIThreshold)
		}
		s.rc += n * c.Delta
	default:
		s.rc *= 1 - c.Beta*min(gradient, 1)
	}
	s.rc = min(max(s.rc, c.MinRate), c.LineRate)
}
