package timing

import (
	"testing"

	"github.com/rnic/rnic/sim"
)

// slowPCIe is a 1 GB/s link (1 byte per ns) with a flat 1000 ns read
// latency, so expectations are easy to compute by hand.
func slowPCIe(t *testing.T, tags int) *PCIe {
	t.Helper()
	cfg := PCIeConfig{
		BytesPerSec:          1e9,
		MaxPayloadBytes:      256,
		MaxReadReqBytes:      512,
		ReadReqOverheadBytes: ReadReqOverheadBytes,
		CplOverheadBytes:     CplOverheadBytes,
		WriteOverheadBytes:   WriteOverheadBytes,
		ReadLatency:          []Point{{Bytes: 1, Ns: 1000}},
		WriteVisibility:      200,
		MMIOLatency:          150,
		MaxReadTags:          tags,
	}
	p, err := NewPCIe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPCIeReadUnloadedFollowsCurve(t *testing.T) {
	for _, n := range []int{1, 16, 64, 256, 1024, 2048, 4096} {
		p, err := NewPCIe(DefaultPCIeConfig())
		if err != nil {
			t.Fatal(err)
		}
		c, _ := NewCurve(PCIeBenchXeonE52630v4)
		const now = 12345
		if got, want := p.Read(now, n)-now, c.Latency(n); got != want {
			t.Errorf("unloaded read of %d B took %v, want the measured %v", n, got, want)
		}
	}
}

func TestPCIeReadBytes(t *testing.T) {
	p, _ := NewPCIe(DefaultPCIeConfig())
	p.Read(0, 64)
	st := p.Stats()
	if st.ToHost.Bytes != 24 || st.ToDevice.Bytes != 64+20 || st.ReadReqTLPs != 1 || st.CplTLPs != 1 {
		t.Fatalf("64 B read: %+v; want 24 B up (1 MRd), 84 B down (1 CplD)", st)
	}
	p.Read(10000, 4096)
	st = p.Stats()
	if st.ToHost.Bytes != 24+8*24 || st.ToDevice.Bytes != 84+4096+16*20 || st.ReadReqTLPs != 9 || st.CplTLPs != 17 {
		t.Fatalf("after a 4 KiB read: %+v; want 8 more MRd and 16 more CplD", st)
	}
	if st.LinkBytes() != st.ToHost.Bytes+st.ToDevice.Bytes {
		t.Fatal("LinkBytes is not the sum of both directions")
	}
}

func TestPCIeReadsQueue(t *testing.T) {
	p := slowPCIe(t, 0)
	// 100 B: 1 request (24 ns up), 1 completion (120 ns down), host part
	// 1000 - 24 - 120 = 856 ns.
	if got := p.Read(0, 100); got != 1000 {
		t.Fatalf("first read done at %v, want 1000ns", got)
	}
	// The second request follows the first upstream ([24, 48)), its
	// completion is ready at 48 + 856 = 904 but the first's occupies
	// [880, 1000).
	if got := p.Read(0, 100); got != 1120 {
		t.Fatalf("second read done at %v, want 1120ns", got)
	}
}

func TestPCIeTagsLimitReads(t *testing.T) {
	p := slowPCIe(t, 1)
	if got := p.Read(0, 100); got != 1000 {
		t.Fatalf("first read done at %v, want 1000ns", got)
	}
	if got := p.Read(0, 100); got != 2000 {
		t.Fatalf("second read (waits for the only tag) done at %v, want 2000ns", got)
	}
	if w := p.Stats().TagWait; w != 1000 {
		t.Fatalf("TagWait = %v, want 1000ns", w)
	}
}

func TestPCIeWriteAndMMIO(t *testing.T) {
	p := slowPCIe(t, 0)
	sent, visible := p.Write(0, 64) // 64 + 24 = 88 B at 1 B/ns
	if sent != 88 || visible != 288 {
		t.Fatalf("write: sent %v visible %v, want 88ns 288ns", sent, visible)
	}
	sent, _ = p.Write(10, 600) // 3 TLPs: 600 + 72 B, after the first
	if sent != 88+672 {
		t.Fatalf("second write sent at %v, want %v", sent, sim.Time(88+672))
	}
	if got := p.MMIO(1000, 8); got != 1150 {
		t.Fatalf("doorbell arrives at %v, want 1150ns (MMIO latency)", got)
	}
	// A read whose completions hold ToDevice delays a doorbell behind it.
	p2 := slowPCIe(t, 0)
	p2.Read(0, 500) // completions: 500 + 2×20 = 540 B, [460, 1000)
	if got := p2.MMIO(400, 64); got != 1088 {
		t.Fatalf("doorbell behind completions arrives at %v, want 1088ns", got)
	}
	st := p.Stats()
	if st.Writes != 2 || st.WriteTLPs != 4 || st.MMIOs != 1 || st.MMIOTLPs != 1 || st.ToHost.Bytes != 88+672 || st.ToDevice.Bytes != 32 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPCIeConfigErrors(t *testing.T) {
	for name, mod := range map[string]func(*PCIeConfig){
		"bandwidth": func(c *PCIeConfig) { c.BytesPerSec = 0 },
		"mps":       func(c *PCIeConfig) { c.MaxPayloadBytes = 300 },
		"mrrs":      func(c *PCIeConfig) { c.MaxReadReqBytes = 64 },
		"overhead":  func(c *PCIeConfig) { c.CplOverheadBytes = -1 },
		"curve":     func(c *PCIeConfig) { c.ReadLatency = nil },
		"tags":      func(c *PCIeConfig) { c.MaxReadTags = -1 },
	} {
		cfg := DefaultPCIeConfig()
		mod(&cfg)
		if _, err := NewPCIe(cfg); err == nil {
			t.Errorf("%s: NewPCIe accepted %+v", name, cfg)
		}
	}
}

func TestPCIeNoAlloc(t *testing.T) {
	p, _ := NewPCIe(DefaultPCIeConfig())
	var now sim.Time
	allocs := testing.AllocsPerRun(1000, func() {
		now += 100
		p.Read(now, 64)
		p.Read(now, 4096)
		p.Write(now, 64)
		p.MMIO(now, 8)
	})
	if allocs != 0 {
		t.Fatalf("PCIe operations allocated %.1f times, want 0", allocs)
	}
}

func BenchmarkPCIeRead(b *testing.B) {
	p, _ := NewPCIe(DefaultPCIeConfig())
	b.ReportAllocs()
	for i := range b.N {
		p.Read(sim.Time(i*20), 256)
	}
}
