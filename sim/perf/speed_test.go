package perf

import (
	"testing"
	"time"
)

// BenchmarkSimSpeed measures the simulator itself: simulated packets (all
// frames on the wire, both directions) and operations per wall-clock
// second, for 64-byte and 64 KiB RDMA WRITEs on 1 QP and 64-byte ones on
// 4096 QPs, moving real bytes and metadata only.
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
		b.Run(tc.name, func(b *testing.B) {
			var pkts, ops uint64
			var wall time.Duration
			for range b.N {
				start := time.Now()
				res, err := Run(p, tc.spec)
				if err != nil {
					b.Fatal(err)
				}
				wall += time.Since(start)
				pkts += res.Packets
				ops += uint64(tc.spec.QPs * tc.spec.Iters)
			}
			b.ReportMetric(float64(pkts)/wall.Seconds()/1e6, "Mpkts/s")
			// Operations (work requests completed, warm-up included) per
			// second: the packets per operation depend on how the model
			// coalesces ACKs, the operations do not.
			b.ReportMetric(float64(ops)/wall.Seconds()/1e6, "Mops/s")
		})
	}
}
