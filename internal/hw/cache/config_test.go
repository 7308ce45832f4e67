package cache

import (
	"errors"
	"strings"
	"testing"
)

func TestNewGeometry(t *testing.T) {
	tests := []struct {
		name                string
		cfg                 Config
		sets, ways, entries int
		indexed             bool
	}{
		{"qpc 4-way", Config{Name: "qpc", CapacityBytes: 256 * 256, EntryBytes: 256, Ways: 4}, 64, 4, 256, false},
		{"mtt fully associative", Config{Name: "mtt", CapacityBytes: 50000 * 8, EntryBytes: 8, Ways: 0}, 1, 50000, 50000, true},
		{"direct mapped", Config{Name: "mpt", CapacityBytes: 128 * 64, EntryBytes: 64, Ways: 1}, 128, 1, 128, false},
		{"ways above entries is fully associative", Config{Name: "cqc", CapacityBytes: 10 * 64, EntryBytes: 64, Ways: 32}, 1, 10, 10, true},
		{"ways equal to entries", Config{Name: "cqc", CapacityBytes: 16 * 64, EntryBytes: 64, Ways: 16}, 1, 16, 16, true},
		{"small fully associative is scanned", Config{Name: "cqc", CapacityBytes: 8 * 64, EntryBytes: 64, Ways: 0}, 1, 8, 8, false},
		{"widest scanned set", Config{Name: "t", CapacityBytes: 4 * scanWays * 8, EntryBytes: 8, Ways: scanWays}, 4, scanWays, 4 * scanWays, false},
		{"narrowest indexed set", Config{Name: "t", CapacityBytes: 4 * (scanWays + 1) * 8, EntryBytes: 8, Ways: scanWays + 1}, 4, scanWays + 1, 4 * (scanWays + 1), true},
		{"partial set dropped", Config{Name: "t", CapacityBytes: 100 * 8, EntryBytes: 8, Ways: 8}, 12, 8, 96, false},
		{"capacity not a multiple of entry size", Config{Name: "t", CapacityBytes: 1000, EntryBytes: 64, Ways: 4}, 3, 4, 12, false},
		{"disabled", Config{Name: "qpc", CapacityBytes: 0, EntryBytes: 256, Ways: 4}, 0, 0, 0, false},
		{"disabled without entry size", Config{Name: "qpc", CapacityBytes: 0, EntryBytes: 0, Ways: 0}, 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New[uint32, int](tt.cfg, hashIdentity)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if c.Sets() != tt.sets || c.Ways() != tt.ways || c.Entries() != tt.entries || c.indexed != tt.indexed {
				t.Errorf("sets %d ways %d entries %d indexed %v, want %d %d %d %v",
					c.Sets(), c.Ways(), c.Entries(), c.indexed, tt.sets, tt.ways, tt.entries, tt.indexed)
			}
			if st := c.Stats(); st.Capacity != tt.entries || st.Entries != 0 {
				t.Errorf("Stats capacity %d entries %d, want %d 0", st.Capacity, st.Entries, tt.entries)
			}
			if c.Config() != tt.cfg {
				t.Errorf("Config() = %+v, want %+v", c.Config(), tt.cfg)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		nilFn bool
		field string // the error must name it
	}{
		{"empty name", Config{Name: "", CapacityBytes: 1024, EntryBytes: 64, Ways: 4}, false, "Name"},
		{"negative capacity", Config{Name: "qpc", CapacityBytes: -1, EntryBytes: 64, Ways: 4}, false, "CapacityBytes"},
		{"negative entry size", Config{Name: "qpc", CapacityBytes: 1024, EntryBytes: -64, Ways: 4}, false, "EntryBytes"},
		{"negative entry size when disabled", Config{Name: "qpc", CapacityBytes: 0, EntryBytes: -64, Ways: 4}, false, "EntryBytes"},
		{"negative ways", Config{Name: "qpc", CapacityBytes: 1024, EntryBytes: 64, Ways: -1}, false, "Ways"},
		{"zero entry size", Config{Name: "qpc", CapacityBytes: 1024, EntryBytes: 0, Ways: 4}, false, "EntryBytes"},
		{"capacity below one entry", Config{Name: "qpc", CapacityBytes: 100, EntryBytes: 256, Ways: 4}, false, "CapacityBytes"},
		{"too many entries", Config{Name: "mtt", CapacityBytes: maxEntries + 1, EntryBytes: 1, Ways: 0}, false, "CapacityBytes"},
		{"nil hash", Config{Name: "qpc", CapacityBytes: 1024, EntryBytes: 64, Ways: 4}, true, "hash"},
		{"unknown policy", Config{Name: "qpc", CapacityBytes: 1024, EntryBytes: 64, Ways: 4, Policy: numPolicies}, false, "Policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash := hashIdentity
			if tt.nilFn {
				hash = nil
			}
			c, err := New[uint32, int](tt.cfg, hash)
			if err == nil {
				t.Fatalf("New(%+v) = %v, want an error naming %s", tt.cfg, c, tt.field)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), `"`+tt.cfg.Name+`"`) {
				t.Errorf("error %q does not name field %s and cache %q", err, tt.field, tt.cfg.Name)
			}
		})
	}
}
