package timing

import (
	"fmt"
	"math"

	"github.com/rnic/rnic/sim"
)

// PCIeConfig describes the RNIC's PCIe link and the host behind it.
type PCIeConfig struct {
	// BytesPerSec is the bandwidth of each direction at the TLP layer
	// (after line encoding, before TLP framing): for Gen4 x16, 16 GT/s ×
	// 16 lanes × 128/130 / 8 ≈ 31.5e9.
	BytesPerSec int64
	// MaxPayloadBytes (MPS) bounds the data of one write or completion
	// TLP; MaxReadReqBytes (MRRS) the size one read request may ask for.
	MaxPayloadBytes int
	MaxReadReqBytes int
	// Framing bytes per TLP (see ReadReqOverheadBytes and friends).
	ReadReqOverheadBytes int
	CplOverheadBytes     int
	WriteOverheadBytes   int
	// ReadLatency is the unloaded latency of a DMA read by size, from
	// issue to the last completion byte, as measured (pcie-bench).
	ReadLatency []Point
	// WriteVisibility is the time from the last byte of a posted write
	// leaving the device until the host can see it (a CQE it polls).
	WriteVisibility sim.Time
	// MMIOLatency is the unloaded time from a host CPU store to a device
	// register (a doorbell, or a WQE written by MMIO) until the device
	// sees it.
	MMIOLatency sim.Time
	// MaxReadTags bounds the read requests in flight (PCIe tags); 0 means
	// unlimited.
	MaxReadTags int
}

// DefaultPCIeConfig is a PCIe Gen4 x16 link with MPS 256 and MRRS 512,
// pcie-bench framing, and the read latency curve pcie-bench measured on a
// Xeon host (PCIeBenchXeonE52630v4). The visibility and MMIO latencies are
// estimates; see the profiles in sim/profile for their reasoning.
func DefaultPCIeConfig() PCIeConfig {
	return PCIeConfig{
		BytesPerSec:          GenBytesPerSec(4, 16),
		MaxPayloadBytes:      256,
		MaxReadReqBytes:      512,
		ReadReqOverheadBytes: ReadReqOverheadBytes,
		CplOverheadBytes:     CplOverheadBytes,
		WriteOverheadBytes:   WriteOverheadBytes,
		ReadLatency:          PCIeBenchXeonE52630v4,
		WriteVisibility:      227,
		MMIOLatency:          150,
		MaxReadTags:          256,
	}
}

// GenBytesPerSec returns the TLP-layer bandwidth of one direction of a
// PCIe link of generation gen (1-6) and lanes lanes: transfer rate times
// lanes times line-code efficiency (8b/10b for Gen1-2, 128b/130b for
// Gen3-5, 242/256 FLIT for Gen6), over 8 bits. It returns 0 for an unknown
// generation. DLLP traffic (ACK, flow control, about 2-5%) is not
// subtracted.
func GenBytesPerSec(gen, lanes int) int64 {
	var gts, num, den float64
	switch gen {
	case 1:
		gts, num, den = 2.5, 8, 10
	case 2:
		gts, num, den = 5, 8, 10
	case 3:
		gts, num, den = 8, 128, 130
	case 4:
		gts, num, den = 16, 128, 130
	case 5:
		gts, num, den = 32, 128, 130
	case 6:
		gts, num, den = 64, 242, 256
	default:
		return 0
	}
	return int64(math.Round(gts * 1e9 * float64(lanes) * num / den / 8))
}

// PCIe models both directions of the link between the RNIC and host
// memory. Directions are named from the device: ToHost carries read
// requests and posted writes (DMA writes, CQEs), ToDevice carries read
// completions and MMIO writes from the CPU.
//
// A DMA read of n bytes:
//
//  1. takes one read tag per request TLP, waiting for tags to free up
//     when MaxReadTags are in flight (a read needing more tags than exist
//     takes them all);
//  2. sends its request TLPs on ToHost;
//  3. waits the host's fixed latency: the measured unloaded latency of n
//     bytes minus the unloaded serialization of the requests and the
//     completions, which the curve already contains;
//  4. receives its completion TLPs on ToDevice, interleaved with other
//     completions.
//
// Unloaded, a read therefore takes exactly ReadLatency(n); under load it
// also queues for the link in both directions and for tags.
type PCIe struct {
	cfg      PCIeConfig
	curve    Curve
	toHost   *Channel
	toDevice *Channel
	tags     *tagPool // free times of the read tags; nil when unlimited
	st       PCIeStats
}

// PCIeStats count the traffic of a PCIe link.
type PCIeStats struct {
	Reads, Writes, MMIOs                      uint64
	ReadBytes, WriteBytes, MMIOBytes          uint64 // payload
	ReadReqTLPs, CplTLPs, WriteTLPs, MMIOTLPs uint64
	// TagWait is the total time reads waited for a free tag.
	TagWait sim.Time
	// ToHost and ToDevice count bytes on each direction, TLP framing
	// included, and their busy time.
	ToHost, ToDevice ChannelStats
}

// LinkBytes returns the bytes carried in both directions, framing
// included: divided by the network bytes of a workload, the "PCIe bytes
// per network byte" of small messages.
func (s PCIeStats) LinkBytes() uint64 { return s.ToHost.Bytes + s.ToDevice.Bytes }

