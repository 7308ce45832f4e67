package fabric

import (
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/wire"
)

// pfcConfig is a 100 Gb/s fabric with 200 ns cables, a 256 KB shared
// buffer per switch and PFC on priority 3. The headroom covers what is in
// flight while a pause travels: a round trip of cable (400 ns = 5 KB),
// the frame being sent each way and the pause's own time.
func pfcConfig() Config {
	cfg := cfg100G(200)
	cfg.Switch.SharedBufferBytes = 256 << 10
	cfg.Switch.EgressAlpha = 1
	cfg.Switch.PFC = PFCConfig{Enabled: true, Priorities: 1 << 3, Alpha: 0.25, HeadroomBytes: 12 << 10, ResumeOffsetBytes: 2 << 10}
	return cfg
}

// incastRun sends n frames of 1000 B from each of hosts 1..senders to
// host 0 at priority prio, all at once, runs the fabric to the end and
// returns it with the receiver's sink.
func incastRun(t *testing.T, cfg Config, senders, n int, prio uint8) (*Fabric, []*Port, *sink) {
	t.Helper()
	s, f, ports, sinks := build(t, 7, cfg, senders+1)
	for i := 1; i <= senders; i++ {
		for j := range n {
			if !ports[i].SendFrame(Frame{Len: 1000, Dst: 0, Prio: prio, ECN: wire.ECNECT0, Meta: Meta{PSN: uint32(j)}}) {
				t.Fatalf("host %d refused frame %d", i, j)
			}
		}
	}
	s.Run()
	return f, ports, sinks[0]
}

// TestPFCLossless: an 8 → 1 incast of 100 frames each overflows the
// buffer. On a lossy priority the switch drops frames; on the lossless
// one it pauses the senders instead: every frame arrives, in order per
// sender, no pause is left in force, and the senders' uplinks were
// paused for a while.
func TestPFCLossless(t *testing.T) {
	const senders, n = 8, 100
	t.Run("lossy", func(t *testing.T) {
		f, ports, k := incastRun(t, pfcConfig(), senders, n, 0)
		st := ports[0].SwitchPortStats()
		if st.Drops == 0 || len(k.got)+int(st.Drops) != senders*n {
			t.Fatalf("lossy priority: %d delivered, %d dropped of %d", len(k.got), st.Drops, senders*n)
		}
		if st.PausesSent != 0 || f.SwitchPort(0, 1).PausesSent != 0 {
			t.Errorf("a lossy priority sent pauses")
		}
	})
	t.Run("lossless", func(t *testing.T) {
		f, ports, k := incastRun(t, pfcConfig(), senders, n, 3)
		if len(k.got) != senders*n {
			t.Fatalf("%d of %d frames delivered; switch port: %+v", len(k.got), senders*n, portTotals(ports[0].SwitchPortStats()))
		}
		next := make(map[HostID]uint32)
		for _, a := range k.got {
			if a.psn != next[a.src] {
				t.Fatalf("host %d: psn %d arrived, want %d", a.src, a.psn, next[a.src])
			}
			next[a.src]++
		}
		var pauses, resumes, paused uint64
		var pausedTime sim.Time
		for i := 1; i <= senders; i++ {
			up := ports[i].UplinkStats()
			pauses += up.PausesReceived
			resumes += up.ResumesReceived
			pausedTime += up.Queues[3].PausedTime
			sw := f.SwitchPort(0, i)
			if sw.PausesSent != up.PausesReceived || sw.ResumesSent != up.ResumesReceived {
				t.Errorf("host %d: switch sent %d/%d pauses/resumes, host got %d/%d", i, sw.PausesSent, sw.ResumesSent, up.PausesReceived, up.ResumesReceived)
			}
			if up.Queues[3].PausesReceived != up.PausesReceived {
				t.Errorf("host %d: pauses not on priority 3", i)
			}
			if sw.Queues[3].HeadroomDrops != 0 {
				t.Errorf("host %d: %d frames overflowed the headroom", i, sw.Queues[3].HeadroomDrops)
			}
			if sw.PausesSent != sw.ResumesSent {
				paused++
			}
		}
		if pauses == 0 || pausedTime == 0 {
			t.Fatalf("no pause: %d pauses, paused %v", pauses, pausedTime)
		}
		if paused != 0 || pauses != resumes {
			t.Errorf("%d pauses and %d resumes; %d senders left paused", pauses, resumes, paused)
		}
		if st := ports[0].SwitchPortStats(); st.Drops != 0 {
			t.Errorf("%d drops on a lossless priority", st.Drops)
		}
		if s := f.switches[0]; s.used != 0 || s.nXoff != 0 {
			t.Errorf("after the run the MMU holds %d bytes with %d pauses in force", s.used, s.nXoff)
		}
		t.Logf("%d pauses, paused %v in all, deepest queue %d B", pauses, pausedTime, ports[0].SwitchPortStats().MaxQueueBytes)
	})
	t.Run("headroom too small", func(t *testing.T) {
		cfg := pfcConfig()
		cfg.Switch.PFC.HeadroomBytes = 1000 // one frame: not the round trip
		_, ports, k := incastRun(t, cfg, senders, n, 3)
		st := ports[0].SwitchPortStats()
		if st.Queues[3].HeadroomDrops == 0 || len(k.got)+int(st.Drops) != senders*n {
			t.Fatalf("%d delivered, %d dropped (%d for headroom) of %d", len(k.got), st.Drops, st.Queues[3].HeadroomDrops, senders*n)
		}
	})
}

