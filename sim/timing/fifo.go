package timing

import (
	"fmt"

	"github.com/rnic/rnic/sim"
)

// Stats describe the work of one server.
type Stats struct {
	Jobs    uint64   // requests served
	Busy    sim.Time // total service time
	Wait    sim.Time // total queueing delay (start - arrival)
	MaxWait sim.Time // longest queueing delay
	// OutOfOrder counts requests that arrived before an earlier-queued
	// one (see FIFO).
	OutOfOrder uint64
}

// Utilization returns the fraction of window the server was busy; window
// is the span of simulated time the statistics cover.
func (s Stats) Utilization(window sim.Time) float64 {
	if window <= 0 {
		return 0
	}
	return float64(s.Busy) / float64(window)
}

// MeanWait returns the average queueing delay per job.
func (s Stats) MeanWait() float64 {
	if s.Jobs == 0 {
		return 0
	}
	return float64(s.Wait) / float64(s.Jobs)
}

// FIFO is a single server that serves requests in the order they arrive,
// one at a time: a pipeline stage that takes a fixed or computed time per
// request (the protocol engine's per-packet processing, a doorbell
// queue). The zero value is an idle server.
//
// Requests are served in the order Serve is called. That is arrival
// order when a simulation calls Serve at the current time; a caller that
// passes future arrival times (the end of a DMA) may call out of order,
// and then an earlier arrival waits behind a later one already queued.
// Such calls are counted in Stats.OutOfOrder, so a model can check that
// it does not rely on them.
type FIFO struct {
	free        sim.Time // when the server finishes its current backlog
	lastArrival sim.Time
	st          Stats
	waits       Histogram
}

// Serve queues a request that arrives at arrival and needs service time,
// and returns when its service starts and finishes.
func (f *FIFO) Serve(arrival, service sim.Time) (start, finish sim.Time) {
	if arrival < f.lastArrival {
		f.st.OutOfOrder++
	}
	if service < 0 {
		panic(fmt.Sprintf("timing: negative service time %v", service))
	}
	f.lastArrival = max(f.lastArrival, arrival)
	start = max(arrival, f.free)
	finish = start + service
	f.free = finish
	wait := start - arrival
	f.st.Jobs++
	f.st.Busy += service
	f.st.Wait += wait
	f.st.MaxWait = max(f.st.MaxWait, wait)
	f.waits.Add(int64(wait))
	return start, finish
}

// FreeAt returns when the server finishes the work queued so far.
func (f *FIFO) FreeAt() sim.Time { return f.free }

// Backlog returns how much queued work remains at time now.
func (f *FIFO) Backlog(now sim.Time) sim.Time { return max(f.free-now, 0) }

// Stats returns the server's statistics.
func (f *FIFO) Stats() Stats { return f.st }

// Waits returns the distribution of queueing delays, in nanoseconds.
func (f *FIFO) Waits() *Histogram { return &f.waits }
