package profile

import (
	"testing"

	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/timing"
)

// TestBuiltinsBuildModels checks that every built-in profile configures
// every model it feeds.
func TestBuiltinsBuildModels(t *testing.T) {
	for _, name := range Names() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := timing.NewPCIe(p.PCIeConfig()); err != nil {
			t.Errorf("%s: PCIe: %v", name, err)
		}
		if _, err := timing.NewWire(p.WireConfig()); err != nil {
			t.Errorf("%s: wire: %v", name, err)
		}
		if _, err := fabric.New(sim.New(1), p.FabricConfig()); err != nil {
			t.Errorf("%s: fabric: %v", name, err)
		}
		for tbl, c := range map[string]Cache{"qpc": p.Caches.QPC, "mpt": p.Caches.MPT, "mtt": p.Caches.MTT, "cqc": p.Caches.CQC} {
			cc, err := cache.New[uint32, int](c.CacheConfig(tbl), func(k uint32) uint64 { return uint64(k) })
			if err != nil {
				t.Errorf("%s: %s cache: %v", name, tbl, err)
				continue
			}
			if got, want := cc.Sets()*max(c.Ways, 1), c.Capacity()/c.EntryBytes; c.Ways > 0 && got != want {
				t.Errorf("%s: %s cache holds %d entries, want %d", name, tbl, got, want)
			}
		}
	}
}

func TestPCIeBandwidth(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int64
	}{
		{"cx6", 31_507_692_308},   // Gen4 x16, derived
		{"hangu", 16_000_000_000}, // 128 Gb/s, explicit
	} {
		p, _ := Builtin(tc.name)
		if got := p.PCIeBytesPerSec(); got != tc.want {
			t.Errorf("%s: %d B/s, want %d", tc.name, got, tc.want)
		}
	}
}

// TestHanGuReadLatency checks the mapping of HanGu's DMA model: a read
// takes 500 ns plus (size + 32) bytes at 16 GB/s.
func TestHanGuReadLatency(t *testing.T) {
	p, _ := Builtin("hangu")
	pcie, err := timing.NewPCIe(p.PCIeConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{64, 256, 4096} {
		now := sim.Time(i) * sim.Microsecond // one at a time: no queueing
		want := sim.Time(500 + (n+32+15)/16) // rounded up
		if got := pcie.Read(now, n) - now; got < want-1 || got > want+1 {
			t.Errorf("read of %d B: %v, HanGu takes %v", n, got, want)
		}
	}
}
