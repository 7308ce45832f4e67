package transport

import (
	"fmt"
	"math"

	"github.com/rnic/rnic/wire"
)

// DCQCN is congestion control for RoCEv2 (Zhu et al., "Congestion Control
// for Large-Scale RDMA Deployments", SIGCOMM 2015), in the engine as an
// RNIC has it: with Config.DCQCN set, RC packets are sent ECN-capable
// (ECT(0)); the notification point answers CE-marked packets with CNPs,
// at most one per QP per CNPInterval; the reaction point cuts a QP's rate
// on a CNP and recovers it on a timer and a byte counter, and the QP's
// packets are paced at that rate. Nil: no congestion control (as rxe: CNPs
// received are counted and ignored).
//
// Rates are in bits per second, times in nanoseconds of the engine's
// clock.
type DCQCN struct {
	// CNPInterval is the notification point's least time between two
	// CNPs of one QP (N).
	CNPInterval int64
	// G is the gain of the estimate alpha of the marked fraction.
	G float64
	// AlphaPeriod is how often alpha decays without CNPs (K).
	AlphaPeriod int64
	// IncreasePeriod (T) and ByteCounter (B) are the reaction point's
	// rate-increase events: one per period, and one per ByteCounter bytes
	// sent, since the last cut.
	IncreasePeriod int64
	ByteCounter    int64
	// FastRecovery is the number of increase events (F) that halve the
	// distance to the target rate before the target itself grows.
	FastRecovery int
	// RateAI and RateHAI are the target's additive and hyper increase
	// steps; MinRate the floor a cut stops at; LineRate the rate a QP
	// starts at and never exceeds.
	RateAI, RateHAI float64
	MinRate         float64
	LineRate        float64
	// InitialAlpha is alpha before the first CNP (1: the first cut halves).
	InitialAlpha float64
	// ClampTarget sets the target rate to the current rate on every CNP,
	// as the paper's equations do. Without it (Mellanox's
	// clamp_tgt_rate=0) a CNP moves the target only if the rate has
	// increased since the last cut, so that a burst of CNPs cuts the rate
	// but leaves the target where the flow was, and fast recovery returns
	// towards it.
	ClampTarget bool
	// CNPTrafficClass is the IP traffic class of the CNPs the notification
	// point sends (ConnectX's cnp_dscp 48 is 192: priority 6, ahead of
	// RoCE data in strict-priority switches); 0: the QP's own. Its ECN
	// bits are ignored (a CNP is never ECN-capable).
	CNPTrafficClass uint8
}

// Validate reports the first parameter that cannot work.
func (c *DCQCN) Validate() error {
	bad := func(f string, v any, why string) error { return fmt.Errorf("DCQCN %s %v: %s", f, v, why) }
	switch {
	case !(c.LineRate > 0) || math.IsInf(c.LineRate, 0):
		return bad("LineRate", c.LineRate, "want a positive rate")
	case !(c.MinRate > 0) || c.MinRate > c.LineRate:
		return bad("MinRate", c.MinRate, "want a positive rate up to the line rate")
	case !(c.G > 0 && c.G <= 1):
		return bad("G", c.G, "want (0, 1]")
	case !(c.InitialAlpha >= 0 && c.InitialAlpha <= 1):
		return bad("InitialAlpha", c.InitialAlpha, "want [0, 1]")
	case c.AlphaPeriod <= 0:
		return bad("AlphaPeriod", c.AlphaPeriod, "want a positive time")
	case c.CNPInterval < 0 || c.IncreasePeriod < 0 || c.ByteCounter < 0 || c.FastRecovery < 0:
		return bad("CNPInterval, IncreasePeriod, ByteCounter or FastRecovery", "", "negative")
	case !(c.RateAI >= 0) || !(c.RateHAI >= 0) || math.IsInf(c.RateAI, 0) || math.IsInf(c.RateHAI, 0):
		return bad("RateAI or RateHAI", "", "want non-negative rates")
	}
	return nil
}

// maxIncreaseEvents bounds the timer events applied at once to a QP that
// was idle for long: by then its rate is the line rate anyway.
const maxIncreaseEvents = 256

// dcqcnRP is DCQCN's reaction point for one QP: the rates and counters
// CNPs and increase events move.
type dcqcnRP struct {
	c       *DCQCN
	rc, rt  float64 // current and target rate
	alpha   float64
	alphaAt int64 // when alpha last decayed (or was raised by a CNP)
	incAt   int64 // when the last timer increase event fell
	bytes   int64 // bytes sent since the last byte-counter event
	tEvents int   // timer increase events since the last cut
	bEvents int   // byte-counter increase events since the last cut
	cuts    uint64
}

