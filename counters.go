package rnic

import (
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link"
)

// Counter is one named counter value. Names follow Linux `rdma statistic`
// (mlx5's hardware counters, the IB port counters) where one exists.
type Counter struct {
	Name  string // e.g. "out_of_sequence", "qpc_cache_hit"
	Value uint64 // counts since the device opened
}

// Counters returns the device's counters: the protocol engine's, then the
// hardware pipeline's (caches, DMA, arbiter, ATU), then its link's if
// the link counts (link/udp's, named link_*).
func (d *Device) Counters() []Counter {
	c, p := d.d.Counters()
	out := make([]Counter, 0, len(c)+32)
	for i, v := range c {
		out = append(out, Counter{transport.Counter(i).String(), v})
	}
	add := func(name string, v uint64) { out = append(out, Counter{name, v}) }
	add("mpt_cache_hit", p.MPT.Hits)
	add("mpt_cache_miss", p.MPT.Misses)
	add("mtt_cache_hit", p.MTT.Hits)
	add("mtt_cache_miss", p.MTT.Misses)
	add("qpc_cache_evictions", p.QPC.Evictions)
	add("mtt_cache_evictions", p.MTT.Evictions)
	add("mpt_cache_evictions", p.MPT.Evictions)
	add("atu_translations", p.ATU.Translations)
	add("atu_utlb_hit", p.ATU.UTLBHits)
	var faults uint64
	for _, f := range p.ATU.Faults[1:] {
		faults += f
	}
	add("atu_faults", faults)
	add("dma_descriptors", p.DMA.Descriptors)
	add("dma_bytes", p.DMA.Bytes)
	add("dma_atomics", p.DMA.Atomics)
	add("arbiter_grants", p.Arbiter.Grants)
	add("async_event_drops", p.EventDrops)
	if l, ok := link.Find[link.Counted](d.link); ok {
		l.Counters(add) // the link's own (link/udp: system calls, siblings)
	}
	return out
}

// Counter returns one counter's value by name, and whether it exists.
func (d *Device) Counter(name string) (uint64, bool) {
	for _, c := range d.Counters() {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}
