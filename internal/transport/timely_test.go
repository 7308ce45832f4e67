package transport

import (
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// testTIMELY is TIMELY at 100 Gb/s with the paper's thresholds.
var testTIMELY = TIMELY{LineRate: 100e9, MinRate: 100e6, Alpha: 0.875, Beta: 0.8, Delta: 100e6,
	TLow: 50_000, THigh: 500_000, MinRTT: 20_000, HAIThreshold: 5}

// TestTIMELYRules walks Algorithm 1 sample by sample: the first sample
// only sets the reference; under TLow the rate rises by Delta; a rising
// gradient between the thresholds cuts it by Beta × the normalized
// gradient; falling gradients raise it by Delta, by HAIThreshold × Delta
// from the fifth in a row; above THigh it falls by Beta × (1 − THigh/RTT).
func TestTIMELYRules(t *testing.T) {
	c := testTIMELY
	s := newTimelyRP(&c)
	s.rc = 50e9
	s.rttSample(0, 10_000)
	if s.rc != 50e9 || s.prevRTT != 10_000 {
		t.Fatalf("first sample moved the rate to %v", s.rc)
	}
	s.rttSample(0, 20_000) // under TLow: additive increase
	if !near(s.rc, 50.1e9) {
		t.Fatalf("under TLow: %v, want 50.1e9", s.rc)
	}
	// rttDiff = 0.125·0 + 0.875·10000 = 8750 after the sample above;
	// now +40000: rttDiff = 0.125·8750 + 0.875·40000 = 36093.75, the
	// gradient 1.8 is capped at 1: the rate falls to 1 − 0.8 of itself.
	s.rttSample(0, 60_000)
	if !near(s.rc, 50.1e9*0.2) {
		t.Fatalf("rising gradient: %v, want %v", s.rc, 50.1e9*0.2)
	}
	// Falling RTTs between the thresholds, from a flat history.
	s.prevRTT, s.rttDiff = 100_000, 0
	r := s.rc
	for i := 1; i <= 6; i++ {
		s.rttSample(0, 100_000-int64(i)*1000)
		step := 1.0
		if i >= c.HAIThreshold {
			step = float64(c.HAIThreshold)
		}
		r += step * c.Delta
		if !near(s.rc, r) {
			t.Fatalf("falling gradient %d: %v, want %v", i, s.rc, r)
		}
	}
	s.rttSample(0, 1_000_000) // above THigh: 1 − 0.8·(1 − 0.5)
	if !near(s.rc, r*0.6) {
		t.Fatalf("above THigh: %v, want %v", s.rc, r*0.6)
	}
	for range 100 {
		s.rttSample(0, 10_000_000)
	}
	if s.rc != c.MinRate {
		t.Errorf("after 100 huge RTTs: %v, want the floor %v", s.rc, c.MinRate)
	}
	for range 10000 {
		s.rttSample(0, 1000)
	}
	if s.rc != c.LineRate {
		t.Errorf("after 10000 small RTTs: %v, want the line rate %v", s.rc, c.LineRate)
	}
}

// TestTIMELYProbe: with TIMELY the requester times one ACK-requesting
// packet at a time; the ACK that covers it is a round trip for the
// algorithm (here a long one, so the rate falls), and packets are not
// ECN-capable.
func TestTIMELYProbe(t *testing.T) {
	c := testTIMELY
	p := newPair(t, nodeConfig{timely: &c}, nodeConfig{timely: &c})
	round := func(rtt int64) {
		t.Helper()
		p.A.post(SendWR{Opcode: WRRDMAWrite, SGL: []SGE{p.A.sge(0, 64)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
		p.A.e.Run(p.now, 16)
		out := append([]*link.Buf(nil), p.A.e.Outbox()...)
		p.A.e.ClearOutbox()
		if len(out) != 1 {
			t.Fatalf("%d frames sent, want 1", len(out))
		}
		if tos := wire.IPv4(out[0].Bytes()).TOS(); tos&wire.ECNMask != wire.ECNNotECT {
			t.Errorf("TIMELY sent an ECN-capable packet (%d)", tos&wire.ECNMask)
		}
		if s := p.A.qp.cc; s == nil || !s.probing {
			t.Fatalf("no probe out after an ACK-requesting packet")
		}
		p.B.e.Receive(p.now, out)
		p.B.e.Run(p.now, 16)
		acks := append([]*link.Buf(nil), p.B.e.Outbox()...)
		p.B.e.ClearOutbox()
		p.now += rtt
		p.A.e.Receive(p.now, acks)
		if p.A.qp.cc.probing {
			t.Fatalf("the ACK did not end the probe")
		}
	}
	round(10_000) // the reference
	round(10_000) // under TLow: + Delta (capped at the line rate)
	if r := p.A.qp.cc.rp.rate(); r != c.LineRate {
		t.Fatalf("rate %v after short RTTs, want the line rate", r)
	}
	round(1_000_000) // above THigh
	if r, want := p.A.qp.cc.rp.rate(), c.LineRate*(1-c.Beta*0.5); !near(r, want) {
		t.Fatalf("rate %v after a 1 ms RTT, want %v", r, want)
	}
}
