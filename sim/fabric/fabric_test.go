package fabric

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/timing"
	"github.com/rnic/rnic/wire"
)

func TestOnePacketTiming(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		ipBytes int
		want    sim.Time
	}{
		{
			// 10 Gb/s: 1002 B + 38 B of Ethernet = 1040 B = 832 ns exactly.
			// Host port done at 832, switch at 832+500 = 1332, switch port
			// done at 1332+832 = 2164, host at 2164+500.
			name: "10G", ipBytes: 1002, want: 2664,
			cfg: Config{Link: timing.WireConfig{RateGbps: 10, Propagation: 500}},
		},
		{
			// 100 Gb/s: 1062 B = 84.96 ns. Host port done at 85 (rounded
			// up), switch at 1085, enqueued at 1385 after 300 ns of
			// forwarding, done at 1385+84.96 → 1470, host at 2470.
			name: "100G with switch latency", ipBytes: 1024, want: 2470,
			cfg: Config{
				Link:   timing.WireConfig{RateGbps: 100, Propagation: 1000},
				Switch: SwitchConfig{Latency: 300},
			},
		},
		{
			// 64 B at 100 Gb/s with a VLAN tag: 106 B = 8.48 ns per hop.
			name: "small frame VLAN", ipBytes: 64, want: 9 + 10 + 9 + 10,
			cfg: Config{Link: timing.WireConfig{RateGbps: 100, Propagation: 10, VLAN: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, ports, sinks := build(t, 1, tc.cfg, 2)
			s.RunUntil(100) // send at a time other than 0
			if !ports[0].SendFrame(Frame{Len: tc.ipBytes, Dst: 1, Meta: Meta{PSN: 42}}) {
				t.Fatal("frame refused")
			}
			s.Run()
			got := sinks[1].got
			if len(got) != 1 || got[0].at != 100+tc.want || got[0].psn != 42 || got[0].src != 0 {
				t.Fatalf("arrivals %v, want one at %v", got, 100+tc.want)
			}
		})
	}
}

func TestTwoSendersQueue(t *testing.T) {
	// Two hosts send one 1024 B frame each to a third at the same instant:
	// both reach the switch at 85+100 ns; one goes at once, the other
	// waits one frame time (84.96 ns) in the output queue.
	s, _, ports, sinks := build(t, 1, cfg100G(100), 3)
	ports[0].SendFrame(Frame{Len: 1024, Dst: 2, Meta: Meta{PSN: 1}})
	ports[1].SendFrame(Frame{Len: 1024, Dst: 2, Meta: Meta{PSN: 2}})
	s.Run()
	got := sinks[2].got
	// 185 + 84.96 → 270 (+100) = 370; 185 + 169.92 → 355 (+100) = 455.
	if len(got) != 2 || got[0].at != 370 || got[0].psn != 1 || got[1].at != 455 || got[1].psn != 2 {
		t.Fatalf("arrivals %v", got)
	}
	st := ports[2].SwitchPortStats()
	if st.MaxQueueBytes != 2048 || st.TxFrames != 2 || st.Drops != 0 || st.QueueWait != 84 {
		t.Fatalf("switch port stats %+v", st)
	}
}

// incast sends k frames of size bytes from each of hosts 1..n-1 to host 0,
// all at time 0, and runs the simulation.
func incast(t testing.TB, seed uint64, cfg Config, n, k, size int) (*sim.Sim, []*Port, []*sink) {
	s, _, ports, sinks := build(t, seed, cfg, n)
	for i := 1; i < n; i++ {
		for j := range k {
			ports[i].SendFrame(Frame{Len: size, Dst: 0, ECN: wire.ECNECT0, Meta: Meta{PSN: uint32(j)}})
		}
	}
	s.Run()
	return s, ports, sinks
}

