package mem

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rnic/rnic/internal/mix"
)

// Faults configures what a port does wrong to the frames it sends, so that
// tests can exercise loss recovery, duplicate and out-of-order detection and
// ICRC checking. The zero value is a perfect wire. Probabilities are in
// [0, 1]; durations are non-negative.
type Faults struct {
	// Seed seeds the port's fault decisions (with the port's address); the
	// same Seed and the same frames give the same decisions.
	Seed int64

	// Loss is the probability that a frame is dropped.
	Loss float64

	// Duplicate is the probability that a frame is delivered twice; the
	// copy comes from link.Buf.Clone and is scheduled right after it.
	Duplicate float64

	// Reorder is the probability that a frame is held back by ReorderDelay
	// beyond its normal delay, so that later frames overtake it.
	Reorder float64

	// ReorderDelay is how long a reordered frame is held; zero means
	// DefaultReorderDelay. A held frame is delivered when its time comes,
	// whether or not other frames follow.
	ReorderDelay time.Duration

	// Corrupt is the probability that one bit of the frame's UDP payload
	// (BTH through ICRC) is flipped, so the receiver's ICRC check catches
	// it. The IP and UDP headers are never touched (see the package doc).
	Corrupt float64

	// MarkCE is the probability that an ECN-capable frame (ECT(0) or
	// ECT(1) in its IP header) is marked Congestion Experienced, as a
	// congested switch's RED queue marks it: the receiver's congestion
	// control answers with a CNP. The ICRC masks the ECN bits; the IPv4
	// header checksum is recomputed.
	MarkCE float64

	// Delay is the one-way delay added to every frame. Zero delivers
	// synchronously inside Send.
	Delay time.Duration

	// Jitter adds a uniform extra delay in [0, Jitter) to every frame.
	Jitter time.Duration
}

// DefaultReorderDelay is the hold time of a reordered frame when
// Faults.ReorderDelay is zero: long enough for a burst of later frames to
// overtake it, short enough not to look like loss to a retransmit timer.
const DefaultReorderDelay = 50 * time.Microsecond

// validate reports the first field out of range.
func (f *Faults) validate() error {
	probs := [...]struct {
		name string
		p    float64
	}{{"Loss", f.Loss}, {"Duplicate", f.Duplicate}, {"Reorder", f.Reorder}, {"Corrupt", f.Corrupt}, {"MarkCE", f.MarkCE}}
	for _, q := range probs {
		if !(q.p >= 0 && q.p <= 1) { // also rejects NaN
			return fmt.Errorf("mem: Faults.%s = %v, want a probability in [0, 1]", q.name, q.p)
		}
	}
	durs := [...]struct {
		name string
		d    time.Duration
	}{{"ReorderDelay", f.ReorderDelay}, {"Delay", f.Delay}, {"Jitter", f.Jitter}}
	for _, q := range durs {
		if q.d < 0 {
			return fmt.Errorf("mem: Faults.%s = %v, want >= 0", q.name, q.d)
		}
	}
	return nil
}

// perfect reports whether f does nothing to frames, so that Send can take
// the lock-free path.
func (f *Faults) perfect() bool {
	return f.Loss == 0 && f.Duplicate == 0 && f.Reorder == 0 && f.Corrupt == 0 && f.MarkCE == 0 &&
		f.Delay == 0 && f.Jitter == 0
}

// injector makes a port's fault decisions. It is guarded by the port's
// egress lock.
type injector struct {
	f   Faults
	pcg *rand.PCG
	rng *rand.Rand
}

// reset installs f and re-seeds from (f.Seed, addr), restarting the
// decision sequence.
func (in *injector) reset(f Faults, addr netip.Addr) {
	if f.ReorderDelay == 0 {
		f.ReorderDelay = DefaultReorderDelay
	}
	in.f = f
	if in.pcg == nil {
		in.pcg = rand.NewPCG(0, 0)
		in.rng = rand.New(in.pcg)
	}
	in.pcg.Seed(uint64(f.Seed), addrSeed(addr))
}

// hit draws once and reports whether an event of probability p happens.
// A zero probability draws nothing, so turning one fault on does not shift
// the decisions of the others until it is used.
func (in *injector) hit(p float64) bool {
	return p > 0 && in.rng.Float64() < p
}

// delay draws a frame's timing: Delay, plus jitter, plus ReorderDelay if
// the frame is reordered.
func (in *injector) delay() (d time.Duration, reordered bool) {
	d = in.f.Delay
	if in.f.Jitter > 0 {
		d += time.Duration(in.rng.Int64N(int64(in.f.Jitter)))
	}
	if in.hit(in.f.Reorder) {
		d += in.f.ReorderDelay
		reordered = true
	}
	return d, reordered
}

// corrupt flips one random bit of frame's UDP payload and reports whether
// it did (a frame without a UDP payload is left alone).
func (in *injector) corrupt(frame []byte) bool {
	off := udpPayload(frame)
	if off < 0 {
		return false
	}
	bit := in.rng.IntN((len(frame) - off) * 8)
	frame[off+bit/8] ^= 1 << (bit % 8)
	return true
}

// addrSeed hashes an address into the PCG's second seed word, so ports
// sharing a Seed still draw different sequences.
func addrSeed(a netip.Addr) uint64 {
	b := a.As16()
	return mix.Mix64(binary.BigEndian.Uint64(b[:8]) ^ mix.Mix64(binary.BigEndian.Uint64(b[8:])))
}