// TestStrictPriority: with priorities kept apart, a frame of a higher
// priority waiting at a busy port goes before lower-priority frames that
// came earlier.
func TestStrictPriority(t *testing.T) {
	cfg := cfg100G(100)
	cfg.Switch.PriorityQueues = true
	s, _, ports, sinks := build(t, 1, cfg, 3)
	for j := range 10 {
		ports[1].SendFrame(Frame{Len: 1000, Dst: 0, Prio: 0, Meta: Meta{PSN: uint32(j)}})
	}
	for j := range 10 {
		ports[2].SendFrame(Frame{Len: 1000, Dst: 0, Prio: 5, Meta: Meta{PSN: uint32(100 + j)}})
	}
	s.Run()
	got := sinks[0].got
	if len(got) != 20 {
		t.Fatalf("%d arrivals", len(got))
	}
	// Host 1's first frame reaches the switch first and is sent at once;
	// from then on host 2's, queued by then, all go before host 1's rest.
	order := make([]HostID, len(got))
	for i, a := range got {
		order[i] = a.src
	}
	last5 := 0
	for i, a := range got {
		if a.src == 2 {
			last5 = i
		}
	}
	if last5 > 11 {
		t.Errorf("priority 5 frames finished at position %d of 20: %v", last5, order)
	}
}

// TestECMP: in a leaf-spine fabric, flows between two leaves spread over
// the spines by their UDP source port, and each flow keeps to one spine
// (its frames arrive in order).
func TestECMP(t *testing.T) {
	cfg := cfg100G(100)
	cfg.Topology = TopologyConfig{Kind: LeafSpine, Leaves: 2, Spines: 4, HostsPerLeaf: 2}
	s, f, ports, sinks := build(t, 3, cfg, 4)
	if f.Switches() != 6 || f.MaxHosts() != 4 {
		t.Fatalf("%d switches, %d hosts", f.Switches(), f.MaxHosts())
	}
	if _, err := f.AddHost(mustAddr("10.9.9.9")); err == nil {
		t.Error("a fifth host was attached to a fabric of four host ports")
	}
	const flows, per = 64, 4
	for fl := range flows {
		for j := range per {
			ports[0].SendFrame(Frame{Len: 500, Dst: 2, Entropy: uint16(49152 + fl), Meta: Meta{PSN: uint32(fl<<8 | j)}})
		}
	}
	s.Run()
	if len(sinks[2].got) != flows*per {
		t.Fatalf("%d of %d arrived", len(sinks[2].got), flows*per)
	}
	next := map[uint32]uint32{}
	for _, a := range sinks[2].got {
		fl, j := a.psn>>8, a.psn&0xff
		if j != next[fl] {
			t.Fatalf("flow %d: frame %d arrived before %d", fl, j, next[fl])
		}
		next[fl]++
	}
	// leaf0 is switch 4 (spines come first); its ports 0..3 go to the
	// spines.
	leaf0 := 4
	if f.SwitchName(leaf0) != "leaf0" {
		t.Fatalf("switch %d is %s", leaf0, f.SwitchName(leaf0))
	}
	for sp := range 4 {
		n := f.SwitchPort(leaf0, sp).TxFrames
		if n == 0 || n%per != 0 {
			t.Errorf("spine %d carried %d frames; want a share of whole flows", sp, n)
		}
	}
	// Hosts on one leaf talk through it alone.
	ports[0].SendFrame(Frame{Len: 500, Dst: 1})
	before := f.SwitchPort(leaf0, 0).TxFrames + f.SwitchPort(leaf0, 1).TxFrames + f.SwitchPort(leaf0, 2).TxFrames + f.SwitchPort(leaf0, 3).TxFrames
	s.Run()
	after := f.SwitchPort(leaf0, 0).TxFrames + f.SwitchPort(leaf0, 1).TxFrames + f.SwitchPort(leaf0, 2).TxFrames + f.SwitchPort(leaf0, 3).TxFrames
	if len(sinks[1].got) != 1 || after != before {
		t.Errorf("a frame within leaf0 went to a spine (%d → %d) or was lost", before, after)
	}
}

