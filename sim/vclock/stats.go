package vclock

import (
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/nicmodel"
)

// The statistics of a NIC in virtual time, for workloads and studies
// that measure the hardware (sim/perf, rnic sim): what the timing model
// knows beyond the verbs' counters (rnic.Device.Counters, which every
// clock has) — the caches' hits and misses, the PCIe link's bytes, the
// processing units' and DMA engines' busy time, where a step's time
// went — and observers of the model's steps, its congestion control and
// its stages, for attributing them to whom they served. Everything here
// is read through a device of the clock; a device of another clock (or
// of the wall clock) has none.

// Stats are one NIC's timing-model statistics since the clock started.
type Stats struct {
	// Cache hits and misses (counts) of the QP context, memory
	// protection (MPT) and translation (MTT) caches.
	QPCHit, QPCMiss, MPTHit, MPTMiss, MTTHit, MTTMiss float64
	// Bytes over the PCIe link each way, and each direction's busy
	// share of the window (0 when no window is given).
	PCIeToHostBytes, PCIeToDeviceBytes uint64
	PCIeUtilToHost, PCIeUtilToDevice   float64
	// Bytes the NIC sent and received on the network.
	NetBytesTx, NetBytesRx int64
	// The processing units' and the DMA engines' busy share of the
	// window, over all of them.
	UnitUtil, DMAUtil float64
	// MissStallNs is the units' time spent waiting for cache misses and
	// WQE fetches; MissParkedNs the reads parked steps waited for, the
	// unit serving others meanwhile (engine.misses_in_flight).
	MissStallNs, MissParkedNs sim.Time
	// WQEs read from host memory, written by MMIO with the doorbell, and
	// found read ahead at their doorbell.
	WQEFetched, WQEByMMIO, WQEPrefetched int
	// The atomic unit's waits: for an atomic ahead on the same address
	// or bucket, and for a free unit.
	AtomicLockWaitNs, AtomicUnitWaitNs sim.Time
	// MergedMisses is the steps that waited for another step's read of
	// their cache entries; MissTableWaitNs the misses' waits for a free
	// entry of their cache's miss table.
	MergedMisses    int
	MissTableWaitNs sim.Time
	// RxDrops is the frames the NIC dropped on arrival (its receive
	// buffer full).
	RxDrops int
	// Counters are the device's counters by name (rnic.Device.Counters:
	// the protocol engine's, as Linux `rdma statistic` names them, then
	// the pipeline's).
	Counters map[string]uint64
}

// ReadStats returns the statistics of d, a device of the clock vc, with
// utilisations over the window from the clock's start to end (none if
// end is 0); false if d is not a device of vc.
func ReadStats(vc *rnic.VirtualClock, d *rnic.Device, end time.Duration) (Stats, bool) {
	n := Model(vc, d)
	if n == nil {
		return Stats{}, false
	}
	var st Stats
	qpc, _ := n.Engine.CacheStats()
	a := n.ATU.Stats()
	ps := n.PCIe().Stats()
	c := n.Costs()
	st.QPCHit, st.QPCMiss = float64(qpc.Hits), float64(qpc.Misses)
	st.MPTHit, st.MPTMiss = float64(a.MPT.Hits), float64(a.MPT.Misses)
	st.MTTHit, st.MTTMiss = float64(a.MTT.Hits), float64(a.MTT.Misses)
	st.PCIeToHostBytes, st.PCIeToDeviceBytes = ps.ToHost.Bytes, ps.ToDevice.Bytes
	if end > 0 {
		window := int64(end) * 1000 // in picoseconds, the link model's unit
		st.PCIeUtilToHost = ps.ToHost.Utilization(window)
		st.PCIeUtilToDevice = ps.ToDevice.Utilization(window)
		u := n.Units()
		st.UnitUtil = float64(u.Stats().Busy) / float64(int64(end)*int64(u.Len()))
		e := n.DMAEngines()
		st.DMAUtil = float64(e.Stats().Busy) / float64(int64(end)*int64(e.Len()))
	}
	st.Counters = map[string]uint64{}
	for _, c := range d.Counters() {
		st.Counters[c.Name] = c.Value
	}
	cnt := n.Engine.Counters()
	st.NetBytesTx, st.NetBytesRx = int64(cnt[transport.TxBytes]), int64(cnt[transport.RxBytes])
	st.MissStallNs, st.MissParkedNs = c.MissStall, c.MissParked
	st.WQEFetched, st.WQEByMMIO, st.WQEPrefetched = c.WQEFetched, c.WQEByMMIO, c.WQEPrefetched
	st.RxDrops = c.RxDrops
	st.AtomicLockWaitNs, st.AtomicUnitWaitNs = c.AtomicLockWait, c.AtomicUnitWait
	st.MergedMisses, st.MissTableWaitNs = c.MergedMisses, c.MissTableWait
	return st, true
}

// Step is what one pipeline step of a NIC (a WQE's packet, a received
// packet, a timer) looked up in the NIC's caches, and for which QP: what
// a study attributes to the tenant or flow that QP belongs to.
type Step struct {
	QP                                           uint32 // the local QP the step worked for
	QPCLookups, QPCMisses, MPTLookups, MPTMisses int
	MTTLookups, MTTMisses                        int
}

// ObserveSteps has f called after each step of d's model (nil stops
// it). The Step is f's only for the call. It reports whether d is a
// device of vc.
func ObserveSteps(vc *rnic.VirtualClock, d *rnic.Device, f func(*Step)) bool {
	n := Model(vc, d)
	if n == nil {
		return false
	}
	if f == nil {
		n.SetStepObserver(nil)
		return true
	}
	var s Step
	n.SetStepObserver(func(b *transport.Bill) {
		s = Step{QP: b.QP, QPCLookups: b.QPCLookups, QPCMisses: b.QPCMisses, MPTLookups: b.MPTLookups,
			MPTMisses: b.MPTMisses, MTTLookups: b.MTTLookups, MTTMisses: b.MTTMisses}
		f(&s)
	})
	return true
}

// ObserveRates has f called each time congestion control (DCQCN,
// TIMELY) changes the sending rate of one of d's QPs, with the virtual
// time and the new rate in bits per second (nil stops it). It reports
// whether d is a device of vc.
func ObserveRates(vc *rnic.VirtualClock, d *rnic.Device, f func(qpn uint32, at time.Duration, bps float64)) bool {
	n := Model(vc, d)
	if n == nil {
		return false
	}
	if f == nil {
		n.Engine.SetRateObserver(nil)
		return true
	}
	n.Engine.SetRateObserver(func(qpn uint32, now int64, bps float64) { f(qpn, time.Duration(now), bps) })
	return true
}

// Trace has f called at each stage the model schedules on d — a
// doorbell, a context or WQE fetch, a DMA, a packet on the wire, a
// completion written — with its virtual time, its name and its QP (nil
// stops it): an operation's life through the NIC, step by step. It
// reports whether d is a device of vc.
func Trace(vc *rnic.VirtualClock, d *rnic.Device, f func(at time.Duration, stage string, qpn uint32)) bool {
	n := Model(vc, d)
	if n == nil {
		return false
	}
	if f == nil {
		n.SetTracer(nil)
		return true
	}
	n.SetTracer(func(at sim.Time, _ *nicmodel.NIC, stage string, qpn uint32) { f(time.Duration(at), stage, qpn) })
	return true
}
