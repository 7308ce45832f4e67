package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/timing"
)

func TestOverrides(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		check      func(p *profile.HardwareProfile) bool
	}{
		{"caches.qpc.entries", "100", func(p *profile.HardwareProfile) bool { return p.Caches.QPC.Capacity() == 100*256 }},
		{"caches.qpc.capacity_bytes", "32768", func(p *profile.HardwareProfile) bool { return p.Caches.QPC.Capacity() == 32768 }},
		{"link.rate_gbps", "200", func(p *profile.HardwareProfile) bool { return p.Link.RateGbps == 200 }},
		{"link.rate_gbps", "25.5", func(p *profile.HardwareProfile) bool { return p.Link.RateGbps == 25.5 }},
		{"link.vlan", "true", func(p *profile.HardwareProfile) bool { return p.Link.VLAN }},
		{"name", "mine", func(p *profile.HardwareProfile) bool { return p.Name == "mine" }},
		{"description", `"quoted, text"`, func(p *profile.HardwareProfile) bool { return p.Description == "quoted, text" }},
		{"pcie.read_latency", "[{bytes=64, ns=100}, {bytes=128, ns=150}]", func(p *profile.HardwareProfile) bool {
			return len(p.PCIe.ReadLatency) == 2 && p.PCIe.ReadLatency[1] == timing.Point{Bytes: 128, Ns: 150}
		}},
	} {
		p, err := LoadProfile("cx6", Override{tc.key, tc.value})
		if err != nil {
			t.Errorf("--set %s=%s: %v", tc.key, tc.value, err)
			continue
		}
		if !tc.check(p) {
			t.Errorf("--set %s=%s: not applied: %+v", tc.key, tc.value, p)
		}
		if p.Caches.MTT.Capacity() != 16384*8 {
			t.Errorf("--set %s=%s changed the MTT cache to %d bytes", tc.key, tc.value, p.Caches.MTT.Capacity())
		}
	}
}

func TestOverrideErrors(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       []string // in the error
	}{
		{"caches.qpc.entrys", "100", []string{"--set caches.qpc.entrys=100", `"entrys"`, "[caches.qpc]", "entries, entry_bytes, outstanding_misses, policy, ways"}},
		{"cache.qpc.entries", "100", []string{`"cache"`, "caches, dcqcn, description"}},
		{"caches.qpc", "1", []string{"caches.qpc is a table"}},
		{"link.mtu_bytes.x", "1", []string{"link.mtu_bytes is a parameter"}},
		{"caches.qpc.entries", "1.5", []string{"caches.qpc.entries", "want an integer"}},
		{"caches.qpc.entries", "lots", []string{"caches.qpc.entries", "not a TOML value"}},
		{"link.vlan", "1", []string{"link.vlan", "want a boolean"}},
		{"link.mtu_bytes", "1000", []string{"--set link.mtu_bytes=1000", "link.mtu_bytes: 1000 is not one of"}},
		{"caches.qpc.entries", "-1", []string{"caches.qpc.entries: -1 is below the minimum 0"}},
	} {
		_, err := LoadProfile("cx6", Override{tc.key, tc.value})
		if err == nil {
			t.Errorf("--set %s=%s: accepted", tc.key, tc.value)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--set %s=%s: error %q lacks %q", tc.key, tc.value, err, w)
			}
		}
	}
}

func TestLoadProfileFile(t *testing.T) {
	var b bytes.Buffer
	if err := profile.Show(&b, "hangu"); err != nil {
		t.Fatal(err)
	}
	// A user's file that leaves a parameter out: an override may still
	// set it.
	text := strings.Replace(b.String(), "vlan = false\n", "", 1)
	path := filepath.Join(t.TempDir(), "mine.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadProfile(path)
	if err != nil || p.Name != "hangu" {
		t.Fatalf("LoadProfile(%s) = %v, %v", path, p, err)
	}
	p, err = LoadProfile(path, Override{"link.vlan", "true"}, Override{"engine.units", "3"})
	if err != nil || !p.Link.VLAN || p.Engine.Units != 3 {
		t.Fatalf("LoadProfile(%s) with overrides = %+v, %v", path, p, err)
	}
	if _, err := LoadProfile(filepath.Join(t.TempDir(), "none.toml")); err == nil || !strings.Contains(err.Error(), "cx6") {
		t.Errorf("a missing file: %v; want an error naming the built-in profiles", err)
	}
}

func TestProfileTOMLLoads(t *testing.T) {
	b, err := ProfileTOML("cx6", Override{"caches.qpc.entries", "4096"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Load(bytes.NewReader(b))
	if err != nil || p.Caches.QPC.Entries != 4096 {
		t.Fatalf("Load(ProfileTOML) = %+v, %v", p, err)
	}
}
