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
