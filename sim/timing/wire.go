package timing

import (
	"fmt"
	"math"

	"github.com/rnic/rnic/sim"
)

// Ethernet framing around a RoCEv2 packet (IEEE 802.3). A frame carrier
// in this project starts at the IP header, so everything below IP is
// added here.
const (
	PreambleSFDBytes = 8  // preamble (7) and start-of-frame delimiter (1)
	EthHeaderBytes   = 14 // destination MAC, source MAC, EtherType
	VLANTagBytes     = 4  // 802.1Q tag (priority for PFC), when present
	FCSBytes         = 4  // frame check sequence (CRC-32)
	IFGBytes         = 12 // minimum inter-frame gap
	// MinFrameBytes is the smallest frame from the destination MAC through
	// the FCS; shorter payloads are padded.
	MinFrameBytes = 64
)

// WireBytes returns the bytes an IP packet of ipBytes occupies on the
// wire: preamble, Ethernet header (and VLAN tag), the packet padded to the
// minimum frame, FCS and inter-frame gap. A 1024-byte RoCE packet
// occupies 1062 bytes; a 64-byte one 102.
func WireBytes(ipBytes int, vlan bool) int {
	hdr := EthHeaderBytes
	if vlan {
		hdr += VLANTagBytes
	}
	frame := max(hdr+ipBytes+FCSBytes, MinFrameBytes)
	return PreambleSFDBytes + frame + IFGBytes
}

// WireConfig describes one direction of an Ethernet link.
type WireConfig struct {
	// RateGbps is the line rate in Gb/s (1e9 bits per second).
	RateGbps float64
	// Propagation is the one-way delay of the cable (about 5 ns per metre
	// of fibre or copper).
	Propagation sim.Time
	// VLAN adds an 802.1Q tag to every frame.
	VLAN bool
}

// Wire is one direction of an Ethernet port: frames are serialized one
// after another at line rate, then propagate to the far end. Its clock is
// kept in picoseconds so that back-to-back small frames do not accumulate
// rounding.
type Wire struct {
	cfg    WireConfig
	bps    int64 // bits per second
	freePs int64 // when the transmitter finishes the frames sent so far
	lastAt sim.Time
	st     WireStats
}

// WireStats count a port's transmissions.
type WireStats struct {
	Frames    uint64
	IPBytes   uint64 // bytes from the IP header to the ICRC
	WireBytes uint64 // bytes on the wire, Ethernet overheads included
	BusyPs    int64  // serialization time
	WaitPs    int64  // total time frames waited for the transmitter
}

// NewWire returns an idle port; it fails if the configuration is invalid.
func NewWire(cfg WireConfig) (*Wire, error) {
	bps := cfg.RateGbps * 1e9
	switch {
	case !(cfg.RateGbps > 0) || math.IsInf(cfg.RateGbps, 0) || bps > math.MaxInt64:
		return nil, fmt.Errorf("timing: wire rate %v Gb/s is not a positive finite rate", cfg.RateGbps)
	case cfg.Propagation < 0:
		return nil, fmt.Errorf("timing: wire propagation %v is negative", cfg.Propagation)
	}
	return &Wire{cfg: cfg, bps: int64(math.Round(bps))}, nil
}

// Config returns the port's configuration.
func (w *Wire) Config() WireConfig { return w.cfg }

// SerializationPs returns the time to put an IP packet of ipBytes on the
// wire, overheads included, in picoseconds (rounded up).
func (w *Wire) SerializationPs(ipBytes int) int64 {
	return transferPs(int64(WireBytes(ipBytes, w.cfg.VLAN)), 8, w.bps)
}

// Send transmits an IP packet of ipBytes handed to the port at at, after
// the frames before it. It returns when the last bit leaves the port
// (done) and when it reaches the far end (arrive), both rounded up to the
// nanosecond. Calls must come in non-decreasing at.
func (w *Wire) Send(at sim.Time, ipBytes int) (done, arrive sim.Time) {
	if at < w.lastAt {
		panic(fmt.Sprintf("timing: wire send at %v before previous send at %v", at, w.lastAt))
	}
	w.lastAt = at
	atPs := int64(at) * psPerNs
	start := max(atPs, w.freePs)
	ser := w.SerializationPs(ipBytes)
	w.freePs = start + ser
	w.st.Frames++
	w.st.IPBytes += uint64(ipBytes)
	w.st.WireBytes += uint64(WireBytes(ipBytes, w.cfg.VLAN))
	w.st.BusyPs += ser
	w.st.WaitPs += start - atPs
	done = ceilNs(w.freePs)
	return done, done + w.cfg.Propagation
}

// FreeAt returns when the transmitter finishes the frames sent so far,
// rounded up to the nanosecond.
func (w *Wire) FreeAt() sim.Time { return ceilNs(w.freePs) }

// Stats returns the port's counters.
func (w *Wire) Stats() WireStats { return w.st }
