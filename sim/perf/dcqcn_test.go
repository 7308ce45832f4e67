package perf

import (
	"testing"
	"time"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/profile"
)

// TestDCQCNIncast: an 8 → 1 incast of 64 KiB WRITEs overflows the
// switch's 1 MiB port buffer. Without congestion control it collapses on
// drops and retransmission timeouts; with DCQCN the switch's ECN marks
// reach the server, whose CNPs cut the clients' rates before the buffer
// overflows, and the goodput stays near the line rate.
func TestDCQCNIncast(t *testing.T) {
	run := func(on bool) *Result {
		p := mustProfile(t, "cx6")
		p.DCQCN.Enabled = on
		res, err := Run(p, Spec{Test: WriteBW, Size: 65536, Pairs: 8, Incast: true, Iters: 300, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dcqcn %v: %.1f Gb/s, %d drops, %d marked, %d retransmitted, %d timeouts, %d CNPs sent, %d handled (first client)",
			on, res.Gbps, res.WireDrop, res.ECNMarked, res.Retrans, res.Timeouts,
			res.Server.Counters["np_cnp_sent"], res.Client.Counters["rp_cnp_handled"])
		return res
	}
	off, on := run(false), run(true)
	if b := mustProfile(t, "cx6").Switch.BufferBytes; off.QueueMaxBytes == 0 || off.QueueMaxBytes > b+4200 {
		t.Errorf("the server's switch port held at most %d bytes, want some and no more than its %d buffer and a frame", off.QueueMaxBytes, b)
	}
	switch {
	case off.ECNMarked != 0:
		t.Errorf("without DCQCN %d frames were marked: they are not ECN-capable", off.ECNMarked)
	case on.ECNMarked == 0 || on.Server.Counters["np_cnp_sent"] == 0 || on.Client.Counters["rp_cnp_handled"] == 0:
		t.Errorf("with DCQCN: %d marked, %d CNPs sent, %d handled; want some of each", on.ECNMarked,
			on.Server.Counters["np_cnp_sent"], on.Client.Counters["rp_cnp_handled"])
	case on.Gbps < 4*off.Gbps || on.Gbps < 50 || on.Timeouts != 0 || on.WireDrop*2 > off.WireDrop:
		// (Some frames are still lost in the first round trips, at line
		// rate before the first CNPs arrive.)
		t.Errorf("with DCQCN %.1f Gb/s, %d drops, %d timeouts; without %.1f Gb/s, %d drops: want 4 times the goodput, above 50, half the drops, no timeouts",
			on.Gbps, on.WireDrop, on.Timeouts, off.Gbps, off.WireDrop)
	}
}

// TestDCQCNTwoFlows: DCQCN's two-flow convergence, in shape: flow A has
// the bottleneck to itself until flow B joins at 2 ms; with DCQCN both
// settle near half the line rate each within a few milliseconds and
// share it while both run, the link staying busy.
func TestDCQCNTwoFlows(t *testing.T) {
	p := mustProfile(t, "cx6")
	p.DCQCN.Enabled = true
	flow := func(name string, host int, start sim.Time) Tenant {
		return Tenant{Name: name, Spec: Spec{Test: WriteBW, Size: 65536, TxDepth: 32}, Clients: []int{host}, Servers: []int{2},
			Start: start, Stop: 10 * sim.Millisecond}
	}
	res, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{flow("A", 0, 0), flow("B", 1, 2*sim.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	// Each flow's mean rate from 5 to 9 ms, from its timeline.
	mean := func(r *Result) float64 {
		var sum float64
		n := 0
		for _, pt := range r.Timeline {
			if pt.At >= 5*sim.Millisecond && pt.At+pt.Width <= 9*sim.Millisecond {
				sum += pt.Gbps
				n++
			}
		}
		return sum / float64(max(n, 1))
	}
	a, b := mean(res[0]), mean(res[1])
	t.Logf("from 5 to 9 ms: A %.1f Gb/s, B %.1f Gb/s; CNPs handled A %d, B %d", a, b,
		res[0].Client.Counters["rp_cnp_handled"], res[1].Client.Counters["rp_cnp_handled"])
	if a < 35 || a > 65 || b < 35 || b > 65 || a+b < 85 {
		t.Errorf("A %.1f and B %.1f Gb/s: want each within 35-65 (a fair share of 100) and together above 85", a, b)
	}
}

// incastShared runs an 8 → 1 incast of iters 64 KiB WRITEs per sender
// on priority 3, on cx6 with a 2 MiB shared buffer per switch, changed by
// set.
func incastShared(t testing.TB, iters int, set func(p *profile.HardwareProfile)) *Result {
	t.Helper()
	p := mustProfile(t, "cx6")
	p.Switch.SharedBufferBytes = 2 << 20
	set(p)
	res, err := Run(p, Spec{Test: WriteBW, Size: 65536, Pairs: 8, Incast: true, Iters: iters, Metadata: true, TrafficClass: 104})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// incastFabric is the incast of TestDCQCNIncast in a 2 MiB shared buffer,
// iters WRITEs per sender, with PFC on priority 3 if pfc and DCQCN if
// dcqcn.
func incastFabric(t testing.TB, iters int, pfc, dcqcn bool) *Result {
	t.Helper()
	res := incastShared(t, iters, func(p *profile.HardwareProfile) { p.Switch.PFC, p.DCQCN.Enabled = pfc, dcqcn })
	t.Logf("pfc %v dcqcn %v: %.1f Gb/s, Jain %.3f, %d drops, %d marked, %d pauses, paused %v, %d timeouts",
		pfc, dcqcn, res.Gbps, res.Jain, res.WireDrop, res.ECNMarked, res.PFCPauses, res.PFCPaused, res.Timeouts)
	return res
}

// TestPFCIncast: the 8 → 1 incast of TestDCQCNIncast in a 2 MiB shared
// buffer. Lossy, it collapses; with PFC on its priority nothing is
// dropped and the port runs at line rate, the senders paused in turn
// (fairly); with DCQCN as well the rates are cut before the pause
// threshold, so there are far fewer pauses (and, over this short run,
// DCQCN's slow recovery after its first cuts leaves the port under line
// rate: 67 Gb/s when written).
func TestPFCIncast(t *testing.T) {
	// DCQCN's first cuts weigh on a short run: it gets twice the WRITEs.
	lossy, pfc, both := incastFabric(t, 150, false, false), incastFabric(t, 150, true, false), incastFabric(t, 300, true, true)
	if lossy.WireDrop == 0 || lossy.PFCPauses != 0 || lossy.Gbps > 50 {
		t.Errorf("lossy: %.1f Gb/s, %d drops, %d pauses; want a collapse on drops", lossy.Gbps, lossy.WireDrop, lossy.PFCPauses)
	}
	if pfc.WireDrop != 0 || pfc.HeadroomDrops != 0 || pfc.Retrans != 0 || pfc.PFCPauses == 0 || pfc.PFCPaused == 0 || pfc.Gbps < 95 || pfc.Jain < 0.95 {
		t.Errorf("PFC: %.1f Gb/s, Jain %.3f, %d drops, %d retransmitted, %d pauses; want line rate, fair, lossless", pfc.Gbps, pfc.Jain, pfc.WireDrop, pfc.Retrans, pfc.PFCPauses)
	}
	// Pauses per WRITE: both ran twice as many.
	if both.WireDrop != 0 || both.Gbps < 60 || both.PFCPauses*10 > 2*pfc.PFCPauses || both.ECNMarked == 0 {
		t.Errorf("PFC and DCQCN: %.1f Gb/s, %d drops, %d pauses in 300 WRITEs per sender (PFC alone %d in 150), %d marked; want lossless, above 60 Gb/s, a tenth of the pauses per WRITE",
			both.Gbps, both.WireDrop, both.PFCPauses, pfc.PFCPauses, both.ECNMarked)
	}
}

// TestDCQCNPaperTwoFlows sets DCQCN's two-flow convergence beside the
// DCQCN paper's parameters and its fluid model (Zhu et al., "ECN or
// Delay", CoNEXT 2016: two flows starting together at line rate on a 40
// Gb/s port; the queue peaks at 475 KB at 0.14 ms, the rates reach the
// fair 20 Gb/s by about 20 ms, the queue settles near 20 KB; the authors'
// packet-level simulations: about 99 % of the link, the queue mostly
// 100 KB or less). The tolerances, each stated in docs/model.md:
// converged (30-60 ms) each flow within 10 % of the fair share and the
// link at least 95 % used; both flows at 90 % of the fair share within
// twice the fluid model's 20 ms; the first peak of the queue within half
// to twice 475 KB; the converged queue's mean at most 100 KB (the
// packet-level figure: the fluid model's 20 KB is not met).
func TestDCQCNPaperTwoFlows(t *testing.T) {
	p := mustProfile(t, "cx6")
	d, err := profile.DCQCNPreset("paper")
	if err != nil {
		t.Fatal(err)
	}
	d.Enabled = true
	p.DCQCN = d
	p.Link.RateGbps = 40
	flow := func(name string, host int) Tenant {
		return Tenant{Name: name, Spec: Spec{Test: WriteBW, Size: 65536, TxDepth: 32}, Clients: []int{host}, Servers: []int{2},
			Stop: 60 * sim.Millisecond}
	}
	res, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{flow("A", 0), flow("B", 1)}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].Timeline, res[1].Timeline
	window := func(tl []TimelinePoint, lo, hi sim.Time, f func(TimelinePoint) float64) (mean float64) {
		n := 0
		for _, pt := range tl {
			if pt.At >= lo && pt.At+pt.Width <= hi {
				mean += f(pt)
				n++
			}
		}
		return mean / float64(max(n, 1))
	}
	gbps := func(pt TimelinePoint) float64 { return pt.Gbps }
	ga, gb := window(a, 30*sim.Millisecond, 60*sim.Millisecond, gbps), window(b, 30*sim.Millisecond, 60*sim.Millisecond, gbps)
	queue := window(a, 30*sim.Millisecond, 60*sim.Millisecond, func(pt TimelinePoint) float64 { return float64(pt.QueueBytes) })
	var peak int64
	for _, pt := range a {
		if pt.At < sim.Millisecond {
			peak = max(peak, pt.QueueBytes)
		}
	}
	converged := sim.Never
	for i := range min(len(a), len(b)) {
		if a[i].RateGbps >= 18 && b[i].RateGbps >= 18 {
			converged = a[i].At
			break
		}
	}
	t.Logf("30-60 ms: A %.2f B %.2f Gb/s (%.1f %% of 40), queue mean %.0f B; first peak %d B; both at 18 Gb/s from %v",
		ga, gb, (ga+gb)/40*100, queue, peak, converged)
	if ga < 18 || ga > 22 || gb < 18 || gb > 22 || ga+gb < 38 {
		t.Errorf("converged rates A %.2f, B %.2f Gb/s: want each within 10 %% of 20 and together 95 %% of 40", ga, gb)
	}
	if converged > 40*sim.Millisecond {
		t.Errorf("both flows at 90 %% of the fair share only from %v, want within 40 ms (twice the fluid model's 20)", converged)
	}
	if peak < 475_000/2 || peak > 475_000*2 {
		t.Errorf("the queue's first peak %d B, want within half to twice the fluid model's 475 KB", peak)
	}
	if queue > 100_000 {
		t.Errorf("converged queue %.0f B on average, want at most 100 KB", queue)
	}
}

// TestPFCStopsTheNIC: under PFC a NIC with a finite transmit buffer
// (engine.tx_buffer_bytes) stops its arbiter once the paused port holds
// that much, and goes on at the resume; with an unlimited one its queue
// grows while it is paused.
func TestPFCStopsTheNIC(t *testing.T) {
	run := func(txBuf int) *Result {
		res := incastShared(t, 100, func(p *profile.HardwareProfile) { p.Switch.PFC, p.Engine.TxBufferBytes = true, txBuf })
		t.Logf("tx buffer %d: %.1f Gb/s, %d pauses, deepest uplink queue %d B", txBuf, res.Gbps, res.PFCPauses, res.UplinkQueueMaxBytes)
		return res
	}
	unlimited, limited := run(0), run(64<<10)
	if limited.UplinkQueueMaxBytes > 64<<10+2*4200 || limited.WireDrop != 0 || limited.PFCPauses == 0 || limited.Gbps < 95 {
		t.Errorf("64 KiB transmit buffer: uplink queue %d B, %d drops, %d pauses, %.1f Gb/s; want at most the buffer and two frames, lossless at line rate",
			limited.UplinkQueueMaxBytes, limited.WireDrop, limited.PFCPauses, limited.Gbps)
	}
	if unlimited.UplinkQueueMaxBytes < 4*limited.UplinkQueueMaxBytes {
		t.Errorf("unlimited transmit buffer: uplink queue %d B, want it to grow while paused (limited: %d)", unlimited.UplinkQueueMaxBytes, limited.UplinkQueueMaxBytes)
	}
}

// TestPFCPausesOnePriority: a NIC with a finite transmit buffer stops
// only the paused priority. Host 0 sends WRITEs on the lossless priority
// (tclass 104) into a 4 → 1 incast that PFC pauses, and on the lossy one
// (tclass 0) to a server of its own. With the incast, host 0's lossy
// tenant keeps most of what the incast leaves of host 0's uplink (it had
// the whole wire alone): its packets are not held behind the paused
// priority, whose QPs the arbiter passes over while their buffer is full.
func TestPFCPausesOnePriority(t *testing.T) {
	run := func(incast bool) []*Result {
		p := mustProfile(t, "cx6")
		p.Switch.SharedBufferBytes, p.Switch.PFC, p.Engine.TxBufferBytes = 2<<20, true, 64<<10
		sc := Scenario{Metadata: true, Seed: 1, Tenants: []Tenant{
			{Name: "lossy", Spec: Spec{Test: WriteBW, Size: 65536, QPs: 2, Iters: 3000}, Clients: []int{0}, Servers: []int{5}},
		}}
		if incast {
			sc.Tenants = append(sc.Tenants, Tenant{Name: "lossless", Spec: Spec{Test: WriteBW, Size: 65536, QPs: 2, Iters: 1500, TrafficClass: 104},
				Clients: []int{0, 1, 2, 3}, Servers: []int{4}})
		}
		res, err := RunScenario(p, sc)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	alone, mixed := run(false)[0], run(true)
	lossy, lossless := mixed[0], mixed[1]
	t.Logf("lossy alone %.1f Gb/s; beside the incast %.1f Gb/s, the incast %.1f Gb/s with %d pauses, %v paused",
		alone.Gbps, lossy.Gbps, lossless.Gbps, lossless.PFCPauses, time.Duration(lossless.PFCPaused))
	if lossless.PFCPauses == 0 || lossless.WireDrop != 0 {
		t.Fatalf("the incast: %d pauses, %d drops; want PFC to pause it, losslessly", lossless.PFCPauses, lossless.WireDrop)
	}
	// Host 0's share of the incast's port is a quarter of 100 Gb/s.
	if lossy.Gbps < 0.6*alone.Gbps {
		t.Errorf("the lossy tenant beside the paused incast: %.1f Gb/s, want at least 60 %% of its %.1f alone", lossy.Gbps, alone.Gbps)
	}
}
