package experiment

import (
	"os"
	"testing"
)

// FuzzParseScenario: whatever a scenario file and an override say, the
// parser, the tenants' keys and the scenario's validation return an error
// or a scenario; none panics.
func FuzzParseScenario(f *testing.F) {
	f.Add([]byte(twoTenants), "tenant.bully.size", "4K")
	for _, name := range []string{"victim-bully", "context-thrash"} {
		if b, err := os.ReadFile("../../examples/scenarios/" + name + ".toml"); err == nil {
			f.Add(b, "tenant.victim.clients", "[3, 4]")
		}
	}
	f.Add([]byte("[[tenant]]\nname = \"a\"\nrate = \"1e308G\"\nclients = [0]\nservers = [1]\n"), "tenant.a.stop", "-1")
	f.Fuzz(func(t *testing.T, text []byte, key, value string) {
		d, err := ParseScenario(text)
		if err != nil {
			return
		}
		for _, ovs := range [][]Override{nil, {{Key: key, Value: value}}} {
			if d.checkSetOK(key) || ovs == nil {
				if sc, err := d.Scenario(ovs, -1); err == nil {
					_ = sc.Validate()
				}
			}
		}
	})
}

// checkSetOK reports whether key is an override the sweep would accept.
func (d *ScenarioDoc) checkSetOK(key string) bool { return d.checkSet(key) == nil }