func TestIncastDropsAndMarks(t *testing.T) {
	const n, k, size = 9, 100, 1000 // 8 senders at line rate into one port
	cfg := cfg100G(100)
	cfg.Switch.BufferBytes = 64 * 1000
	cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 20000, MaxBytes: 20000, MaxProbability: 1}
	_, ports, sinks := incast(t, 1, cfg, n, k, size)
	st := ports[0].SwitchPortStats()
	sent := uint64((n - 1) * k)
	delivered := uint64(len(sinks[0].got))
	if st.Drops == 0 || delivered+st.Drops != sent || st.TxFrames != delivered {
		t.Fatalf("sent %d, delivered %d, dropped %d, transmitted %d", sent, delivered, st.Drops, st.TxFrames)
	}
	if st.MaxQueueBytes > cfg.Switch.BufferBytes || st.MaxQueueBytes < cfg.Switch.BufferBytes-size {
		t.Fatalf("max queue %d B with a %d B buffer", st.MaxQueueBytes, cfg.Switch.BufferBytes)
	}
	// With step marking at 20 KB and a sustained incast, arrivals read:
	// unmarked while the queue builds, then marked to the end (marking
	// happens at enqueue, and nothing is enqueued while the queue drains).
	var marked uint64
	var runs []uint8
	for _, a := range sinks[0].got {
		if a.ecn == wire.ECNCE {
			marked++
		}
		if len(runs) == 0 || runs[len(runs)-1] != a.ecn {
			runs = append(runs, a.ecn)
		}
	}
	if fmt.Sprint(runs) != fmt.Sprint([]uint8{wire.ECNECT0, wire.ECNCE}) {
		t.Fatalf("ECN along the arrivals %v, want unmarked, then marked", runs)
	}
	if marked != st.ECNMarked {
		t.Fatalf("%d frames arrived marked, switch counted %d", marked, st.ECNMarked)
	}
	// The first frames find an empty queue and must not be marked.
	for _, a := range sinks[0].got[:8] {
		if a.ecn != wire.ECNECT0 {
			t.Fatalf("early frame %v was marked", a)
		}
	}
	// The receiver's link runs at line rate throughout: frames leave the
	// switch back to back, one per 1038 wire bytes = 83.04 ns.
	got := sinks[0].got
	if span, want := got[len(got)-1].at-got[0].at, sim.Time((delivered-1)*83040/1000); span < want || span > want+1 {
		t.Fatalf("%d frames took %v, want %v: the output port idled", delivered, span, want)
	}
}

func TestIncastNoBufferLimit(t *testing.T) {
	_, ports, sinks := incast(t, 1, cfg100G(100), 5, 50, 1000)
	st := ports[0].SwitchPortStats()
	if st.Drops != 0 || len(sinks[0].got) != 200 {
		t.Fatalf("unlimited buffer: %d drops, %d delivered", st.Drops, len(sinks[0].got))
	}
	// 4 senders at line rate into one port: the queue reaches about three
	// quarters of everything sent.
	if st.MaxQueueBytes < 140000 {
		t.Fatalf("max queue %d B, want about 150000", st.MaxQueueBytes)
	}
}

func TestDeterminism(t *testing.T) {
	run := func(seed uint64) string {
		cfg := cfg100G(100)
		cfg.Switch.BufferBytes = 80000
		cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 5000, MaxBytes: 60000, MaxProbability: 0.5}
		s, ports, sinks := incast(t, seed, cfg, 9, 60, 1000)
		var b bytes.Buffer
		fmt.Fprintf(&b, "events %d now %v\n%+v\n", s.Events(), s.Now(), ports[0].SwitchPortStats())
		for _, a := range sinks[0].got {
			fmt.Fprintln(&b, a)
		}
		return b.String()
	}
	a, b := run(7), run(7)
	if a != b {
		t.Fatal("same seed, different runs")
	}
	if a == run(8) {
		t.Fatal("different seeds gave identical ECN marks: the RNG is not used")
	}
}

