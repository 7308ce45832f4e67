package perf

import (
	"testing"
	"time"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/profile"
)

// BenchmarkSimSpeed measures the simulator itself: simulated packets (all
// frames on the wire, both directions) and operations per wall-clock
// second, for 64-byte and 64 KiB RDMA WRITEs on 1 QP and 64-byte ones on
// 4096 QPs, moving real bytes and metadata only; and an 8 → 1 incast of
// 64 KiB WRITEs with DCQCN (10-15 ms of virtual time), on the plain
// switch (analytic ports: the fabric's features off) and with a shared
// buffer and PFC (scheduled ports, one more event per frame and hop).
//
//	go test -run '^$' -bench SimSpeed -benchtime 1x ./sim/perf
func BenchmarkSimSpeed(b *testing.B) {
	p := mustProfile(b, "cx6")
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"qps=1/64KiB/bytes", Spec{Test: WriteBW, Size: 65536, QPs: 1, Iters: 20000, Warmup: 100}},
		{"qps=1/64KiB/metadata", Spec{Test: WriteBW, Size: 65536, QPs: 1, Iters: 20000, Warmup: 100, Metadata: true}},
		{"qps=1/bytes", Spec{Test: WriteBW, Size: 64, QPs: 1, Iters: 200000, Warmup: 1000}},
		{"qps=1/metadata", Spec{Test: WriteBW, Size: 64, QPs: 1, Iters: 200000, Warmup: 1000, Metadata: true}},
		{"qps=4096/bytes", Spec{Test: WriteBW, Size: 64, QPs: 4096, Iters: 100, Warmup: 10, TxDepth: 16, Threads: 16}},
		{"qps=4096/metadata", Spec{Test: WriteBW, Size: 64, QPs: 4096, Iters: 100, Warmup: 10, TxDepth: 16, Threads: 16, Metadata: true}},
	} {
		b.Run(tc.name, func(b *testing.B) { simSpeed(b, p, tc.spec) })
	}
	incast := Spec{Test: WriteBW, Size: 65536, Pairs: 8, Incast: true, Iters: 240, Metadata: true, TrafficClass: 104}
	off := *p
	off.DCQCN.Enabled = true
	b.Run("incast8/dcqcn/fabric=off", func(b *testing.B) { simSpeed(b, &off, incast) })
	on := off
	on.Switch.SharedBufferBytes = 2 << 20
	on.Switch.PFC = true
	b.Run("incast8/dcqcn/fabric=shared+pfc", func(b *testing.B) { simSpeed(b, &on, incast) })
}

// simSpeed runs spec b.N times, reporting simulated packets and
// operations per wall-clock second, and the virtual time simulated.
func simSpeed(b *testing.B, p *profile.HardwareProfile, spec Spec) {
	var pkts, ops uint64
	var wall time.Duration
	var virtual sim.Time
	for range b.N {
		start := time.Now()
		res, err := Run(p, spec)
		if err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		pkts += res.Packets
		ops += uint64(max(spec.QPs, 1) * max(spec.Pairs, 1) * spec.Iters)
		virtual += res.Elapsed
	}
	b.ReportMetric(float64(pkts)/wall.Seconds()/1e6, "Mpkts/s")
	// Operations (work requests completed, warm-up included) per
	// second: the packets per operation depend on how the model
	// coalesces ACKs, the operations do not.
	b.ReportMetric(float64(ops)/wall.Seconds()/1e6, "Mops/s")
	b.ReportMetric(float64(virtual)/1e6/float64(b.N), "virtual-ms")
}
