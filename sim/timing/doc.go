// Package timing models the hardware resources of the RNIC's data path as
// analytic servers: given when a request arrives and how much work it is,
// each returns when the work starts and finishes, and keeps the statistics
// (busy time, queueing delay, bytes) that explain a result.
//
// No events are needed where arithmetic suffices. A FIFO server's finish
// time is max(arrival, free) + service; a link's is its serialization
// clock plus propagation. The simulator (package sim) only has to schedule
// the moments at which something observable happens (a packet arrives, a
// completion is visible), which keeps the event count per packet small.
//
// Resources:
//
//   - FIFO: one server, first come first served (a protocol engine
//     pipeline, a doorbell queue).
//   - Pool: N identical FIFO servers with earliest-free assignment (the DMA
//     engines).
//   - Channel: a serial link whose bandwidth is shared by transfers that
//     interleave at packet granularity (one direction of PCIe).
//   - PCIe: both directions of a PCIe link with TLP framing, a read
//     latency curve set from measured points, read tags, posted writes
//     and MMIO doorbells, with byte accounting including TLP overheads.
//   - Wire: an Ethernet port: serialization at line rate with the
//     per-frame overheads, then propagation.
//
// Sub-nanosecond precision: at 100 Gb/s a byte takes 80 ps and a 64-byte
// TLP on PCIe Gen4 x16 about 2 ns, so the bandwidth servers (Channel, Wire)
// keep their clocks in picoseconds and round only the times they return,
// up to the next nanosecond (a packet is not there until its last bit
// is). Rounding therefore never accumulates.
//
// A FIFO serves in call order and a Wire requires non-decreasing send
// times, which a discrete-event simulation guarantees when it calls them
// at the current time. Channel also accepts transfers whose ready time is
// in the future (PCIe completions come back after the host's latency), and
// fits them into the gaps left by earlier reservations.
package timing

import "github.com/rnic/rnic/sim"

// psPerNs converts between the picosecond clocks of the bandwidth servers
// and sim.Time.
const psPerNs = 1000

// ceilNs rounds a picosecond time up to the next nanosecond.
func ceilNs(ps int64) sim.Time {
	return sim.Time((ps + psPerNs - 1) / psPerNs)
}