func TestRealFrames(t *testing.T) {
	cfg := cfg100G(50)
	cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 0, MaxBytes: 0, MaxProbability: 1} // mark everything
	s := sim.New(1)
	f, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addrs := HostAddrs(2)
	a, _ := f.AddHost(addrs[0])
	b, _ := f.AddHost(addrs[1])
	var got []*link.Buf
	var at []sim.Time
	b.Attach(dispatcherFunc(func(bufs []*link.Buf) {
		got = append(got, bufs...)
		at = append(at, s.Now())
	}))
	a.Send([]*link.Buf{
		roceFrame(t, addrs[0], addrs[1], 100, wire.ECNECT0),
		roceFrame(t, addrs[0], addrs[1], 100, wire.ECNNotECT),
		roceFrame(t, addrs[0], HostAddrs(3)[2], 100, wire.ECNECT0), // no such host
	})
	s.Run()
	if len(got) != 2 {
		t.Fatalf("delivered %d frames, want 2", len(got))
	}
	var p wire.Packet
	for i, buf := range got {
		fr := buf.Bytes()
		if err := p.Parse(fr); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if err := wire.CheckICRC(fr); err != nil {
			t.Fatalf("frame %d: ICRC broken by the fabric: %v", i, err)
		}
		ip := wire.IPv4(fr)
		if !ip.IsChecksumValid() {
			t.Fatalf("frame %d: IPv4 checksum not fixed after marking", i)
		}
		wantECN := []uint8{wire.ECNCE, wire.ECNNotECT}[i]
		if ecn := ip.TOS() & wire.ECNMask; ecn != wantECN {
			t.Fatalf("frame %d: ECN %d, want %d", i, ecn, wantECN)
		}
		buf.Release()
	}
	if a.Stats().NoRoute != 1 {
		t.Fatalf("host stats %+v, want one unroutable frame", a.Stats())
	}
	if st := b.SwitchPortStats(); st.ECNMarked != 1 || st.ECNNotCapable != 1 {
		t.Fatalf("switch port stats %+v", st)
	}
	// IPv4 frame of 20+8+12+100+4 = 144 B: 182 wire bytes = 14.56 ns per hop.
	if want := sim.Time(15 + 50 + 15 + 50); at[0] != want {
		t.Fatalf("first frame arrived at %v, want %v", at[0], want)
	}
}

func TestRealFrameIPv6Mark(t *testing.T) {
	s := sim.New(1)
	cfg := cfg100G(0)
	cfg.Switch.ECN = ECNConfig{Enabled: true, MaxProbability: 1}
	f, _ := New(s, cfg)
	a6, b6 := mustAddr("fd00::1"), mustAddr("fd00::2")
	a, _ := f.AddHost(a6)
	b, _ := f.AddHost(b6)
	k := &rawSink{}
	b.SetReceiver(k)
	a.Send([]*link.Buf{roceFrame(t, a6, b6, 64, wire.ECNECT1)})
	s.Run()
	if len(k.bufs) != 1 {
		t.Fatal("IPv6 frame not delivered")
	}
	fr := k.bufs[0].Bytes()
	if tc := wire.IPv6(fr).TrafficClass(); tc&wire.ECNMask != wire.ECNCE {
		t.Fatalf("traffic class %#x not marked CE", tc)
	}
	if err := wire.CheckICRC(fr); err != nil {
		t.Fatalf("ICRC broken by marking: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	cfg := cfg100G(0)
	cfg.MTU = 1500
	cfg.HostBufferBytes = 3000
	s, _, ports, sinks := build(t, 1, cfg, 2)
	p := ports[0]
	for _, fr := range []Frame{
		{Len: 1501, Dst: 1}, // oversize
		{Len: 100, Dst: 5},  // no such host
		{Len: 1500, Dst: 1}, // accepted
		{Len: 1500, Dst: 1}, // accepted: the buffer holds 3000 B
		{Len: 1, Dst: 1},    // tail drop at the host port
	} {
		p.SendFrame(fr)
	}
	st := p.Stats()
	if st.Oversize != 1 || st.NoRoute != 1 || p.UplinkStats().Drops != 1 || p.UplinkStats().TxFrames != 2 {
		t.Fatalf("host %+v uplink %+v", st, p.UplinkStats())
	}
	if err := ports[1].Close(); err != nil {
		t.Fatal(err)
	}
	if ports[1].Close() == nil {
		t.Fatal("second Close succeeded")
	}
	s.Run()
	if len(sinks[1].got) != 0 || ports[1].Stats().Closed != 2 {
		t.Fatalf("closed port: delivered %d, stats %+v", len(sinks[1].got), ports[1].Stats())
	}
	if ports[1].SendFrame(Frame{Len: 100, Dst: 0}) {
		t.Fatal("send on a closed port accepted")
	}
}

func TestNoAllocationPerPacket(t *testing.T) {
	cfg := cfg100G(100)
	cfg.Switch.BufferBytes = 1 << 20
	cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 1000, MaxBytes: 100000, MaxProbability: 0.1}
	s, _, ports, _ := build(t, 1, cfg, 4)
	k := &countSink{}
	for _, p := range ports {
		p.SetReceiver(k)
	}
	round := func() {
		for i, p := range ports {
			for range 16 {
				p.SendFrame(Frame{Len: 512, Dst: HostID((i + 1) % len(ports)), ECN: wire.ECNECT0})
			}
		}
		s.Run()
	}
	round() // grow the rings and the event queue
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round of 64 frames, want 0", allocs)
	}
	if k.n == 0 {
		t.Fatal("nothing delivered")
	}
}

