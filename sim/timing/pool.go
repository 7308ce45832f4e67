package timing

import (
	"fmt"

	"github.com/rnic/rnic/sim"
)

// Pool is a set of identical FIFO servers fed from one queue, such as the
// RNIC's DMA engines: each request goes to the server that can start it
// earliest, the lowest-numbered one on a tie, so assignment is
// deterministic.
//
// Under load every server is busy and the choice is the one free first:
// the pool keeps its servers in a ring sorted by (free time, number), so
// that choice is the ring's front rather than a scan of every server per
// request (which was 6 % of the simulator's instructions with 4096 QPs
// and 16 processing units). A server's free time only grows, and the one
// just served is usually free last: it leaves the front for the back by
// turning the ring, without moving anything.
type Pool struct {
	servers []FIFO
	free    []sim.Time // servers[i].free, packed for Earliest's scan
	ring    []int32    // server numbers sorted by (free, number) from head
	at      []int32    // at[i]: server i's slot in ring
	head    int        // the slot of the server free first
	tail    int32      // the slot before head: the server free last
}

// NewPool returns a pool of n idle servers; n must be at least 1.
func NewPool(n int) *Pool {
	if n < 1 {
		panic(fmt.Sprintf("timing: pool of %d servers", n))
	}
	p := &Pool{servers: make([]FIFO, n), free: make([]sim.Time, n), ring: make([]int32, n), at: make([]int32, n)}
	for i := range n {
		p.ring[i], p.at[i] = int32(i), int32(i)
	}
	p.tail = int32(n - 1)
	return p
}

// Len returns the number of servers.
func (p *Pool) Len() int { return len(p.servers) }

// slot returns the ring slot k places after the head.
func (p *Pool) slot(k int) int {
	if k += p.head; k >= len(p.ring) {
		k -= len(p.ring)
	}
	return k
}

// first returns the server free first (the lowest-numbered on a tie).
func (p *Pool) first() int { return int(p.ring[p.head]) }

// Earliest returns the server that can start a request arriving at
// arrival soonest, and when. A caller whose service time depends on the
// start (a DMA descriptor that waits on PCIe) computes it and then calls
// ServeOn with the same server.
func (p *Pool) Earliest(arrival sim.Time) (server int, start sim.Time) {
	if p.free[0] <= arrival {
		return 0, arrival // a lightly loaded pool's usual answer
	}
	if f := p.first(); p.free[f] > arrival {
		return f, p.free[f] // every server is busy at arrival
	}
	for i, free := range p.free {
		if free <= arrival {
			return i, arrival // the lowest-numbered server free at arrival
		}
	}
	panic("timing: pool ring out of order")
}

// NextFree returns the earliest time after t at which a server that is
// busy at t becomes free, and false if none is busy at t.
func (p *Pool) NextFree(t sim.Time) (sim.Time, bool) {
	for k := range p.ring {
		if f := p.free[p.ring[p.slot(k)]]; f > t {
			return f, true
		}
	}
	return sim.Never, false
}

// before reports whether server a is free before server b (by number on
// a tie).
func (p *Pool) before(a, b int32) bool {
	return p.free[a] < p.free[b] || p.free[a] == p.free[b] && a < b
}

// reorder puts server s, whose free time has grown, back in its place in
// the ring.
func (p *Pool) reorder(s int32) {
	n := len(p.ring)
	k := int(p.at[s]) - p.head // s's place from the head
	if k < 0 {
		k += n
	}
	if k == 0 {
		// Turn the ring: the head's slot becomes the last place, where
		// the server just served usually belongs.
		p.tail = int32(p.head)
		if p.head++; p.head == n {
			p.head = 0
		}
		k = n - 1
	}
	for k+1 < n { // later than the servers after it: move it back
		next := p.ring[p.slot(k+1)]
		if !p.before(next, s) {
			break
		}
		p.put(k, next)
		k++
	}
	for k > 0 { // after a turn: earlier than the servers before it
		prev := p.ring[p.slot(k-1)]
		if !p.before(s, prev) {
			break
		}
		p.put(k, prev)
		k--
	}
	p.put(k, s)
}

// put places server s k places after the head.
func (p *Pool) put(k int, s int32) {
	i := p.slot(k)
	p.ring[i], p.at[s] = s, int32(i)
}

// ServeOn serves a request on the given server (see FIFO.Serve).
func (p *Pool) ServeOn(server int, arrival, service sim.Time) (start, finish sim.Time) {
	start, finish = p.servers[server].Serve(arrival, service)
	p.free[server] = p.servers[server].free
	// The last in the ring stays last as its free time grows: a lightly
	// loaded pool serves one server again and again.
	if p.at[server] != p.tail {
		p.reorder(int32(server))
	}
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
