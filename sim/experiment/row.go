package experiment

import (
	"time"

	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim/perf"
)

// Row is one finished run of a sweep.
type Row struct {
	Point
	// Result is what the run measured; nil if it failed (Err).
	Result *perf.Result
	Err    error
	// Wall is how long the run took on the wall clock.
	Wall time.Duration
}

// spec returns the run's parameters: as run, with perf's defaults filled
// in, or as asked if the run failed.
func (r *Row) spec() *perf.Spec {
	if r.Result != nil {
		return &r.Result.Spec
	}
	return &r.Spec
}

// Failed counts the rows whose run failed.
func Failed(rows []Row) int {
	n := 0
	for i := range rows {
		if rows[i].Err != nil {
			n++
		}
	}
	return n
}

// packets estimates the frames the run's NICs sent, from the first client
// and the first server (perf.Result reports no others): clients and
// servers of one experiment run the same workload.
func (r *Row) packets() float64 {
	res := r.Result
	c := float64(res.Client.Counters[transport.TxPackets])
	s := float64(res.Server.Counters[transport.TxPackets])
	pairs := float64(res.Spec.Pairs)
	if res.Spec.Incast {
		return pairs*c + s
	}
	return pairs * (c + s)
}
