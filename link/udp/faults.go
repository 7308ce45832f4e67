package udp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/mix"
)

// Faults configures seeded loss, so that tests of a NIC over real sockets
// can exercise its recovery as they do over link/mem. The zero value loses
// nothing. Loss applies to frames this link sends, RxLoss to frames it
// receives (after they crossed the kernel, as a lossy wire before the NIC
// would).
//
// Each direction draws from its own math/rand/v2 PCG seeded with (Seed, a
// hash of the link's address, port and direction), once per frame that
// passed the link's checks (a frame dropped as oversize or mismatched
// draws nothing). So the same Seed and the same sequence of frames lose
// the same frames; with several goroutines sending, the sequence is the
// order in which they take the link's fault lock.
type Faults struct {
	Seed   int64
	Loss   float64 // probability that a sent frame is dropped
	RxLoss float64 // probability that a received frame is dropped
}

func (f *Faults) validate() error {
	for _, q := range [...]struct {
		name string
		p    float64
	}{{"Loss", f.Loss}, {"RxLoss", f.RxLoss}} {
		if !(q.p >= 0 && q.p <= 1) { // also rejects NaN
			return fmt.Errorf("udp: Faults.%s = %v, want a probability in [0, 1]", q.name, q.p)
		}
	}
	return nil
}

// lossy draws one direction's loss decisions.
type lossy struct {
	on  atomic.Bool // p > 0: the fast path skips the lock when false
	mu  sync.Mutex
	p   float64
	pcg *rand.PCG
	rng *rand.Rand
}

// reset installs probability p and re-seeds, restarting the sequence.
func (l *lossy) reset(p float64, seed int64, stream uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pcg == nil {
		l.pcg = rand.NewPCG(0, 0)
		l.rng = rand.New(l.pcg)
	}
	l.pcg.Seed(uint64(seed), stream)
	l.p = p
	l.on.Store(p > 0)
}

// drop decides, for each frame whose keep[i] is true, whether it is lost
// (keep[i] becomes false) and returns how many were. It takes the lock
// once per batch.
func (l *lossy) drop(keep []bool) (n uint64) {
	if !l.on.Load() {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range keep {
		if k && l.p > 0 && l.rng.Float64() < l.p {
			keep[i] = false
			n++
		}
	}
	return n
}

// streamSeed hashes the link's address, port and direction into the
// PCG's second seed word, so links and directions sharing a Seed draw
// different sequences.
func streamSeed(a netip.Addr, port uint16, rx bool) uint64 {
	b := a.As16()
	x := binary.BigEndian.Uint64(b[:8]) ^ mix.Mix64(binary.BigEndian.Uint64(b[8:])^uint64(port))
	if rx {
		x = ^x
	}
	return mix.Mix64(x)
}
