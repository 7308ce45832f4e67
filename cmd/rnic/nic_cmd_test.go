package main

import (
	"strings"
	"testing"

	"github.com/rnic/rnic/internal/hostif"
)

// nicCmd runs "rnic nic args..." and returns its standard output.
func nicCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := runRnic(t, append([]string{"nic"}, args...)...)
	return out, err
}

// TestNICUpListDown: "rnic nic up" starts NICs in processes of their own
// (rnic0, rnic1, one per address), a program reaches one through its
// socket, "list" shows them, "down" stops them.
func TestNICUpListDown(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RNIC_RUN_DIR", dir)
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	out, err := nicCmd(t, "up", "--addr", "127.0.0.21")
	if err != nil || !strings.HasPrefix(out, "rnic0 127.0.0.21 ") {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	if out, err := nicCmd(t, "up", "--addr", "127.0.0.21"); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Errorf("a second nic up on one address: %v\n%s", err, out)
	}
	if out, err := nicCmd(t, "up", "--addr", "127.0.0.22"); err != nil || !strings.HasPrefix(out, "rnic1 127.0.0.22 ") {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	out, err = nicCmd(t, "list")
	if err != nil || strings.Count(out, " up\n") != 2 || !strings.Contains(out, "rnic0") || !strings.Contains(out, "rnic1") {
		t.Fatalf("nic list: %v\n%s", err, out)
	}
	x, err := hostif.Open(dir + "/rnic0.sock")
	if err != nil {
		t.Fatal(err)
	}
	if x.Name != "rnic0" {
		t.Errorf("the NIC says it is %q", x.Name)
	}
	x.Close()
	if out, err := nicCmd(t, "down", "rnic0"); err != nil || out != "rnic0 stopped\n" {
		t.Fatalf("nic down: %v\n%s", err, out)
	}
	out, _ = nicCmd(t, "list")
	if strings.Contains(out, "rnic0") || !strings.Contains(out, "rnic1") {
		t.Errorf("after nic down rnic0:\n%s", out)
	}
	if _, err := nicCmd(t, "down", "rnic7"); err == nil {
		t.Error("nic down of a NIC that does not exist succeeded")
	}
	if out, err := nicCmd(t, "down", "--all"); err != nil || out != "rnic1 stopped\n" {
		t.Errorf("nic down --all: %v\n%s", err, out)
	}
}
