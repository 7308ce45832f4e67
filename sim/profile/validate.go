package profile

import (
	"errors"
	"fmt"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim/fabric"
	"math"

	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/sim/timing"
	"github.com/rnic/rnic/wire"
)

// FieldError is a problem with one parameter, named by its TOML key path
// ("pcie.max_payload_bytes") so that the user knows which line to fix.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// validator collects every problem rather than stopping at the first, so
// that one run tells the user all they have to fix.
type validator struct{ errs []error }

// maxFrameOverhead is the most a RoCEv2 frame carries besides its payload:
// IPv6, UDP, BTH, RETH and ICRC.
const maxFrameOverhead = wire.IPv6HeaderSize + wire.UDPHeaderSize + wire.BTHSize + wire.RETHSize + wire.ICRCSize

func (v *validator) fail(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) atLeast(field string, got, min int64) {
	if got < min {
		v.fail(field, "%d is below the minimum %d", got, min)
	}
}

func (v *validator) pow2(field string, got, lo, hi int) {
	if got < lo || got > hi || got&(got-1) != 0 {
		v.fail(field, "%d is not a power of two in [%d, %d]", got, lo, hi)
	}
}

func (v *validator) oneOf(field string, got int, allowed ...int) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	v.fail(field, "%d is not one of %v", got, allowed)
}

func finitePositive(x float64) bool { return x > 0 && !math.IsInf(x, 0) }

