package sched

import (
	"errors"
	"fmt"
)

// Mode selects how one level shares service among its queues.
type Mode uint8

const (
	// WRR is weighted round robin by packets: a queue of weight w may send
	// w×BurstLimit packets per round, in turns of at most BurstLimit, so
	// it gets w turns for every turn of a weight-1 queue. Packet sizes do
	// not count; it is the cheap arbiter of simple NICs.
	WRR Mode = iota
	// DWRR is deficit weighted round robin by bytes: a queue of weight w
	// may send Quantum×w bytes per round, so a queue of large packets gets
	// no more bandwidth than a queue of small ones.
	DWRR
)

var modeNames = [...]string{WRR: "WRR", DWRR: "DWRR"}

// String returns the mode's name, for logs and errors.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Limits of the model. They bound every credit so that deficits fit in 32
// bits (per-queue state stays 16 bytes) and no arithmetic can overflow.
const (
	// MaxLevels is the number of strict-priority levels supported:
	// InfiniBand has 16 service levels (RoCE maps 8 priorities onto them).
	MaxLevels = 16
	// MaxWeight is the largest queue weight.
	MaxWeight = 1024
	// MaxQuantum is the largest DWRR quantum in bytes (above any MTU).
	MaxQuantum = 1 << 16
	// MaxBurstLimit is the largest burst limit in packets.
	MaxBurstLimit = 1 << 16
	// MaxQueues bounds queue indices: one per possible 24-bit QPN.
	MaxQueues = 1 << 24
	// DefaultBurstLimit is the burst limit when Config.BurstLimit is 0.
	DefaultBurstLimit = 16
	// NoByteLimit is Grant.Bytes in WRR mode, where turns are limited by
	// packets only. It exceeds any DWRR deficit, and adding a frame's
	// length to it cannot overflow an int32.
	NoByteLimit = 1 << 30
)

// ErrInvalid is wrapped by every error about a bad argument, so callers can
// test with errors.Is; the message names the field.
var ErrInvalid = errors.New("sched: invalid argument")

// Config sets up an Arbiter.
type Config struct {
	// Levels is the number of strict-priority levels (traffic classes);
	// level 0 is the highest priority. 1..MaxLevels.
	Levels int
	// Mode is WRR or DWRR; it applies to every level.
	Mode Mode
	// Quantum is, in DWRR, the bytes added to a queue's deficit per round
	// per unit of weight: 1..MaxQuantum. Make it at least the path MTU so
	// that every turn can send a packet; smaller values work, but a queue
	// that overshot may then sit out whole rounds. Ignored in WRR (0 is
	// accepted there).
	Quantum int
	// BurstLimit is the most packets one queue may send in one turn;
	// 0 means DefaultBurstLimit.
	BurstLimit int
	// Queues is how many queue slots to allocate up front, so that indices
	// below it never allocate; higher indices grow the table on first use.
	Queues int
}

// check validates c and fills in defaults.
func (c Config) check() (Config, error) {
	switch {
	case c.Levels < 1 || c.Levels > MaxLevels:
		return c, fmt.Errorf("%w: Config.Levels = %d, want 1..%d", ErrInvalid, c.Levels, MaxLevels)
	case c.Mode != WRR && c.Mode != DWRR:
		return c, fmt.Errorf("%w: Config.Mode = %v, want WRR or DWRR", ErrInvalid, c.Mode)
	case c.Mode == DWRR && (c.Quantum < 1 || c.Quantum > MaxQuantum):
		return c, fmt.Errorf("%w: Config.Quantum = %d, want 1..%d in DWRR", ErrInvalid, c.Quantum, MaxQuantum)
	case c.Quantum < 0 || c.Quantum > MaxQuantum:
		return c, fmt.Errorf("%w: Config.Quantum = %d, want 0..%d", ErrInvalid, c.Quantum, MaxQuantum)
	case c.BurstLimit < 0 || c.BurstLimit > MaxBurstLimit:
		return c, fmt.Errorf("%w: Config.BurstLimit = %d, want 0..%d", ErrInvalid, c.BurstLimit, MaxBurstLimit)
	case c.Queues < 0 || c.Queues > MaxQueues:
		return c, fmt.Errorf("%w: Config.Queues = %d, want 0..%d", ErrInvalid, c.Queues, MaxQueues)
	}
	if c.BurstLimit == 0 {
		c.BurstLimit = DefaultBurstLimit
	}
	return c, nil
}
