package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildProvider builds rnic's libibverbs.so.1 into a temporary directory
// (scripts/build-provider.sh), or skips t saying what is missing.
func buildProvider(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("skipped: no C compiler (cc) to build the libibverbs provider; Debian: apt-get install gcc")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		t.Skip("skipped: no <infiniband/verbs.h> to build the provider against; Debian: apt-get install libibverbs-dev")
	}
	dir := t.TempDir()
	out, err := exec.Command("../../scripts/build-provider.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("build-provider.sh: %v\n%s", err, out)
	}
	return dir
}

// TestProviderDevices: Debian's unmodified ibv_devices, loading rnic's
// libibverbs.so.1, lists the running NICs with node GUIDs derived from
// their addresses, as rxe derives them from a MAC.
func TestProviderDevices(t *testing.T) {
	bin, err := exec.LookPath("ibv_devices")
	if err != nil {
		t.Skip("skipped: no ibv_devices; Debian: apt-get install ibverbs-utils")
	}
	lib := buildProvider(t)
	run := t.TempDir()
	t.Setenv("RNIC_RUN_DIR", run)
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	for _, a := range []string{"127.0.0.31", "127.0.0.32"} {
		if out, err := nicCmd(t, "up", "--addr", a); err != nil {
			t.Fatalf("nic up %s: %v\n%s", a, err, out)
		}
	}
	os.WriteFile(filepath.Join(run, "rnic9.sock"), nil, 0o600) // a stale socket: no NIC behind it
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ibv_devices: %v\n%s", err, out)
	}
	want := []string{"rnic0", "00007ffffe00001f", "rnic1", "00007ffffe000020"}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("ibv_devices does not show %s:\n%s", w, out)
		}
	}
	if strings.Contains(string(out), "rnic9") {
		t.Errorf("ibv_devices shows the stale socket's NIC:\n%s", out)
	}
	t.Logf("ibv_devices:\n%s", out)
}