// NewPCIe returns an idle link; it fails, naming the field, if cfg is
// invalid.
func NewPCIe(cfg PCIeConfig) (*PCIe, error) {
	bad := func(f string, args ...any) (*PCIe, error) {
		return nil, fmt.Errorf("timing: PCIe config: "+f, args...)
	}
	switch {
	case cfg.BytesPerSec <= 0:
		return bad("BytesPerSec %d is not positive", cfg.BytesPerSec)
	case !pow2In(cfg.MaxPayloadBytes, 128, 4096):
		return bad("MaxPayloadBytes %d is not a power of two in [128, 4096]", cfg.MaxPayloadBytes)
	case !pow2In(cfg.MaxReadReqBytes, 128, 4096):
		return bad("MaxReadReqBytes %d is not a power of two in [128, 4096]", cfg.MaxReadReqBytes)
	case cfg.ReadReqOverheadBytes < 0 || cfg.CplOverheadBytes < 0 || cfg.WriteOverheadBytes < 0:
		return bad("TLP overheads (%d, %d, %d) must not be negative",
			cfg.ReadReqOverheadBytes, cfg.CplOverheadBytes, cfg.WriteOverheadBytes)
	case cfg.WriteVisibility < 0:
		return bad("WriteVisibility %v is negative", cfg.WriteVisibility)
	case cfg.MMIOLatency < 0:
		return bad("MMIOLatency %v is negative", cfg.MMIOLatency)
	case cfg.MaxReadTags < 0:
		return bad("MaxReadTags %d is negative", cfg.MaxReadTags)
	}
	curve, err := NewCurve(cfg.ReadLatency)
	if err != nil {
		return bad("ReadLatency: %v", err)
	}
	up, _ := NewChannel(cfg.BytesPerSec)
	down, _ := NewChannel(cfg.BytesPerSec)
	p := &PCIe{cfg: cfg, curve: curve, toHost: up, toDevice: down}
	p.cfg.ReadLatency = curve.Points()
	if cfg.MaxReadTags > 0 {
		p.tags = newTagPool(cfg.MaxReadTags)
	}
	return p, nil
}

func pow2In(v, lo, hi int) bool { return v >= lo && v <= hi && v&(v-1) == 0 }

// Config returns the link's configuration.
func (p *PCIe) Config() PCIeConfig { return p.cfg }

// Read performs a DMA read of n bytes from host memory issued at now and
// returns when its last byte has arrived at the device.
func (p *PCIe) Read(now sim.Time, n int) (done sim.Time) {
	if n <= 0 {
		return now
	}
	reqs, cpls := ReadTLPs(n, p.cfg.MaxReadReqBytes, p.cfg.MaxPayloadBytes)
	issue := now
	k := 0
	if p.tags != nil {
		k = min(reqs, p.tags.size)
		issue = max(issue, p.tags.take(k))
		p.st.TagWait += issue - now
	}
	upBytes := reqs * p.cfg.ReadReqOverheadBytes
	downBytes := n + cpls*p.cfg.CplOverheadBytes
	upPs := p.toHost.TransferPs(upBytes)
	downPs := p.toDevice.TransferPs(downBytes)
	nowPs := int64(now) * psPerNs
	reqDone := p.toHost.Reserve(nowPs, int64(issue)*psPerNs, upPs, upBytes)
	fixed := max(p.curve.Ps(n)-upPs-downPs, 0)
	end := p.toDevice.Reserve(nowPs, reqDone+fixed, downPs, downBytes)
	done = ceilNs(end)
	if k > 0 {
		p.tags.give(k, done)
	}
	p.st.Reads++
	p.st.ReadBytes += uint64(n)
	p.st.ReadReqTLPs += uint64(reqs)
	p.st.CplTLPs += uint64(cpls)
	return done
}

// Write performs a posted DMA write of n bytes to host memory issued at
// now. It returns when the last byte has left the device (sent: the
// device may reuse its buffer) and when the host can see the data
// (visible).
func (p *PCIe) Write(now sim.Time, n int) (sent, visible sim.Time) {
	if n <= 0 {
		return now, now
	}
	tlps := WriteTLPs(n, p.cfg.MaxPayloadBytes)
	bytes := n + tlps*p.cfg.WriteOverheadBytes
	nowPs := int64(now) * psPerNs
	end := p.toHost.Reserve(nowPs, nowPs, p.toHost.TransferPs(bytes), bytes)
	sent = ceilNs(end)
	p.st.Writes++
	p.st.WriteBytes += uint64(n)
	p.st.WriteTLPs += uint64(tlps)
	return sent, sent + p.cfg.WriteVisibility
}

// MMIO performs a CPU write of n bytes to a device register at now (an
// 8-byte doorbell, or a 64-byte WQE written with the doorbell,
// "BlueFlame") and returns when the device sees it: MMIOLatency unloaded,
// later if the ToDevice direction is busy with completions.
func (p *PCIe) MMIO(now sim.Time, n int) (arrive sim.Time) {
	if n <= 0 {
		return now
	}
	tlps := WriteTLPs(n, p.cfg.MaxPayloadBytes)
	bytes := n + tlps*p.cfg.WriteOverheadBytes
	dur := p.toDevice.TransferPs(bytes)
	nowPs := int64(now) * psPerNs
	ready := nowPs + max(int64(p.cfg.MMIOLatency)*psPerNs-dur, 0)
	end := p.toDevice.Reserve(nowPs, ready, dur, bytes)
	p.st.MMIOs++
	p.st.MMIOBytes += uint64(n)
	p.st.MMIOTLPs += uint64(tlps)
	return ceilNs(end)
}

// Stats returns the link's counters.
func (p *PCIe) Stats() PCIeStats {
	st := p.st
	st.ToHost = p.toHost.Stats()
	st.ToDevice = p.toDevice.Stats()
	return st
}