func TestPatterns(t *testing.T) {
	hosts := []int{0, 1, 2}
	if got := fmt.Sprint(Incast(hosts, 2)); got != "[{0 2} {1 2}]" {
		t.Errorf("Incast = %s", got)
	}
	if got := fmt.Sprint(AllToAll(hosts)); got != "[{0 1} {0 2} {1 0} {1 2} {2 0} {2 1}]" {
		t.Errorf("AllToAll = %s", got)
	}
	addrs := HostAddrs(300)
	if addrs[0].String() != "10.0.0.1" || addrs[254].String() != "10.0.0.255" || addrs[299].String() != "10.0.1.44" {
		t.Errorf("HostAddrs: %v %v %v", addrs[0], addrs[254], addrs[299])
	}
}

func TestConfigErrors(t *testing.T) {
	s := sim.New(1)
	for name, cfg := range map[string]Config{
		"rate":    {},
		"mtu":     {Link: timing.WireConfig{RateGbps: 1}, MTU: -1},
		"buffer":  {Link: timing.WireConfig{RateGbps: 1}, Switch: SwitchConfig{BufferBytes: -1}},
		"ecn":     {Link: timing.WireConfig{RateGbps: 1}, Switch: SwitchConfig{ECN: ECNConfig{Enabled: true, MinBytes: 10, MaxBytes: 5, MaxProbability: 1}}},
		"latency": {Link: timing.WireConfig{RateGbps: 1}, Switch: SwitchConfig{Latency: -1}},
	} {
		if _, err := New(s, cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	f, _ := New(s, cfg100G(0))
	a := HostAddrs(1)[0]
	if _, err := f.AddHost(a); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddHost(a); err == nil {
		t.Error("duplicate address accepted")
	}
	if id, ok := f.Lookup(a); !ok || id != 0 {
		t.Errorf("Lookup = %d, %v", id, ok)
	}
}

type dispatcherFunc func([]*link.Buf)

func (d dispatcherFunc) Deliver(bufs []*link.Buf) { d(bufs) }

type rawSink struct{ bufs []*link.Buf }

func (r *rawSink) Receive(_ *sim.Sim, f Frame) { r.bufs = append(r.bufs, f.Buf) }

type countSink struct{ n int }

func (c *countSink) Receive(*sim.Sim, Frame) { c.n++ }

// TestTwoHostSelfSend checks the one case a two-host fabric cannot keep in
// arrival order: a host's frame to itself reaches the switch before the
// other host's frames already forwarded to it. It must queue behind them
// (it panicked), and every frame must arrive, in the order queued.
func TestTwoHostSelfSend(t *testing.T) {
	s := sim.New(1)
	f, err := New(s, cfg100G(50))
	if err != nil {
		t.Fatal(err)
	}
	addrs := HostAddrs(2)
	a, _ := f.AddHost(addrs[0])
	b, _ := f.AddHost(addrs[1])
	var got []HostID
	var at []sim.Time
	a.SetReceiver(receiverFunc(func(s *sim.Sim, fr Frame) {
		got = append(got, fr.Src)
		at = append(at, s.Now())
	}))
	for range 10 {
		if !b.SendFrame(Frame{Len: 1024, Dst: a.ID()}) {
			t.Fatal("b's frame refused")
		}
	}
	s.RunUntil(1)
	if !a.SendFrame(Frame{Len: 64, Dst: a.ID()}) {
		t.Fatal("a's frame to itself refused")
	}
	s.Run()
	if len(got) != 11 || got[10] != a.ID() {
		t.Fatalf("delivered from %v, want b's 10 frames then a's own", got)
	}
	for i := 1; i < len(at); i++ {
		if at[i] < at[i-1] {
			t.Fatalf("arrival %d at %v before %v", i, at[i], at[i-1])
		}
	}
}

type receiverFunc func(*sim.Sim, Frame)

func (f receiverFunc) Receive(s *sim.Sim, fr Frame) { f(s, fr) }
