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
	if err != nil || strings.Count(out, " up\n") != 2 || !strings.Contains(out, "rnic0    127.0.0.21       lo ") || !strings.Contains(out, "rnic1") {
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

// TestNICUpGroup: "rnic nic up" with several addresses runs their NICs
// in one process (what a program that uses two NICs under Yama's
// ptrace_scope 1 needs: it can let one process in); each is a device of
// its own, and they stop together.
func TestNICUpGroup(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RNIC_RUN_DIR", dir)
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	if out, err := nicCmd(t, "up", "--addr", "127.0.0.23", "--addr", "127.0.0.23"); err == nil {
		t.Errorf("nic up with one address twice succeeded:\n%s", out)
	}
	out, err := nicCmd(t, "up", "--addr", "127.0.0.23", "--addr", "127.0.0.24")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "rnic0 127.0.0.23 ") || !strings.HasPrefix(lines[1], "rnic1 127.0.0.24 ") {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	pid := func(line string) string { return strings.Fields(line)[3] } // "(pid N,"
	if pid(lines[0]) != pid(lines[1]) {
		t.Errorf("the NICs of one nic up run in two processes:\n%s", out)
	}
	for _, name := range []string{"rnic0", "rnic1"} {
		x, err := hostif.Open(dir + "/" + name + ".sock")
		if err != nil {
			t.Fatal(err)
		}
		if x.Name != name {
			t.Errorf("%s says it is %q", name, x.Name)
		}
		x.Close()
	}
	out, err = nicCmd(t, "down", "rnic1")
	if err != nil || !strings.Contains(out, "rnic1 stopped\n") || !strings.Contains(out, "rnic0 stopped (it ran in the process of rnic1") {
		t.Fatalf("nic down rnic1: %v\n%s", err, out)
	}
	if out, _ := nicCmd(t, "list"); !strings.HasPrefix(out, "no NICs") {
		t.Errorf("after nic down rnic1:\n%s", out)
	}
}
