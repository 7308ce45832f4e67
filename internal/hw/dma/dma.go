// Package dma is the RNIC's DMA engine cluster: the only place where
// payload bytes move between registered host memory and packet buffers.
//
// A descriptor names host segments (from the ATU) and a contiguous region
// of a packet buffer; a gather descriptor copies host → packet (requester
// payload, READ responses), a scatter descriptor copies packet → host
// (responder writes, receive buffers, READ response data). Each byte is
// copied exactly once per side.
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
	"encoding/binary"
	"fmt"
	"sync"
)

// Seg is a run of host memory (from the ATU).
type Seg = []byte

// Stats counts the work of the cluster.
type Stats struct {
	Descriptors uint64 // gather + scatter descriptors executed
	Bytes       uint64 // payload bytes moved
	Atomics     uint64
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
	engines  []engine
	atomicMu sync.Mutex
	atomics  uint64
}

// New returns a cluster of n engines.
func New(n int) (*Cluster, error) {
	if n < 1 || n > 1024 {
		return nil, fmt.Errorf("dma: %d engines out of range [1, 1024]", n)
	}
	return &Cluster{engines: make([]engine, n)}, nil
}

// Engines returns the number of engines.
func (c *Cluster) Engines() int { return len(c.engines) }

func (c *Cluster) engine(ch uint32) *engine { return &c.engines[ch%uint32(len(c.engines))] }

// Gather copies the host segments, in order, into dst and returns the
// number of bytes copied (the smaller of len(dst) and the segments' total).
func (c *Cluster) Gather(ch uint32, dst []byte, segs []Seg) int {
	n := 0
	for _, s := range segs {
		n += copy(dst[n:], s)
		if n == len(dst) {
			break
		}
	}
	e := c.engine(ch)
	e.descs++
	e.bytes += uint64(n)
	return n
}

// Scatter copies src across the host segments, in order, and returns the
// number of bytes copied.
func (c *Cluster) Scatter(ch uint32, segs []Seg, src []byte) int {
	n := 0
	for _, s := range segs {
		n += copy(s, src[n:])
		if n == len(src) {
			break
		}
	}
	e := c.engine(ch)
	e.descs++
	e.bytes += uint64(n)
	return n
}

// AtomicOp selects the atomic operation.
type AtomicOp uint8

const (
	CompareSwap AtomicOp = iota
	FetchAdd
)

// Atomic executes an 8-byte atomic on host memory (seg, which must be
// exactly 8 bytes: the ATU checked the alignment and bounds) and returns the
// original value. Memory holds the value in the host's byte order, as on
// hardware.
func (c *Cluster) Atomic(ch uint32, seg Seg, op AtomicOp, compareOrAdd, swap uint64) uint64 {
	if len(seg) != 8 {
		panic("dma: atomic on a segment that is not 8 bytes")
	}
	c.atomicMu.Lock()
	orig := binary.NativeEndian.Uint64(seg)
	switch op {
	case CompareSwap:
		if orig == compareOrAdd {
			binary.NativeEndian.PutUint64(seg, swap)
		}
	case FetchAdd:
		binary.NativeEndian.PutUint64(seg, orig+compareOrAdd)
	}
	c.atomics++
	e := c.engine(ch)
	e.descs++
	e.bytes += 8
	c.atomicMu.Unlock()
	return orig
}

// Stats returns the cluster's counters.
func (c *Cluster) Stats() Stats {
	c.atomicMu.Lock()
	defer c.atomicMu.Unlock()
	s := Stats{Atomics: c.atomics, PerEngine: make([]EngineStats, len(c.engines))}
	for i := range c.engines {
		d, b := c.engines[i].descs, c.engines[i].bytes
		s.PerEngine[i] = EngineStats{Descriptors: d, Bytes: b}
		s.Descriptors += d
		s.Bytes += b
	}
	return s
}
