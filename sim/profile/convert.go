package profile

import (
	"math"

	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/timing"
)

// DCQCNConfig returns the engine's congestion control, nil when off.
func (p *HardwareProfile) DCQCNConfig() *transport.DCQCN {
	d := &p.DCQCN
	if !d.Enabled {
		return nil
	}
	return &transport.DCQCN{CNPInterval: d.CNPIntervalNs, G: d.G, AlphaPeriod: d.AlphaPeriodNs,
		IncreasePeriod: d.IncreasePeriodNs, ByteCounter: d.ByteCounterBytes, FastRecovery: d.FastRecovery,
		RateAI: d.RateAIMbps * 1e6, RateHAI: d.RateHAIMbps * 1e6, MinRate: d.MinRateMbps * 1e6,
		LineRate: p.Link.RateGbps * 1e9, InitialAlpha: d.InitialAlpha, ClampTarget: d.ClampTarget,
		CNPTrafficClass: uint8(d.CNPTClass)}
}

// TIMELYConfig returns the engine's delay-based congestion control, nil
// when off.
func (p *HardwareProfile) TIMELYConfig() *transport.TIMELY {
	t := &p.TIMELY
	if !t.Enabled {
		return nil
	}
	return &transport.TIMELY{LineRate: p.Link.RateGbps * 1e9, MinRate: t.MinRateMbps * 1e6, Alpha: t.Alpha, Beta: t.Beta,
		Delta: t.DeltaMbps * 1e6, TLow: t.TLowNs, THigh: t.THighNs, MinRTT: t.MinRTTNs, HAIThreshold: t.HAIThreshold}
}

// Hardware sets what the profile describes of the NIC's core in c: its
// caches, DMA engines and arbiter (the limits and the page size stay
// the program's).
func (p *HardwareProfile) Hardware(c *transport.CoreConfig) {
	cs := &p.Caches
	c.QPCCache, c.CQCCache = cs.QPC.CacheConfig("qpc"), cs.CQC.CacheConfig("cqc")
	c.MPTCache, c.MTTCache = cs.MPT.CacheConfig("mpt"), cs.MTT.CacheConfig("mtt")
	c.DMAEngines = max(p.DMA.Engines, 1)
	if q := p.Engine.ArbiterQuantumBytes; q > 0 {
		var def transport.CoreConfig
		def.Defaults()
		c.Arbiter = def.Arbiter // the engine's arbiter, with the profile's quantum
		c.Arbiter.Quantum = q
	}
}

// PCIeBytesPerSec returns the PCIe bandwidth per direction: the explicit
// bandwidth_gbytes_per_s, or the one derived from gen and lanes.
func (p *HardwareProfile) PCIeBytesPerSec() int64 {
	if p.PCIe.BandwidthGBytesPerS > 0 {
		return int64(math.Round(p.PCIe.BandwidthGBytesPerS * 1e9))
	}
	return timing.GenBytesPerSec(p.PCIe.Gen, p.PCIe.Lanes)
}

// PCIeConfig returns the configuration of the PCIe timing model.
func (p *HardwareProfile) PCIeConfig() timing.PCIeConfig {
	c := &p.PCIe
	return timing.PCIeConfig{
		BytesPerSec:          p.PCIeBytesPerSec(),
		MaxPayloadBytes:      c.MaxPayloadBytes,
		MaxReadReqBytes:      c.MaxReadRequestBytes,
		ReadReqOverheadBytes: c.ReadRequestOverheadBytes,
		CplOverheadBytes:     c.CompletionOverheadBytes,
		WriteOverheadBytes:   c.WriteOverheadBytes,
		ReadLatency:          append([]timing.Point(nil), c.ReadLatency...),
		WriteVisibility:      sim.Time(c.WriteVisibilityNs),
		MMIOLatency:          sim.Time(c.MMIOWriteNs),
		MaxReadTags:          c.MaxOutstandingReads,
	}
}

// WireConfig returns the configuration of the NIC's port.
func (p *HardwareProfile) WireConfig() timing.WireConfig {
	return timing.WireConfig{
		RateGbps:    p.Link.RateGbps,
		Propagation: sim.Time(p.Link.PropagationNs),
		VLAN:        p.Link.VLAN,
	}
}

// CacheConfig returns the configuration of the functional cache model
// (internal/hw/cache) for this cache, under the given table name ("qpc").
func (c Cache) CacheConfig(name string) cache.Config {
	return cache.Config{
		Name:          name,
		CapacityBytes: c.Capacity(),
		EntryBytes:    c.EntryBytes,
		Ways:          c.Ways,
		Policy:        policy(c.Policy),
	}
}

// policy returns the replacement policy named s; Validate has refused any
// other name.
func policy(s string) cache.Policy {
	p, _ := cache.ParsePolicy(s)
	return p
}

// FabricConfig returns the configuration of a fabric whose hosts all have
// this profile's link and whose switch is this profile's. The fabric's
// frame limit is left at link.MaxFrame (jumbo frames): the NIC enforces
// its path MTU itself.
func (p *HardwareProfile) FabricConfig() fabric.Config {
	s, t := &p.Switch, &p.Topology
	c := fabric.Config{
		Link: p.WireConfig(),
		Switch: fabric.SwitchConfig{
			BufferBytes: s.BufferBytes,
			Latency:     sim.Time(s.LatencyNs),
			ECN: fabric.ECNConfig{
				Enabled:        s.ECN,
				MinBytes:       s.ECNMinBytes,
				MaxBytes:       s.ECNMaxBytes,
				MaxProbability: s.ECNMaxProbability,
			},
			SharedBufferBytes: s.SharedBufferBytes,
			EgressAlpha:       s.EgressAlpha,
			PriorityQueues:    s.PriorityQueues,
		},
		Topology: fabric.TopologyConfig{
			Kind: t.Kind, Leaves: t.Leaves, Spines: t.Spines, HostsPerLeaf: t.HostsPerLeaf, K: t.K,
		},
	}
	if s.SharedBufferBytes > 0 {
		c.Switch.BufferBytes = 0
	}
	if s.PFC && s.PFCPriority >= 0 && s.PFCPriority < fabric.Priorities {
		c.Switch.PFC = fabric.PFCConfig{Enabled: true, Priorities: 1 << s.PFCPriority, Alpha: s.PFCAlpha,
			HeadroomBytes: s.PFCHeadroomBytes, ResumeOffsetBytes: s.PFCResumeOffsetBytes}
	}
	if t.UplinkGbps > 0 {
		c.Topology.Uplink = timing.WireConfig{RateGbps: t.UplinkGbps, Propagation: sim.Time(t.UplinkPropagationNs), VLAN: p.Link.VLAN}
	}
	return c
}
