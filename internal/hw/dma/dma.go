// Package dma is the RNIC's DMA engine cluster: the only place where
// payload bytes move between registered host memory and packet buffers.
//
// A descriptor names host extents (from the ATU: bus addresses, see
// internal/hw/bus) and a contiguous region of a packet buffer; a gather
// descriptor copies host → packet (requester payload, READ responses), a
// scatter descriptor copies packet → host (responder writes, receive
// buffers, READ response data). The engines reach host memory only through
// the cluster's bus, one call per descriptor; each byte is copied exactly
// once per side.
//
// In real time the descriptor executes synchronously on the calling
// engine's goroutine; the engine index only selects whose counters (and,
// in the timing model, whose queue) it goes to. Descriptors of one QP go to
// one engine, so a QP's DMA writes stay ordered as on hardware.
//
// Atomics (compare-and-swap, fetch-and-add) run in the cluster's atomic
// unit under one lock: they are atomic with respect to every other atomic
// this NIC executes (IBV_ATOMIC_HCA), not with respect to host CPU
// accesses, exactly the guarantee of a PCIe RNIC without PCIe atomics.
package dma

import (
	"fmt"
	"sync"

	"github.com/rnic/rnic/internal/hw/bus"
)

// Seg is a run of host memory (from the ATU).
type Seg = bus.Extent

// Stats counts the work of the cluster.
type Stats struct {
	Descriptors uint64 // gather + scatter descriptors executed
	Bytes       uint64 // payload bytes moved
	Atomics     uint64
	Faults      uint64 // descriptors whose host access the bus failed
	PerEngine   []EngineStats
}

// EngineStats counts the work of one engine.
type EngineStats struct {
	Descriptors uint64
	Bytes       uint64
}

type engine struct {
	descs uint64
	bytes uint64
}

// Cluster is a pool of DMA engines. Gather, Scatter and Stats must be
// serialized by the caller (the NIC engine's lock: on hardware one
// protocol engine owns its descriptor queues). Atomic is safe for
// concurrent use. The counters are plain on purpose: an atomic add after
// a 4 KiB copy is a full fence that waits for the copy's stores.
type Cluster struct {
	host     bus.Bus
	engines  []engine
	atomicMu sync.Mutex
	atomics  uint64
	faults   uint64 // descriptors the bus failed
}

// New returns a cluster of n engines on the host bus.
func New(n int, host bus.Bus) (*Cluster, error) {
	if n < 1 || n > 1024 {
		return nil, fmt.Errorf("dma: %d engines out of range [1, 1024]", n)
	}
	if host == nil {
		return nil, fmt.Errorf("dma: no host bus")
	}
	return &Cluster{host: host, engines: make([]engine, n)}, nil
}

// Engines returns the number of engines.
func (c *Cluster) Engines() int { return len(c.engines) }

func (c *Cluster) engine(ch uint32) *engine { return &c.engines[ch%uint32(len(c.engines))] }

// Gather copies the host extents, in order, into dst and returns the
// number of bytes copied (the smaller of len(dst) and the extents' total),
// or the bus's error (the memory could not be read).
func (c *Cluster) Gather(ch uint32, dst []byte, segs []Seg) (int, error) {
	n, err := c.host.Gather(dst, segs)
	c.account(ch, n, err)
	return n, err
}

// Lend returns the host memory behind segs, when it is one extent of
// the program's own memory, and its lender, for a frame sent by
// reference (the receiving NIC's DMA engine copies the bytes; this one
// moves none). It reports false otherwise: the caller gathers.
func (c *Cluster) Lend(segs []Seg) ([]byte, *bus.Loan, bool) {
	if len(segs) != 1 {
		return nil, nil, false
	}
	l, ok := c.host.(*bus.Local)
	if !ok {
		return nil, nil, false // another bus, or a wrapper that injects faults
	}
	return l.Lend(segs[0])
}

// Vectored reports whether the host memory gathers into and scatters
// from several buffers with one access (bus.VectorGatherer and
// bus.VectorScatterer): GatherV and ScatterV are then worth calling.
func (c *Cluster) Vectored() bool {
	if v, ok := c.host.(interface{ Vectored() bool }); ok {
		return v.Vectored() // a wrapper (bus.Faulty) says for the bus under it
	}
	_, g := c.host.(bus.VectorGatherer)
	_, s := c.host.(bus.VectorScatterer)
	return g && s
}

