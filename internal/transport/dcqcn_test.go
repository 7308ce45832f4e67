package transport

import (
	"math"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// testDCQCN is DCQCN with round numbers, so that each step can be
// computed by hand.
var testDCQCN = DCQCN{CNPInterval: 50_000, G: 1.0 / 256, AlphaPeriod: 55_000, IncreasePeriod: 55_000,
	ByteCounter: 10 << 20, FastRecovery: 5, RateAI: 40e6, RateHAI: 400e6, MinRate: 100e6, LineRate: 100e9, InitialAlpha: 1}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// TestDCQCNCut: a CNP sets the target to the current rate, cuts the
// current rate by alpha/2 and raises alpha by g: the first CNP at alpha 1
// halves the rate.
func TestDCQCNCut(t *testing.T) {
	c := testDCQCN
	s := dcqcnRP{c: &c, rc: c.LineRate, rt: c.LineRate, alpha: c.InitialAlpha}
	s.cnp(0)
	if !near(s.rc, 50e9) || !near(s.rt, 100e9) || !near(s.alpha, 1) {
		t.Fatalf("after the first CNP: rc %v rt %v alpha %v, want 50e9, 100e9, 1", s.rc, s.rt, s.alpha)
	}
	// Alpha decays by (1-g) each K without CNPs: after 10 K.
	s.cnp(10 * 55_000)
	wantAlpha := math.Pow(1-c.G, 10)
	wantRC := 0.0
	{
		// The 10 timer events in between ran fast recovery 5 times
		// towards 100e9, then 5 additive increases; then the cut.
		rc, rt := 50e9, 100e9
		for i := 1; i <= 10; i++ {
			if i > 5 {
				rt = min(rt+c.RateAI, c.LineRate)
			}
			rc = min((rt+rc)/2, c.LineRate)
		}
		wantRC = rc * (1 - wantAlpha/2)
	}
	if !near(s.rc, wantRC) || !near(s.alpha, (1-c.G)*wantAlpha+c.G) {
		t.Errorf("second cut: rc %v alpha %v, want %v and %v", s.rc, s.alpha, wantRC, (1-c.G)*wantAlpha+c.G)
	}
	// A second CNP before any increase event: the rate is cut again, the
	// target stays (ClampTarget off); with ClampTarget it follows.
	rt := s.rt
	s.cnp(10 * 55_000)
	if s.rt != rt {
		t.Errorf("a CNP with no increase since the last: target %v, want it kept at %v", s.rt, rt)
	}
	cl := c
	cl.ClampTarget = true
	rc := s.rc
	s.c = &cl
	s.cnp(10 * 55_000)
	s.c = &c
	if s.rt != rc {
		t.Errorf("ClampTarget: target %v, want the current rate %v", s.rt, rc)
	}
	// The floor.
	for range 200 {
		s.cnp(10 * 55_000)
	}
	if s.rc != c.MinRate {
		t.Errorf("after 200 CNPs rc %v, want the floor %v", s.rc, c.MinRate)
	}
}

// TestDCQCNRecovery: after a cut the rate climbs back: fast recovery halves
// the distance to the target on each event, then the target grows (by AI
// while one kind of event is past F, by HAI once both are) and the rate
// follows it, never past the line rate.
func TestDCQCNRecovery(t *testing.T) {
	c := testDCQCN
	s := dcqcnRP{c: &c, rc: 80e9, rt: 80e9, alpha: 1}
	s.cnp(0) // rc 40e9, rt 80e9
	s.catchUp(3 * 55_000)
	if !near(s.rc, 75e9) || !near(s.rt, 80e9) || s.tEvents != 3 {
		t.Fatalf("after 3 timer events: rc %v rt %v (%d events), want 75e9 80e9", s.rc, s.rt, s.tEvents)
	}
	// Byte-counter events come with what the QP sends.
	for range 6 {
		s.sent(3*55_000, int(c.ByteCounter))
	}
	// Events 1..5 of bytes (with 3 timer events: fast recovery while both
	// are within F), the 6th is past F on one kind: additive increase.
	rc, rt := 75e9, 80e9
	for i := 1; i <= 6; i++ {
		if i == 6 {
			rt += c.RateAI
		}
		rc = (rt + rc) / 2
	}
	if s.bEvents != 6 || !near(s.rt, rt) || !near(s.rc, rc) {
		t.Errorf("after 6 byte events: rc %v rt %v (%d), want %v %v", s.rc, s.rt, s.bEvents, rc, rt)
	}
	// Both kinds past F: hyper increase, by (min-F)·HAI per event.
	s.catchUp(9 * 55_000) // 6 more timer events: 9 in all
	if s.rt <= rt+c.RateAI*6 {
		t.Errorf("9 timer and 6 byte events: target %v, want hyper increase past %v", s.rt, rt+c.RateAI*6)
	}
	// A long quiet time brings the QP back to the line rate and no further.
	s.catchUp(1_000_000_000)
	if s.rc != c.LineRate || s.rt != c.LineRate {
		t.Errorf("after a quiet second: rc %v rt %v, want the line rate", s.rc, s.rt)
	}
}

// TestDCQCNPacing: a QP below the line rate may send its next packet only
// when the last one's bytes have left at its rate.
func TestDCQCNPacing(t *testing.T) {
	c := testDCQCN
	s := ccState{rp: &dcqcnRP{c: &c, rc: 8e9, rt: 8e9, alpha: 1}}
	s.pace(1000, 1000) // 1000 B at 8 Gb/s: 1 µs
	if s.nextSend != 2000 {
		t.Errorf("next send at %d, want 2000", s.nextSend)
	}
	s.pace(1500, 500) // sent early (the gap was the caller's to respect): queued behind
	if s.nextSend != 2500 {
		t.Errorf("next send at %d, want 2500", s.nextSend)
	}
}

// markCE sets Congestion Experienced in a frame's IPv4 header, as a
// congested switch does.
func markCE(f []byte) {
	ip := wire.IPv4(f)
	ip.SetTOS(ip.TOS() | wire.ECNCE)
	ip.SetChecksum(ip.ComputeChecksum())
}

// TestDCQCNNotificationAndReaction: with DCQCN the requester's WRITEs
// leave ECN-capable (ECT(0)); B, receiving them marked CE, answers with
// one CNP per CNPInterval (BTH opcode 0x81 to A's QP, BECN set, 16
// reserved zero bytes, a valid ICRC, not ECN-capable itself); A's QP
// halves its rate on it and then paces its packets at that rate.
func TestDCQCNNotificationAndReaction(t *testing.T) {
	c := testDCQCN
	p := newPair(t, nodeConfig{dcqcn: &c}, nodeConfig{dcqcn: &c})
	for i := range 4 {
		p.A.post(SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, SGL: []SGE{p.A.sge(0, 64)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
	}
	p.A.e.Run(p.now, 16)
	out := append([]*link.Buf(nil), p.A.e.Outbox()...)
	p.A.e.ClearOutbox()
	if len(out) != 4 {
		t.Fatalf("%d frames sent, want 4", len(out))
	}
	for _, b := range out {
		if tos := wire.IPv4(b.Bytes()).TOS(); tos&wire.ECNMask != wire.ECNECT0 {
			t.Fatalf("a WRITE left with ECN bits %d, want ECT(0)", tos&wire.ECNMask)
		}
		markCE(b.Bytes())
	}
	p.B.e.Receive(p.now, out)
	var cnps []*link.Buf
	for _, b := range p.B.e.Outbox() {
		var pk wire.Packet
		if err := pk.Parse(b.Bytes()); err != nil {
			t.Fatal(err)
		}
		if pk.Op == wire.OpCNP {
			cnps = append(cnps, b)
			if pk.BTH.DestQP() != p.A.qp.QPN || !pk.BTH.BECN() || pk.TrafficClass&wire.ECNMask != wire.ECNNotECT {
				t.Errorf("CNP to QP %#x, BECN %v, ECN %d; want QP %#x, BECN, not ECN-capable", pk.BTH.DestQP(), pk.BTH.BECN(), pk.TrafficClass&wire.ECNMask, p.A.qp.QPN)
			}
			if len(pk.Payload) != 0 || wire.CheckICRC(b.Bytes()) != nil {
				t.Errorf("CNP of %d payload bytes, ICRC %v", len(pk.Payload), wire.CheckICRC(b.Bytes()))
			}
		}
	}
	if len(cnps) != 1 {
		t.Fatalf("%d CNPs for 4 marked packets in one interval, want 1", len(cnps))
	}
	if got := p.B.e.Counters(); got[NPECNMarked] != 4 || got[NPCNPSent] != 1 {
		t.Errorf("B counted %d marked packets and %d CNPs sent, want 4 and 1", got[NPECNMarked], got[NPCNPSent])
	}
	cnp := cnps[0].Clone()
	p.B.e.ClearOutbox()
	p.A.e.Receive(p.now, []*link.Buf{cnp})
	if got := p.A.e.Counters()[RPCNPHandled]; got != 1 || p.A.qp.cc == nil || !near(p.A.qp.cc.rp.rate(), c.LineRate/2) {
		t.Fatalf("A handled %d CNPs, its rate %v; want 1 and half the line rate", got, p.A.qp.cc)
	}
	// Paced: a 1 KiB WRITE now leaves only after the last one's bytes
	// at 50 Gb/s; the arbiter's gate (the rate limiter) refuses the QP's
	// turn and the engine's timer rings the QP then.
	p.A.post(SendWR{WRID: 9, Opcode: WRRDMAWrite, SGL: []SGE{p.A.sge(0, 1024)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
	p.A.qp.cc.nextSend = p.now + 1000
	refused := p.A.e.ArbiterStats().Refused
	p.A.e.Run(p.now, 16)
	if n := len(p.A.e.Outbox()); n != 0 {
		t.Fatalf("%d frames sent before the pacing time", n)
	}
	if got := p.A.e.ArbiterStats().Refused - refused; got != 1 {
		t.Errorf("the arbiter's gate refused %d turns before the pacing time, want 1", got)
	}
	at, ok := p.A.e.NextDeadline()
	if !ok || at != p.now+1000 {
		t.Fatalf("next deadline %v %v, want the pacing time %d", at, ok, p.now+1000)
	}
	p.A.e.Tick(at)
	p.A.e.Run(at, 16)
	if n := len(p.A.e.Outbox()); n != 1 {
		t.Fatalf("%d frames sent at the pacing time, want 1", n)
	}
	if want := at + int64(math.Ceil(float64(p.A.e.Outbox()[0].Len())*8e9/(c.LineRate/2))); p.A.qp.cc.nextSend != want {
		t.Errorf("next send at %d, want %d (the frame at 50 Gb/s)", p.A.qp.cc.nextSend, want)
	}
}

// TestDCQCNResetForgets: a QP taken back to RESET forgets its rate: when
// it is connected again it starts at the line rate.
func TestDCQCNResetForgets(t *testing.T) {
	c := testDCQCN
	p := newPair(t, nodeConfig{dcqcn: &c}, nodeConfig{dcqcn: &c})
	p.A.e.ccCNP(p.A.qp)
	if err := p.A.e.Modify(p.A.qp, &QPAttr{State: QPSReset}, AttrState); err != nil {
		t.Fatal(err)
	}
	if p.A.qp.cc != nil {
		t.Errorf("after RESET the QP keeps its congestion state (rate %v)", p.A.qp.cc.rp.rate())
	}
}

// TestDCQCNCNPTrafficClass: with CNPTrafficClass set, CNPs leave in that
// class (ConnectX's DSCP 48, priority 6), whatever the QP's, and never
// ECN-capable.
func TestDCQCNCNPTrafficClass(t *testing.T) {
	c := testDCQCN
	c.CNPTrafficClass = 192 | wire.ECNECT0 // the ECN bits are ignored
	p := newPair(t, nodeConfig{dcqcn: &c}, nodeConfig{dcqcn: &c})
	p.A.post(SendWR{Opcode: WRRDMAWrite, SGL: []SGE{p.A.sge(0, 64)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
	p.A.e.Run(p.now, 16)
	out := append([]*link.Buf(nil), p.A.e.Outbox()...)
	p.A.e.ClearOutbox()
	markCE(out[0].Bytes())
	p.B.e.Receive(p.now, out)
	n := 0
	for _, b := range p.B.e.Outbox() {
		var pk wire.Packet
		if err := pk.Parse(b.Bytes()); err != nil {
			t.Fatal(err)
		}
		if pk.Op == wire.OpCNP {
			n++
			if pk.TrafficClass != 192 {
				t.Errorf("CNP traffic class %d, want 192", pk.TrafficClass)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d CNPs, want 1", n)
	}
}