// Validate checks every parameter and returns all problems found, joined;
// each is a *FieldError naming its field.
func (p *HardwareProfile) Validate() error {
	var v validator
	if p.Name == "" {
		v.fail("name", "is empty")
	}

	if !finitePositive(p.Link.RateGbps) {
		v.fail("link.rate_gbps", "%v is not a positive rate", p.Link.RateGbps)
	}
	v.atLeast("link.propagation_ns", p.Link.PropagationNs, 0)
	v.oneOf("link.mtu_bytes", p.Link.MTUBytes, 256, 512, 1024, 2048, 4096)

	c := &p.PCIe
	if c.Gen < 1 || c.Gen > 6 {
		v.fail("pcie.gen", "%d is not a PCIe generation (1 to 6)", c.Gen)
	}
	v.oneOf("pcie.lanes", c.Lanes, 1, 2, 4, 8, 16, 32)
	if c.BandwidthGBytesPerS < 0 || math.IsInf(c.BandwidthGBytesPerS, 0) || math.IsNaN(c.BandwidthGBytesPerS) {
		v.fail("pcie.bandwidth_gbytes_per_s", "%v is not 0 (derived) or a positive bandwidth", c.BandwidthGBytesPerS)
	}
	v.pow2("pcie.max_payload_bytes", c.MaxPayloadBytes, 128, 4096)
	v.pow2("pcie.max_read_request_bytes", c.MaxReadRequestBytes, 128, 4096)
	v.atLeast("pcie.read_request_overhead_bytes", int64(c.ReadRequestOverheadBytes), 0)
	v.atLeast("pcie.completion_overhead_bytes", int64(c.CompletionOverheadBytes), 0)
	v.atLeast("pcie.write_overhead_bytes", int64(c.WriteOverheadBytes), 0)
	if _, err := timing.NewCurve(c.ReadLatency); err != nil {
		v.fail("pcie.read_latency", "%v", err)
	}
	v.atLeast("pcie.write_visibility_ns", c.WriteVisibilityNs, 0)
	v.atLeast("pcie.mmio_write_ns", c.MMIOWriteNs, 0)
	v.atLeast("pcie.max_outstanding_reads", int64(c.MaxOutstandingReads), 0)

	for _, cc := range []struct {
		name string
		c    Cache
	}{{"qpc", p.Caches.QPC}, {"mpt", p.Caches.MPT}, {"mtt", p.Caches.MTT}, {"cqc", p.Caches.CQC}} {
		f := "caches." + cc.name + "."
		v.atLeast(f+"capacity_bytes", int64(cc.c.CapacityBytes), 0)
		v.atLeast(f+"entries", int64(cc.c.Entries), 0)
		v.atLeast(f+"ways", int64(cc.c.Ways), 0)
		v.atLeast(f+"outstanding_misses", int64(cc.c.OutstandingMisses), 0)
		if c := cc.c; c.CapacityBytes > 0 && c.Entries > 0 && c.CapacityBytes != c.Entries*c.EntryBytes {
			v.fail(f+"capacity_bytes", "%d disagrees with entries %d × entry_bytes %d: give one of the two", c.CapacityBytes, c.Entries, c.EntryBytes)
		}
		if _, err := cache.ParsePolicy(cc.c.Policy); err != nil {
			v.fail(f+"policy", "%q is not a replacement policy (lru, fifo or random)", cc.c.Policy)
		}
		if cc.c.Entries > 0 || cc.c.CapacityBytes > 0 {
			v.atLeast(f+"entry_bytes", int64(cc.c.EntryBytes), 1)
		}
	}

	if u := p.Caches.UTLB; u != "" && u != "on" && u != "off" {
		v.fail("caches.utlb", "%q is neither \"on\" nor \"off\"", u)
	}
	if m := p.Caches.MTTPages; m != "" && m != "best" && m != "fixed" {
		v.fail("caches.mtt_pages", "%q is neither \"best\" nor \"fixed\"", m)
	}

	v.atLeast("dma.engines", int64(p.DMA.Engines), 1)
	v.atLeast("dma.descriptor_overhead_ns", p.DMA.DescriptorOverheadNs, 0)

	e := &p.Engine
	v.atLeast("engine.units", int64(e.Units), 1)
	v.atLeast("engine.misses_in_flight", int64(e.MissesInFlight), 0)
	v.atLeast("engine.wqe_prefetch", int64(e.WQEPrefetch), 0)
	if b := e.ReadBudgetPSNs; b < -1 || b > transport.MaxReadBudget {
		v.fail("engine.read_budget_psns", "%d is not 0 (rnic's default), -1 (no bound) or a budget of 1 to %d packets", b, transport.MaxReadBudget)
	}
	if q := e.ArbiterQuantumBytes; q < 0 || q > sched.MaxQuantum {
		v.fail("engine.arbiter_quantum_bytes", "%d is not 0 (the engine's default) or a quantum of 1 to %d bytes", q, sched.MaxQuantum)
	}
	if e.TxBufferBytes != 0 {
		// It must hold the largest frame, or the arbiter would wait forever.
		v.atLeast("engine.tx_buffer_bytes", int64(e.TxBufferBytes), int64(p.Link.MTUBytes+maxFrameOverhead))
	}
	v.atLeast("engine.tx_packet_ns", e.TxPacketNs, 0)
	v.atLeast("engine.rx_packet_ns", e.RxPacketNs, 0)
	v.atLeast("engine.wqe_bytes", int64(e.WQEBytes), 1)
	v.atLeast("engine.cqe_bytes", int64(e.CQEBytes), 1)
	v.atLeast("engine.doorbell_bytes", int64(e.DoorbellBytes), 1)
	if e.RxBufferBytes != 0 {
		// A buffer that cannot hold the largest frame (the MTU plus IPv6,
		// UDP, BTH, RETH and ICRC) would drop every such frame forever.
		v.atLeast("engine.rx_buffer_bytes", int64(e.RxBufferBytes), int64(p.Link.MTUBytes+maxFrameOverhead))
	}
	if e.WQEByMMIO {
		v.atLeast("engine.wqe_by_mmio_max_bytes", int64(e.WQEByMMIOMaxBytes), 1)
	} else {
		v.atLeast("engine.wqe_by_mmio_max_bytes", int64(e.WQEByMMIOMaxBytes), 0)
	}

	a := &p.Atomic
	v.atLeast("atomic.units", int64(a.Units), 0)
	v.atLeast("atomic.alu_ns", a.ALUNs, 0)
	v.atLeast("atomic.lock_buckets", int64(a.LockBuckets), 0)
	if a.LockHash != "" && a.LockHash != LockHashLowBits && a.LockHash != LockHashMix {
		v.fail("atomic.lock_hash", "%q is not a lock hash (low_bits or mix)", a.LockHash)
	}
	if a.LockGranuleBytes != 0 {
		v.pow2("atomic.lock_granule_bytes", a.LockGranuleBytes, 8, 4096)
	}

	if !knownPreset(p.DCQCN.Preset) {
		v.fail("dcqcn.preset", "%q is not one of %v", p.DCQCN.Preset, DCQCNPresets)
	}
	if d := &p.DCQCN; d.Enabled {
		v.atLeast("dcqcn.cnp_interval_ns", d.CNPIntervalNs, 0)
		v.atLeast("dcqcn.alpha_period_ns", d.AlphaPeriodNs, 1)
		v.atLeast("dcqcn.increase_period_ns", d.IncreasePeriodNs, 0)
		v.atLeast("dcqcn.byte_counter_bytes", d.ByteCounterBytes, 0)
		v.atLeast("dcqcn.fast_recovery", int64(d.FastRecovery), 0)
		if d.CNPTClass < 0 || d.CNPTClass > 255 {
			v.fail("dcqcn.cnp_tclass", "%d is not a traffic class (0 to 255)", d.CNPTClass)
		}
		if !(d.G > 0 && d.G <= 1) {
			v.fail("dcqcn.g", "%v is not in (0, 1]", d.G)
		}
		if !(d.InitialAlpha >= 0 && d.InitialAlpha <= 1) {
			v.fail("dcqcn.initial_alpha", "%v is not in [0, 1]", d.InitialAlpha)
		}
		for _, r := range []struct {
			key string
			v   float64
		}{{"dcqcn.rate_ai_mbps", d.RateAIMbps}, {"dcqcn.rate_hai_mbps", d.RateHAIMbps}, {"dcqcn.min_rate_mbps", d.MinRateMbps}} {
			if !finitePositive(r.v) {
				v.fail(r.key, "%v is not a positive rate", r.v)
			}
		}
		if d.MinRateMbps*1e6 > p.Link.RateGbps*1e9 {
			v.fail("dcqcn.min_rate_mbps", "%v is above the line rate", d.MinRateMbps)
		}
	}

	if p.TIMELY.Enabled {
		if p.DCQCN.Enabled {
			v.fail("timely.enabled", "one congestion control at a time: dcqcn.enabled is set too")
		} else if c := p.TIMELYConfig(); c.Validate() != nil {
			v.fail("timely", "%v", c.Validate())
		}
	}

	v.atLeast("host.post_send_ns", p.Host.PostSendNs, 0)
	v.atLeast("host.poll_cq_ns", p.Host.PollCQNs, 0)

	s := &p.Switch
	v.atLeast("switch.buffer_bytes", int64(s.BufferBytes), 0)
	v.atLeast("switch.latency_ns", s.LatencyNs, 0)
	if s.ECN {
		v.atLeast("switch.ecn_min_bytes", int64(s.ECNMinBytes), 0)
		if s.ECNMaxBytes < s.ECNMinBytes {
			v.fail("switch.ecn_max_bytes", "%d is below ecn_min_bytes %d", s.ECNMaxBytes, s.ECNMinBytes)
		}
		if !(s.ECNMaxProbability > 0 && s.ECNMaxProbability <= 1) {
			v.fail("switch.ecn_max_probability", "%v is not in (0, 1]", s.ECNMaxProbability)
		}
	}

	v.atLeast("switch.shared_buffer_bytes", int64(s.SharedBufferBytes), 0)
	if !(s.EgressAlpha >= 0 && s.EgressAlpha <= 1e6) {
		v.fail("switch.egress_alpha", "%v is not in [0, 1e6]", s.EgressAlpha)
	}
	if s.PFC {
		if s.SharedBufferBytes == 0 {
			v.fail("switch.pfc", "PFC needs shared_buffer_bytes")
		}
		if s.PFCPriority < 0 || s.PFCPriority > 7 {
			v.fail("switch.pfc_priority", "%d is not a priority 0..7", s.PFCPriority)
		}
		if !(s.PFCAlpha > 0 && s.PFCAlpha <= 1e6) {
			v.fail("switch.pfc_alpha", "%v is not positive", s.PFCAlpha)
		}
		v.atLeast("switch.pfc_headroom_bytes", int64(s.PFCHeadroomBytes), 0)
		v.atLeast("switch.pfc_resume_offset_bytes", int64(s.PFCResumeOffsetBytes), 0)
	}
	t := &p.Topology
	switch t.Kind {
	case "", fabric.Star:
	case fabric.LeafSpine:
		v.atLeast("topology.leaves", int64(t.Leaves), 1)
		v.atLeast("topology.spines", int64(t.Spines), 1)
		v.atLeast("topology.hosts_per_leaf", int64(t.HostsPerLeaf), 1)
	case fabric.FatTree:
		if t.K < 2 || t.K%2 != 0 || t.K > 64 {
			v.fail("topology.k", "%d is not an even number in [2, 64]", t.K)
		}
	default:
		v.fail("topology.kind", "%q is not star, leaf-spine or fat-tree", t.Kind)
	}
	if t.UplinkGbps != 0 && !finitePositive(t.UplinkGbps) {
		v.fail("topology.uplink_gbps", "%v is not a positive rate", t.UplinkGbps)
	}
	v.atLeast("topology.uplink_propagation_ns", t.UplinkPropagationNs, 0)

	if len(v.errs) == 0 {
		return nil
	}
	return fmt.Errorf("profile %q: %w", p.Name, errors.Join(v.errs...))
}