// GatherV copies the host extents, in order, into the buffers of dsts in
// turn, with one access where the bus can (Vectored), and returns the
// bytes copied; each buffer counts as a descriptor.
func (c *Cluster) GatherV(ch uint32, dsts [][]byte, segs []Seg) (int, error) {
	var n int
	var err error
	if v, ok := c.host.(bus.VectorGatherer); ok {
		n, err = v.GatherV(dsts, segs)
	} else {
		n, err = gatherEach(c.host, dsts, segs)
	}
	c.account(ch, n, err)
	c.engine(ch).descs += uint64(max(len(dsts)-1, 0))
	return n, err
}

// ScatterV copies the buffers of srcs in turn across the host extents,
// in order, with one access where the bus can (Vectored: the packets of
// a burst received), and returns the number of bytes copied, or the
// bus's error.
func (c *Cluster) ScatterV(ch uint32, segs []Seg, srcs [][]byte) (int, error) {
	var n int
	var err error
	if v, ok := c.host.(bus.VectorScatterer); ok {
		n, err = v.ScatterV(segs, srcs)
	} else {
		n, err = eachBuffer(c.host.Scatter, srcs, segs)
	}
	c.account(ch, n, err)
	c.engine(ch).descs += uint64(max(len(srcs)-1, 0))
	return n, err
}

// gatherEach is GatherV on a bus without it: a Gather per buffer.
func gatherEach(host bus.Bus, dsts [][]byte, segs []Seg) (int, error) {
	return eachBuffer(func(segs []Seg, b []byte) (int, error) { return host.Gather(b, segs) }, dsts, segs)
}

// eachBuffer moves the buffers in turn with one access each (move),
// each from where the last one ended in the extents.
func eachBuffer(move func([]Seg, []byte) (int, error), bufs [][]byte, segs []Seg) (int, error) {
	rest := append([]Seg(nil), segs...)
	n := 0
	for _, d := range bufs {
		k, err := move(rest, d)
		n += k
		if err != nil || k < len(d) {
			return n, err
		}
		for k > 0 && len(rest) > 0 {
			if int(rest[0].Len) <= k {
				k -= int(rest[0].Len)
				rest = rest[1:]
				continue
			}
			rest[0].Addr += uint64(k)
			rest[0].Len -= uint32(k)
			k = 0
		}
	}
	return n, nil
}

// Scatter copies src across the host extents, in order, and returns the
// number of bytes copied, or the bus's error.
func (c *Cluster) Scatter(ch uint32, segs []Seg, src []byte) (int, error) {
	n, err := c.host.Scatter(segs, src)
	c.account(ch, n, err)
	return n, err
}

func (c *Cluster) account(ch uint32, n int, err error) {
	e := c.engine(ch)
	e.descs++
	e.bytes += uint64(n)
	if err != nil {
		c.faults++
	}
}

// Copy moves bytes that are already on the NIC (inline data that came with
// the WQE) into a packet: an engine's work, but no host access.
func (c *Cluster) Copy(ch uint32, dst, src []byte) int {
	n := copy(dst, src)
	e := c.engine(ch)
	e.descs++
	e.bytes += uint64(n)
	return n
}

// AtomicOp selects the atomic operation.
type AtomicOp = bus.AtomicOp

const (
	CompareSwap = bus.CompareSwap
	FetchAdd    = bus.FetchAdd
	Store       = bus.Store
)

// Atomic executes an 8-byte atomic on host memory (seg, 8 bytes and
// aligned: the ATU checked) and returns the original value, or the bus's
// error. Memory holds the value in the host's byte order, as on hardware.
func (c *Cluster) Atomic(ch uint32, seg Seg, op AtomicOp, compareOrAdd, swap uint64) (uint64, error) {
	c.atomicMu.Lock()
	defer c.atomicMu.Unlock()
	orig, err := c.host.Atomic(seg, op, compareOrAdd, swap)
	c.atomics++
	e := c.engine(ch)
	e.descs++
	e.bytes += 8
	if err != nil {
		c.faults++
	}
	return orig, err
}

// Stats returns the cluster's counters.
func (c *Cluster) Stats() Stats {
	c.atomicMu.Lock()
	defer c.atomicMu.Unlock()
	s := Stats{Atomics: c.atomics, Faults: c.faults, PerEngine: make([]EngineStats, len(c.engines))}
	for i := range c.engines {
		d, b := c.engines[i].descs, c.engines[i].bytes
		s.PerEngine[i] = EngineStats{Descriptors: d, Bytes: b}
		s.Descriptors += d
		s.Bytes += b
	}
	return s
}
