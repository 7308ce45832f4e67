package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestExec: "rnic exec" builds its libibverbs.so.1 on first use, starts a
// NIC for the program when none serves the address and stops it after,
// uses the running NICs otherwise, and exits with the program's status.
func TestExec(t *testing.T) {
	if _, err := exec.LookPath("ibv_devices"); err != nil {
		t.Skip("skipped: no ibv_devices; Debian: apt-get install ibverbs-utils")
	}
	buildProvider(t) // skips, saying what is missing, where the provider cannot be built
	t.Setenv("RNIC_RUN_DIR", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Cleanup(func() { nicCmd(t, "down", "--all") })

	out, _, err := runRnic(t, "exec", "--addr", "127.0.0.33", "--", "ibv_devices")
	if err != nil || !strings.Contains(out, "rnic0") || !strings.Contains(out, "00007ffffe000021") {
		t.Fatalf("exec ibv_devices: %v\n%s", err, out)
	}
	if out, _ := nicCmd(t, "list"); !strings.Contains(out, "no NICs") {
		t.Errorf("the NIC exec started outlived the program:\n%s", out)
	}

	if out, err := nicCmd(t, "up", "--addr", "127.0.0.34"); err != nil {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	out, _, err = runRnic(t, "exec", "--addr", "127.0.0.34", "--", "ibv_devices")
	if err != nil || strings.Count(out, "rnic") != 1 || !strings.Contains(out, "00007ffffe000022") {
		t.Fatalf("exec with a NIC running: %v\n%s", err, out)
	}
	if out, _ := nicCmd(t, "list"); !strings.Contains(out, "127.0.0.34") {
		t.Errorf("exec stopped a NIC it did not start:\n%s", out)
	}

	_, _, err = runRnic(t, "exec", "--addr", "127.0.0.34", "--", "sh", "-c", "exit 3")
	var ec *exitCode
	if !errors.As(err, &ec) || ec.code != 3 {
		t.Errorf("exec of a program exiting 3: %v", err)
	}
}
