package fabric

import (
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// FuzzFabricFrames sends arbitrary bytes as real frames through a
// leaf-spine fabric with a small shared buffer and PFC: the fabric reads
// their IP headers (destination, ECN, DSCP, UDP source port) and must
// never panic; every frame is delivered or counted where it was refused
// or dropped, and when the run ends the buffers are empty and no pause is
// left in force.
func FuzzFabricFrames(f *testing.F) {
	a, b := HostAddrs(4)[0], HostAddrs(4)[3]
	r := wire.Route{Src: wire.GIDFromAddr(a), Dst: wire.GIDFromAddr(b), TrafficClass: 104 | wire.ECNECT0}
	good := make([]byte, wire.FrameLen(&r, wire.OpRCSendOnly, 100))
	r.Finish(good)
	f.Add(append([]byte{0, byte(len(good))}, good...))
	f.Add([]byte{3, 20, 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2})
	f.Add([]byte{1, 40, 0x60})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := cfg100G(100)
		cfg.MTU = 2048
		cfg.Switch.SharedBufferBytes = 64 << 10
		cfg.Switch.EgressAlpha = 0.5
		cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 1000, MaxBytes: 8000, MaxProbability: 0.5}
		cfg.Switch.PFC = PFCConfig{Enabled: true, Priorities: 1<<3 | 1<<0, Alpha: 0.25, HeadroomBytes: 4096, ResumeOffsetBytes: 1024}
		cfg.Topology = TopologyConfig{Kind: LeafSpine, Leaves: 2, Spines: 2, HostsPerLeaf: 2}
		s, fab, ports, _ := build(t, 1, cfg, 4)
		k := &countSink{}
		for _, p := range ports {
			p.SetReceiver(k)
		}
		sent := 0
		// Each frame: a byte naming the sending host, a length byte (times
		// 16 up to the MTU and beyond), then that many bytes (repeated to
		// fill), all sent at once and then again after the first round.
		for round := range 2 {
			rest := data
			for len(rest) >= 3 {
				src, n := int(rest[0])%len(ports), int(rest[1])*16+int(rest[1]&15)
				body := rest[2:]
				take := min(len(body), n)
				buf := link.Get(max(n, 1))
				fr := buf.Bytes()
				for i := range fr {
					if take > 0 {
						fr[i] = body[i%take]
					}
				}
				ports[src].Send([]*link.Buf{buf})
				sent++
				rest = body[take:]
			}
			if round == 0 {
				s.RunUntil(s.Now() + 500)
			}
		}
		s.Run()
		var refused, drops uint64
		for _, p := range ports {
			st := p.Stats()
			refused += st.Oversize + st.NoRoute + st.Closed + st.NoReceiver
		}
		sw, up := fab.Totals()
		drops = sw.Drops + up.Drops
		if got := k.n + int(refused) + int(drops); got != sent {
			t.Fatalf("%d frames sent, %d delivered + %d refused + %d dropped", sent, k.n, refused, drops)
		}
		for _, x := range fab.switches {
			if x.used != 0 || x.nXoff != 0 {
				t.Fatalf("%s: %d bytes held, %d pauses in force after the run", x.name, x.used, x.nXoff)
			}
			for _, p := range x.ports {
				for _, g := range p.ing {
					if g.shared != 0 || g.hdrm != 0 {
						t.Fatalf("%s: ingress holds %d + %d bytes after the run", x.name, g.shared, g.hdrm)
					}
				}
			}
		}
	})
}
