package fabric

import (
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/wire"
)

// window keeps w metadata frames in flight on every flow of an all-to-all
// pattern: each arrival sends the flow's next frame from its source, like
// a window-based sender with an ideal ACK path.
type window struct {
	f      *Fabric
	size   int
	budget int // frames left to send
	n      uint64
}

func (w *window) Receive(s *sim.Sim, fr Frame) {
	w.n++
	if w.budget > 0 {
		w.budget--
		w.f.Host(fr.Src).SendFrame(Frame{Len: w.size, Dst: fr.Dst, ECN: wire.ECNECT0, Meta: fr.Meta})
	}
}

// BenchmarkFabricPackets measures metadata-only frames through host
// ports, the switch and its output ports on one core: b.N frames
// delivered, in an 8-host all-to-all with 4 frames in flight per flow.
func BenchmarkFabricPackets(b *testing.B) {
	cfg := cfg100G(100)
	cfg.Switch.BufferBytes = 1 << 20
	cfg.Switch.Latency = 300
	cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 5120, MaxBytes: 204800, MaxProbability: 0.01}
	s, f, ports, _ := build(b, 1, cfg, 8)
	w := &window{f: f, size: 1024}
	for _, p := range ports {
		p.SetReceiver(w)
	}
	ids := make([]HostID, len(ports))
	for i := range ids {
		ids[i] = HostID(i)
	}
	pairs := AllToAll(ids)
	w.budget = max(b.N-4*len(pairs), 0)
	b.ReportAllocs()
	b.ResetTimer()
	for range 4 {
		for _, pr := range pairs {
			f.Host(pr.Src).SendFrame(Frame{Len: w.size, Dst: pr.Dst, ECN: wire.ECNECT0})
		}
	}
	s.Run()
	b.ReportMetric(float64(w.n)/b.Elapsed().Seconds(), "pkts/s")
	b.ReportMetric(float64(s.Events())/float64(w.n), "events/pkt")
}