// TestFatTree: k = 4 has 20 switches and 16 hosts; a frame crosses 2
// links within an edge switch, 4 within a pod and 6 between pods, each
// link adding its serialization and propagation.
func TestFatTree(t *testing.T) {
	cfg := cfg100G(1000)
	cfg.Topology = TopologyConfig{Kind: FatTree, K: 4}
	s, f, ports, sinks := build(t, 5, cfg, 16)
	if f.Switches() != 20 || f.MaxHosts() != 16 {
		t.Fatalf("%d switches, %d hosts", f.Switches(), f.MaxHosts())
	}
	// 1000 B at 100 Gb/s: 1038 B on the wire = 83.04 ns, 84 rounded up
	// at the first hop; each later hop starts on a whole nanosecond.
	for _, tc := range []struct {
		dst   HostID
		links int
	}{{1, 2}, {2, 4}, {3, 4}, {4, 6}, {15, 6}} {
		start := s.Now()
		ports[0].SendFrame(Frame{Len: 1000, Dst: tc.dst})
		s.Run()
		got := sinks[tc.dst].got
		if len(got) != 1 {
			t.Fatalf("host %d: %d arrivals", tc.dst, len(got))
		}
		if d, want := got[0].at-start, sim.Time(tc.links)*(84+1000); d != want {
			t.Errorf("host 0 → %d: %v, want %v (%d links)", tc.dst, d, want, tc.links)
		}
	}
}

// TestPFCSpreading: pause spreading in a leaf-spine fabric with one
// spine. Hosts 0..3 are on leaf0, 4..7 on leaf1; host 0 (through the
// spine) and hosts 6 and 7 (on leaf1) send to host 4. leaf1's port to
// host 4 is the bottleneck; with PFC, leaf1's ingress from the spine
// fills and pauses the spine, whose ingress from leaf0 then fills and
// pauses leaf0's uplink. A victim frame from host 1 to the idle host 5
// shares none of the bottleneck, yet waits behind the pauses
// (head-of-line blocking), where a lossy fabric lets it through.
func TestPFCSpreading(t *testing.T) {
	run := func(prio uint8) (victim, spinePaused, leafPaused sim.Time) {
		cfg := pfcConfig()
		cfg.Topology = TopologyConfig{Kind: LeafSpine, Leaves: 2, Spines: 1, HostsPerLeaf: 4}
		s, f, ports, sinks := build(t, 9, cfg, 8)
		for j := range 300 {
			for _, src := range []int{0, 6, 7} {
				ports[src].SendFrame(Frame{Len: 1000, Dst: 4, Prio: prio, Meta: Meta{PSN: uint32(j)}})
			}
		}
		s.RunUntil(s.Now() + 20000)
		start := s.Now()
		ports[1].SendFrame(Frame{Len: 1000, Dst: 5, Prio: prio})
		s.Run()
		if len(sinks[5].got) != 1 {
			t.Fatalf("victim frame: %d arrivals", len(sinks[5].got))
		}
		// The spine is switch 0, leaf0 switch 1; port 0 of each leaf
		// goes to the spine, port 1 of the spine to leaf1.
		return sinks[5].got[0].at - start, f.SwitchPort(0, 1).PausedTime, f.SwitchPort(1, 0).PausedTime
	}
	lossyLat, _, _ := run(0)
	pfcLat, spinePaused, leafPaused := run(3)
	if spinePaused == 0 || leafPaused == 0 {
		t.Fatalf("pauses did not spread: spine → leaf1 paused %v, leaf0 → spine %v", spinePaused, leafPaused)
	}
	if pfcLat < 4*lossyLat {
		t.Errorf("victim latency %v with PFC, %v lossy: no head-of-line blocking", pfcLat, lossyLat)
	}
	t.Logf("victim frame: %v lossy, %v with PFC (spine → leaf1 paused %v, leaf0 → spine %v)", lossyLat, pfcLat, spinePaused, leafPaused)
}

