package rnic

import (
	"time"

	"github.com/rnic/rnic/internal/transport"
)

// DCQCN configures congestion control in the NIC (Options.DCQCN), as
// RoCE NICs run it (Zhu et al., SIGCOMM 2015): RC and UC packets leave
// ECN-capable (ECT(0)); a packet that arrives marked Congestion
// Experienced is answered with a CNP to its sender's QP, at most one per
// QP per CNPInterval; a CNP cuts the QP's rate by alpha/2, and the rate
// recovers on a timer and a byte counter; the NIC paces the QP at its
// rate. Counters np_ecn_marked_roce_packets, np_cnp_sent and
// rp_cnp_handled (device and QP) show it working. Without it (nil), CNPs
// received are counted (rp_cnp_ignored) and ignored, as rxe does.
type DCQCN struct {
	// LineRate is the rate a QP starts at and never exceeds, and MinRate
	// the floor of a cut, in bits per second.
	LineRate, MinRate float64
	// CNPInterval is the least time between two CNPs of one QP (N).
	CNPInterval time.Duration
	// G is the gain of alpha, the estimate of the marked fraction;
	// InitialAlpha its value before the first CNP (1: the first cut
	// halves the rate).
	G, InitialAlpha float64
	// AlphaPeriod is how often alpha decays without CNPs (K).
	AlphaPeriod time.Duration
	// IncreasePeriod (T) and ByteCounter (B, bytes) are the rate-increase
	// events; FastRecovery (F) the number of them that only halve the
	// distance to the target rate before the target grows, by RateAI
	// (additive) or RateHAI (hyper) bits per second.
	IncreasePeriod  time.Duration
	ByteCounter     int
	FastRecovery    int
	RateAI, RateHAI float64
	// ClampTarget sets the target rate to the current rate on every CNP
	// (the paper's equations); false moves it only if the rate rose since
	// the last cut (Mellanox's clamp_tgt_rate=0).
	ClampTarget bool
}

// DefaultDCQCN returns DCQCN for a port of lineRate bits per second with
// the parameters of rnic sim's built-in profiles (dcqcn section): N 50 µs,
// K 55 µs, g 1/256, B 10 MiB, F 5 as the DCQCN paper's simulations are
// configured; the increase timer (55 µs), the AI and HAI steps (40 and 400
// Mb/s) and the floor (100 Mb/s) are estimates.
func DefaultDCQCN(lineRate float64) DCQCN {
	return DCQCN{LineRate: lineRate, MinRate: min(100e6, lineRate), CNPInterval: 50 * time.Microsecond, G: 1.0 / 256,
		InitialAlpha: 1, AlphaPeriod: 55 * time.Microsecond, IncreasePeriod: 55 * time.Microsecond, ByteCounter: 10 << 20,
		FastRecovery: 5, RateAI: 40e6, RateHAI: 400e6}
}

// engine returns the protocol engine's form of d.
func (d *DCQCN) engine() *transport.DCQCN {
	return &transport.DCQCN{CNPInterval: d.CNPInterval.Nanoseconds(), G: d.G, AlphaPeriod: d.AlphaPeriod.Nanoseconds(),
		IncreasePeriod: d.IncreasePeriod.Nanoseconds(), ByteCounter: int64(d.ByteCounter), FastRecovery: d.FastRecovery,
		RateAI: d.RateAI, RateHAI: d.RateHAI, MinRate: d.MinRate, LineRate: d.LineRate, InitialAlpha: d.InitialAlpha,
		ClampTarget: d.ClampTarget}
}
