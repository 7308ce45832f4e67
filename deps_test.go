package rnic_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVerbsOnlyDeps: the root package is the verbs API. Importing it
// pulls in neither the simulator (sim/...: the virtual-time driver is
// sim/vclock, which a program imports when it wants virtual time), nor a
// TOML parser (hardware profiles are the simulator's), nor the host
// server (internal/device/host, which serves other processes' verbs on
// a device, and its protocol, internal/hostif).
func TestVerbsOnlyDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: no go command to list the dependencies")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/rnic/rnic").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages:\n%s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/rnic/rnic/sim") || strings.Contains(strings.ToLower(p), "toml") ||
			strings.HasPrefix(p, "github.com/rnic/rnic/internal/device/host") || p == "github.com/rnic/rnic/internal/hostif" {
			t.Errorf("github.com/rnic/rnic imports %s", p)
		}
	}
}

// TestSimulatorUsesPublicAPI: the simulator's workload and experiment
// packages drive the NIC through the verbs API and read it through the
// virtual-time driver's public statistics (sim/vclock): neither imports
// a package of internal/ itself (their tests included).
func TestSimulatorUsesPublicAPI(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: no go command to list the imports")
	}
	for _, pkg := range []string{"github.com/rnic/rnic/sim/perf", "github.com/rnic/rnic/sim/experiment"} {
		out, err := exec.Command(gobin, "list", "-f", "{{join .Imports \"\\n\"}}\n{{join .TestImports \"\\n\"}}\n{{join .XTestImports \"\\n\"}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		imports := strings.Fields(string(out))
		if len(imports) < 3 {
			t.Fatalf("go list listed %d imports of %s:\n%s", len(imports), pkg, out)
		}
		for _, p := range imports {
			if strings.HasPrefix(p, "github.com/rnic/rnic/internal/") {
				t.Errorf("%s imports %s", pkg, p)
			}
		}
	}
}
