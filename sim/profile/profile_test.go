package profile

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestBuiltinsLoadAndRoundTrip(t *testing.T) {
	names := Names()
	if want := []string{"cx6", "cx6-200g", "hangu"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Names() = %v, want %v", names, want)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != name {
				t.Fatalf("profile file %s.toml names itself %q", name, p.Name)
			}
			var buf bytes.Buffer
			if err := p.Save(&buf); err != nil {
				t.Fatal(err)
			}
			q, err := Load(&buf)
			if err != nil {
				t.Fatalf("Load(Save(p)): %v\n%s", err, buf.String())
			}
			if !reflect.DeepEqual(p, q) {
				t.Fatalf("round trip changed the profile:\n%+v\n%+v", p, q)
			}
			// Show writes the commented source, which loads to the same.
			buf.Reset()
			if err := Show(&buf, name); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "# ") {
				t.Fatal("Show lost the comments")
			}
			if r, err := Load(&buf); err != nil || !reflect.DeepEqual(p, r) {
				t.Fatalf("Load(Show) = %v, %v", r, err)
			}
		})
	}
}

func TestHanGuFromIssue(t *testing.T) {
	// The numbers the issue gives for HanGu.
	p, err := Builtin("hangu")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Caches
	if c.QPC.Entries != 100 || c.MPT.Entries != 40000 || c.MTT.Entries != 50000 || c.CQC.Entries != 2000 {
		t.Fatalf("hangu caches %+v", c)
	}
	cfg := p.PCIeConfig()
	if got := cfg.WriteVisibility; got != 250 {
		t.Fatalf("write delay %v, want 250ns", got)
	}
	// DMA read delay 500 ns: the host part of a read is 500 ns once the
	// (size + 32) B serialization is taken out.
	if got := p.PCIe.ReadLatency[0].Ns; got != 502 {
		t.Fatalf("1-byte read %d ns, want 502 (500 + 33 B at 16 GB/s)", got)
	}
}

func TestUnknownProfile(t *testing.T) {
	if _, err := Builtin("cx9"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Builtin(cx9) error %v, want ErrUnknown", err)
	}
	if err := Show(&bytes.Buffer{}, "cx9"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Show(cx9) error %v, want ErrUnknown", err)
	}
}

func TestLoadRejectsUnknownKeys(t *testing.T) {
	var buf bytes.Buffer
	Show(&buf, "cx6")
	src := strings.Replace(buf.String(), "mtu_bytes = 4096", "mtu_bytes = 4096\nmtu_byte = 1024", 1)
	_, err := Load(strings.NewReader(src))
	if err == nil || !strings.Contains(err.Error(), "link.mtu_byte") {
		t.Fatalf("misspelt key: error %v, want one naming link.mtu_byte", err)
	}
}

func TestValidateNamesFields(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(p *HardwareProfile)
	}{
		{"name", func(p *HardwareProfile) { p.Name = "" }},
		{"link.rate_gbps", func(p *HardwareProfile) { p.Link.RateGbps = 0 }},
		{"link.propagation_ns", func(p *HardwareProfile) { p.Link.PropagationNs = -1 }},
		{"link.mtu_bytes", func(p *HardwareProfile) { p.Link.MTUBytes = 1500 }},
		{"pcie.gen", func(p *HardwareProfile) { p.PCIe.Gen = 9 }},
		{"pcie.lanes", func(p *HardwareProfile) { p.PCIe.Lanes = 3 }},
		{"pcie.bandwidth_gbytes_per_s", func(p *HardwareProfile) { p.PCIe.BandwidthGBytesPerS = -1 }},
		{"pcie.max_payload_bytes", func(p *HardwareProfile) { p.PCIe.MaxPayloadBytes = 300 }},
		{"pcie.max_read_request_bytes", func(p *HardwareProfile) { p.PCIe.MaxReadRequestBytes = 8192 }},
		{"pcie.completion_overhead_bytes", func(p *HardwareProfile) { p.PCIe.CompletionOverheadBytes = -20 }},
		{"pcie.read_latency", func(p *HardwareProfile) { p.PCIe.ReadLatency[1].Bytes = 1 }},
		{"pcie.mmio_write_ns", func(p *HardwareProfile) { p.PCIe.MMIOWriteNs = -1 }},
		{"caches.mtt.entry_bytes", func(p *HardwareProfile) { p.Caches.MTT.EntryBytes = 0 }},
		{"caches.qpc.ways", func(p *HardwareProfile) { p.Caches.QPC.Ways = -1 }},
		{"caches.qpc.capacity_bytes", func(p *HardwareProfile) { p.Caches.QPC.CapacityBytes, p.Caches.QPC.Entries = 4096, 100 }},
		{"caches.mpt.policy", func(p *HardwareProfile) { p.Caches.MPT.Policy = "mru" }},
		{"caches.utlb", func(p *HardwareProfile) { p.Caches.UTLB = "yes" }},
		{"caches.mtt_pages", func(p *HardwareProfile) { p.Caches.MTTPages = "2M" }},
		{"engine.read_budget_psns", func(p *HardwareProfile) { p.Engine.ReadBudgetPSNs = -2 }},
		{"engine.read_budget_psns", func(p *HardwareProfile) { p.Engine.ReadBudgetPSNs = 1 << 24 }},
		{"dma.engines", func(p *HardwareProfile) { p.DMA.Engines = 0 }},
		{"engine.units", func(p *HardwareProfile) { p.Engine.Units = 0 }},
		{"atomic.units", func(p *HardwareProfile) { p.Atomic.Units = -1 }},
		{"atomic.lock_buckets", func(p *HardwareProfile) { p.Atomic.LockBuckets = -4 }},
		{"atomic.lock_hash", func(p *HardwareProfile) { p.Atomic.LockHash = "crc" }},
		{"atomic.lock_granule_bytes", func(p *HardwareProfile) { p.Atomic.LockGranuleBytes = 12 }},
		{"engine.wqe_by_mmio_max_bytes", func(p *HardwareProfile) { p.Engine.WQEByMMIOMaxBytes = 0 }},
		{"engine.rx_buffer_bytes", func(p *HardwareProfile) { p.Engine.RxBufferBytes = -1 }},
		{"engine.rx_buffer_bytes", func(p *HardwareProfile) { p.Engine.RxBufferBytes = 4096 }}, // < one 4096 B-MTU frame
		{"host.poll_cq_ns", func(p *HardwareProfile) { p.Host.PollCQNs = -5 }},
		{"switch.ecn_max_bytes", func(p *HardwareProfile) { p.Switch.ECNMaxBytes = 1 }},
		{"switch.ecn_max_probability", func(p *HardwareProfile) { p.Switch.ECNMaxProbability = 2 }},
	} {
		p, err := Builtin("cx6")
		if err != nil {
			t.Fatal(err)
		}
		tc.mod(p)
		err = p.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate() = %v, want a FieldError for %s", tc.field, err, tc.field)
		}
	}
}

func TestValidateReportsAll(t *testing.T) {
	p, _ := Builtin("cx6")
	p.Link.RateGbps = -1
	p.DMA.Engines = 0
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), "link.rate_gbps") || !strings.Contains(err.Error(), "dma.engines") {
		t.Fatalf("Validate() = %v, want both problems", err)
	}
}
