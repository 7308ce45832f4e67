package main

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestFormatStatLine checks rdma statistic's line format.
func TestFormatStatLine(t *testing.T) {
	tests := []struct {
		st   deviceStats
		want string
	}{
		{deviceStats{"rnic_127.0.0.1", []rnic.Counter{{Name: "tx_packets", Value: 12}, {Name: "rx_packets", Value: 10}}}, "link rnic_127.0.0.1/1 tx_packets 12 rx_packets 10"},
		{deviceStats{"rnic_::1", nil}, "link rnic_::1/1"},
	}
	for _, tt := range tests {
		if got := formatStatLine(tt.st); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// openMemDevice opens a device named name on a fresh in-process port.
func openMemDevice(t *testing.T, name string) *rnic.Device {
	t.Helper()
	port, err := mem.NewSwitch().Port(netip.MustParseAddr("10.1.1.1"), mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rnic.Open(rnic.Options{Link: port, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestStatServerRoundTrip serves a device's counters and reads them back
// as rnic stat does, with the device's own values.
func TestStatServerRoundTrip(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dev := openMemDevice(t, "rnic_test0")
	s, err := serveStats(dev)
	if err != nil {
		t.Fatal(err)
	}
	if s.path != filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "rnic", "rnic_test0") {
		t.Errorf("socket at %s", s.path)
	}
	st, err := readStats(s.path)
	if err != nil {
		t.Fatal(err)
	}
	want := dev.Counters()
	if st.name != "rnic_test0" || len(st.counters) != len(want) || st.counters[0] != want[0] {
		t.Errorf("read %s with %d counters, want %d (%v)", st.name, len(st.counters), len(want), st.counters[:1])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.path); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}
	var out, errOut bytes.Buffer
	err = runStat(&out, &errOut, "rnic_test0")
	if err == nil || !strings.Contains(err.Error(), `no running device "rnic_test0"`) {
		t.Errorf("stat of a closed device: %v", err)
	}
}

// TestStatServerStaleAndDuplicate: a socket left by a dead process is
// replaced; a second device of the same name is refused.
func TestStatServerStaleAndDuplicate(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := controlDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A stale socket: bound, then its listener gone without unlinking.
	stale := filepath.Join(dir, "rnic_dup")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	var out, errOut bytes.Buffer
	if err := runStat(&out, &errOut, ""); err != nil || out.Len() != 0 {
		t.Errorf("stat with only a stale socket: %v %q", err, out.String())
	}

	s, err := serveStats(openMemDevice(t, "rnic_dup"))
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer s.Close()
	if _, err := serveStats(openMemDevice(t, "rnic_dup")); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("duplicate device: %v", err)
	}
	out.Reset()
	if err := runStat(&out, &errOut, ""); err != nil || !strings.HasPrefix(out.String(), "link rnic_dup/1 ") {
		t.Errorf("stat: %v %q", err, out.String())
	}
}

// TestReadStatsGarbage: a socket that does not speak the protocol is an
// error, not a hang.
func TestReadStatsGarbage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bogus")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for _, reply := range []string{"hello\n", statMagic + "\ndevice x\ntx_packets many\n", statMagic + "\n"} {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	for _, want := range []string{"not an rnic control socket", "bad counter", "no device name"} {
		if _, err := readStats(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}