// TestDynamicThreshold: with EgressAlpha α, one congested lossy queue
// alone can hold α/(1+α) of the shared buffer.
func TestDynamicThreshold(t *testing.T) {
	for _, alpha := range []float64{0.5, 1, 4} {
		cfg := cfg100G(100)
		cfg.Switch.SharedBufferBytes = 100000
		cfg.Switch.EgressAlpha = alpha
		f, ports, _ := incastRun(t, cfg, 8, 100, 0)
		got := ports[0].SwitchPortStats().MaxQueueBytes
		want := int(alpha / (1 + alpha) * 100000)
		if got > want+1000 || got < want-2000 {
			t.Errorf("α %v: queue peaked at %d B, want about %d", alpha, got, want)
		}
		if f.switches[0].used != 0 {
			t.Errorf("α %v: %d bytes left in the buffer", alpha, f.switches[0].used)
		}
	}
}

// TestScheduledNoAllocation: the scheduled switch (shared buffer, PFC)
// allocates nothing per frame once its queues have grown.
func TestScheduledNoAllocation(t *testing.T) {
	s, _, ports, _ := build(t, 1, pfcConfig(), 4)
	k := &countSink{}
	for _, p := range ports {
		p.SetReceiver(k)
	}
	round := func() {
		for i, p := range ports {
			for range 16 {
				p.SendFrame(Frame{Len: 1000, Dst: HostID((i + 1) % len(ports)), Prio: 3, ECN: wire.ECNECT0})
				p.SendFrame(Frame{Len: 1000, Dst: 0, Prio: 3, ECN: wire.ECNECT0})
			}
		}
		s.Run()
	}
	round()
	if allocs := testing.AllocsPerRun(20, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round, want 0", allocs)
	}
}

// TestLossyBesideLossless: one incast into host 0 with half the senders
// on the lossless priority 3 and half on the lossy priority 0, at once:
// the lossy queue drops, the lossless one pauses its senders and loses
// nothing, each counted on its own priority.
func TestLossyBesideLossless(t *testing.T) {
	const senders, n = 8, 100
	s, f, ports, sinks := build(t, 11, pfcConfig(), senders+1)
	prio := func(i int) uint8 { return uint8(3 * (i % 2)) } // odd hosts lossless
	for i := 1; i <= senders; i++ {
		for j := range n {
			ports[i].SendFrame(Frame{Len: 1000, Dst: 0, Prio: prio(i), Meta: Meta{PSN: uint32(j)}})
		}
	}
	s.Run()
	got := map[uint8]int{}
	for _, a := range sinks[0].got {
		got[prio(int(a.src))]++
	}
	st := ports[0].SwitchPortStats()
	if got[3] != senders/2*n || st.Queues[3].Drops != 0 {
		t.Errorf("lossless: %d of %d delivered, %d dropped", got[3], senders/2*n, st.Queues[3].Drops)
	}
	if st.Queues[0].Drops == 0 || got[0]+int(st.Queues[0].Drops) != senders/2*n {
		t.Errorf("lossy: %d delivered + %d dropped of %d", got[0], st.Queues[0].Drops, senders/2*n)
	}
	for i := 1; i <= senders; i++ {
		up := ports[i].UplinkStats()
		if lossless := prio(i) == 3; lossless != (up.Queues[3].PausesReceived > 0) || up.Queues[0].PausesReceived != 0 {
			t.Errorf("host %d (priority %d): pauses received %d on 3, %d on 0", i, prio(i), up.Queues[3].PausesReceived, up.Queues[0].PausesReceived)
		}
	}
	if x := f.switches[0]; x.used != 0 || x.nXoff != 0 {
		t.Errorf("after the run: %d bytes held, %d pauses in force", x.used, x.nXoff)
	}
	t.Logf("lossless %d delivered; lossy %d delivered, %d dropped", got[3], got[0], st.Queues[0].Drops)
}