func newDCQCNRP(c *DCQCN, now int64) *dcqcnRP {
	return &dcqcnRP{c: c, rc: c.LineRate, rt: c.LineRate, alpha: c.InitialAlpha, alphaAt: now, incAt: now}
}

func (s *dcqcnRP) rate() float64        { return s.rc }
func (s *dcqcnRP) rttSample(_, _ int64) {}

// catchUp applies the timer events that fell since the QP's state was
// last touched: alpha's decays and the rate-increase events (nothing else
// happens to the state between two packets or CNPs).
func (s *dcqcnRP) catchUp(now int64) {
	c := s.c
	if c.AlphaPeriod > 0 && now-s.alphaAt >= c.AlphaPeriod {
		n := (now - s.alphaAt) / c.AlphaPeriod
		s.alpha *= math.Pow(1-c.G, float64(n))
		s.alphaAt += n * c.AlphaPeriod
	}
	if c.IncreasePeriod > 0 && now-s.incAt >= c.IncreasePeriod {
		n := (now - s.incAt) / c.IncreasePeriod
		s.incAt += n * c.IncreasePeriod
		for range min(n, maxIncreaseEvents) {
			s.tEvents++
			s.increase()
		}
	}
}

// increase is one rate-increase event: fast recovery (the current rate
// halves its distance to the target) for the first FastRecovery events of
// both kinds, then additive increase of the target while one kind is past
// it, hyper increase once both are.
func (s *dcqcnRP) increase() {
	c := s.c
	switch hi, lo := max(s.tEvents, s.bEvents), min(s.tEvents, s.bEvents); {
	case hi <= c.FastRecovery:
	case lo > c.FastRecovery:
		s.rt += float64(lo-c.FastRecovery) * c.RateHAI
	default:
		s.rt += c.RateAI
	}
	s.rt = min(s.rt, c.LineRate)
	s.rc = min((s.rt+s.rc)/2, c.LineRate)
}

// cnp is the reaction point's cut: the target remembers the current
// rate, the current rate falls by alpha/2, alpha rises by G, and the
// increase events start again.
func (s *dcqcnRP) cnp(now int64) {
	c := s.c
	s.catchUp(now)
	if c.ClampTarget || s.tEvents+s.bEvents > 0 || s.cuts == 0 {
		s.rt = s.rc
	}
	s.rc = max(s.rc*(1-s.alpha/2), c.MinRate)
	s.alpha = (1-c.G)*s.alpha + c.G
	s.alphaAt, s.incAt = now, now
	s.bytes, s.tEvents, s.bEvents = 0, 0, 0
	s.cuts++
}

// sent accounts a turn's bytes on the wire: the byte counter's events.
func (s *dcqcnRP) sent(now int64, bytes int) {
	s.catchUp(now)
	if c := s.c; c.ByteCounter > 0 {
		s.bytes += int64(bytes)
		for s.bytes >= c.ByteCounter {
			s.bytes -= c.ByteCounter
			s.bEvents++
			s.increase()
		}
	}
}

// congestionExperienced is the notification point: a CE-marked packet for
// qp is counted, and answered with a CNP to the QP's peer unless the QP
// sent one less than CNPInterval ago.
func (e *Engine) congestionExperienced(qp *QP) {
	e.count(qp, NPECNMarked)
	if !qp.congestionControlled() {
		return
	}
	s := e.cc(qp)
	if s.sentCNP && e.now-s.lastCNP < e.cfg.DCQCN.CNPInterval {
		return
	}
	s.sentCNP, s.lastCNP = true, e.now
	// A CNP is not ECN-capable: it is sent in the QP's traffic class (or
	// the configured one) with the ECN bits clear, so that congestion
	// cannot mark it.
	e.ccRoute = qp.attr.AV
	if tc := e.cfg.DCQCN.CNPTrafficClass; tc != 0 {
		e.ccRoute.TrafficClass = tc
	}
	e.ccRoute.TrafficClass &^= wire.ECNMask
	b, f, h := e.newFrame(&e.ccRoute, wire.OpCNP, 0)
	bth := wire.BTH(f[h:])
	bth.Encode(&wire.BTHFields{Opcode: wire.OpCNP, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, BECN: true})
	clear(f[h+wire.BTHSize : h+wire.BTHSize+wire.CNPReservedSize])
	e.send(qp, b, &e.ccRoute)
	e.count(qp, NPCNPSent)
}
