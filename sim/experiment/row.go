package experiment

import (
	"time"

	"github.com/rnic/rnic/sim/perf"
)

// Row is one finished run of a sweep.
type Row struct {
	Point
	// Result is what the run measured; nil if it failed (Err).
	Result *perf.Result
	Err    error
	// Tenant is the row's tenant in a scenario (nil: a plain run).
	Tenant *perf.Tenant
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
