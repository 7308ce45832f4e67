package timing

import (
	"fmt"

	"github.com/rnic/rnic/sim"
)

// Pool is a set of identical FIFO servers fed from one queue, such as the
// RNIC's DMA engines: each request goes to the server that can start it
// earliest, the lowest-numbered one on a tie, so assignment is
// deterministic.
type Pool struct {
	servers []FIFO
	free    []sim.Time // servers[i].free, packed for Earliest's scan
}

// NewPool returns a pool of n idle servers; n must be at least 1.
func NewPool(n int) *Pool {
	if n < 1 {
		panic(fmt.Sprintf("timing: pool of %d servers", n))
	}
	return &Pool{servers: make([]FIFO, n), free: make([]sim.Time, n)}
}

// Len returns the number of servers.
func (p *Pool) Len() int { return len(p.servers) }

// Earliest returns the server that can start a request arriving at
// arrival soonest, and when. A caller whose service time depends on the
// start (a DMA descriptor that waits on PCIe) computes it and then calls
// ServeOn with the same server.
func (p *Pool) Earliest(arrival sim.Time) (server int, start sim.Time) {
	start = sim.Never
	for i, free := range p.free {
		s := max(arrival, free)
		if s < start {
			server, start = i, s
			if s == arrival {
				break // cannot start earlier than it arrives
			}
		}
	}
	return server, start
}

// NextFree returns the earliest time after t at which a server that is
// busy at t becomes free, and false if none is busy at t.
func (p *Pool) NextFree(t sim.Time) (sim.Time, bool) {
	next, ok := sim.Never, false
	for _, free := range p.free {
		if free > t && free < next {
			next, ok = free, true
		}
	}
	return next, ok
}

// ServeOn serves a request on the given server (see FIFO.Serve).
func (p *Pool) ServeOn(server int, arrival, service sim.Time) (start, finish sim.Time) {
	start, finish = p.servers[server].Serve(arrival, service)
	p.free[server] = p.servers[server].free
	return start, finish
}

// Serve serves a request on the earliest-free server.
func (p *Pool) Serve(arrival, service sim.Time) (server int, start, finish sim.Time) {
	server, _ = p.Earliest(arrival)
	start, finish = p.ServeOn(server, arrival, service)
	return server, start, finish
}

// Server returns the statistics of one server.
func (p *Pool) Server(i int) Stats { return p.servers[i].Stats() }

// Stats returns the servers' statistics summed (MaxWait is the maximum).
func (p *Pool) Stats() Stats {
	var t Stats
	for i := range p.servers {
		s := p.servers[i].st
		t.Jobs += s.Jobs
		t.Busy += s.Busy
		t.Wait += s.Wait
		t.MaxWait = max(t.MaxWait, s.MaxWait)
		t.OutOfOrder += s.OutOfOrder
	}
	return t
}
