package cache

import (
	"errors"
	"fmt"
)

// Config describes the SRAM of one cache, in the units a hardware designer
// sizes it in: bytes of SRAM and bytes per entry.
type Config struct {
	// Name identifies the table cached ("qpc", "mpt", "mtt", "cqc"); it
	// prefixes errors and counter names.
	Name string
	// CapacityBytes is the SRAM size; 0 disables the cache (every lookup
	// misses, nothing is stored).
	CapacityBytes int
	// EntryBytes is the size of one entry in SRAM and of the PCIe read that
	// fetches it on a miss (QPC 256, MPT 64, MTT 8).
	EntryBytes int
	// Ways is the associativity; 0 or >= the number of entries means fully
	// associative.
	Ways int
	// Policy chooses the entry of a full set that a fill evicts; the zero
	// value is LRU.
	Policy Policy
	// Seed seeds Random's generator (0: a constant derived from Name), so
	// that a simulation is reproducible.
	Seed uint64
}

// Policy is a replacement policy.
type Policy uint8

const (
	// LRU evicts the set's least recently used entry (a hit or an update
	// makes an entry the most recent). Under a cyclic scan of one entry
	// more than the set holds it misses every time.
	LRU Policy = iota
	// FIFO evicts the entry filled longest ago; hits do not reorder.
	FIFO
	// Random evicts a pseudo-random entry of the set, as many hardware
	// caches do for want of LRU state: no cliff under cyclic scans.
	Random
	numPolicies
)

var policyNames = [numPolicies]string{LRU: "lru", FIFO: "fifo", Random: "random"}

// String returns the policy's name as profiles write it.
func (p Policy) String() string {
	if p < numPolicies {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy returns the policy named s ("lru", "fifo", "random"; ""
// is LRU).
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return LRU, nil
	}
	for p, name := range policyNames {
		if s == name {
			return Policy(p), nil
		}
	}
	return 0, fmt.Errorf("%w: replacement policy %q (want lru, fifo or random)", ErrConfig, s)
}

// ErrConfig is wrapped by every error New returns for an invalid Config, so
// callers can tell a bad configuration from other failures with errors.Is.
var ErrConfig = errors.New("invalid cache config")

// maxEntries bounds the cache so slot numbers fit the index's 32-bit
// references with room for its power-of-two table of twice the entries.
const maxEntries = 1 << 28

// geometry is the shape of the SRAM derived from a Config.
type geometry struct {
	entries int // sets * ways; 0 when the cache is disabled
	ways    int
	sets    int
}

// geometryOf validates cfg and derives its geometry; errors name the
// offending field.
func geometryOf(cfg Config) (geometry, error) {
	bad := func(format string, args ...any) (geometry, error) {
		return geometry{}, fmt.Errorf("cache %q: %w: %s", cfg.Name, ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case cfg.Name == "":
		return bad("Name is empty")
	case cfg.CapacityBytes < 0:
		return bad("CapacityBytes is negative (%d)", cfg.CapacityBytes)
	case cfg.EntryBytes < 0:
		return bad("EntryBytes is negative (%d)", cfg.EntryBytes)
	case cfg.Ways < 0:
		return bad("Ways is negative (%d)", cfg.Ways)
	case cfg.Policy >= numPolicies:
		return bad("Policy %v is unknown", cfg.Policy)
	case cfg.CapacityBytes == 0:
		return geometry{}, nil
	case cfg.EntryBytes == 0:
		return bad("EntryBytes is 0 with CapacityBytes %d", cfg.CapacityBytes)
	case cfg.CapacityBytes < cfg.EntryBytes:
		return bad("CapacityBytes %d is smaller than one entry (EntryBytes %d)", cfg.CapacityBytes, cfg.EntryBytes)
	case cfg.CapacityBytes/cfg.EntryBytes > maxEntries:
		return bad("CapacityBytes %d holds %d entries, more than %d", cfg.CapacityBytes, cfg.CapacityBytes/cfg.EntryBytes, maxEntries)
	}
	g := geometry{entries: cfg.CapacityBytes / cfg.EntryBytes, ways: cfg.Ways}
	if g.ways == 0 || g.ways > g.entries {
		g.ways = g.entries
	}
	g.sets = g.entries / g.ways
	g.entries = g.sets * g.ways
	return g, nil
}
