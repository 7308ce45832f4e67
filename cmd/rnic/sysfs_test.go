package main

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic/internal/sysfs"
)

// TestSysfsView: a NIC of "rnic nic up" writes its sysfs entries into the
// run directory's view, and a program with librnic-sysfs.so preloaded
// (what rnic exec runs) finds them where the kernel's are — through
// stat, open, opendir, readlink and realpath — with the truth about the
// NIC: its GIDs as ibv_query_gid gives them, its netdev, its node as a
// character device; other paths are untouched. Stopping the NIC takes
// its entries away.
func TestSysfsView(t *testing.T) {
	lib := buildProvider(t)
	upNICs(t, []string{"127.0.0.51", "127.0.0.52"})
	sh := func(t *testing.T, script string) string {
		t.Helper()
		c := exec.Command("/bin/sh", "-c", script)
		c.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib, "LD_PRELOAD="+filepath.Join(lib, "librnic-sysfs.so"))
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tc := range []struct{ script, want string }{
		{"ls /sys/class/infiniband", "rnic0\nrnic1"},
		{"ls /sys/class/infiniband_verbs", "abi_version\nuverbs0\nuverbs1"},
		{"ls /dev/infiniband", "uverbs0\nuverbs1"},
		// The node: a character device of uverbs' major (231), minor 192 + N.
		{"stat -L -c '%F %t:%T' /dev/infiniband/uverbs1", "character special file e7:c1"},
		{"stat -c '%F' /dev/infiniband/uverbs0", "character special file"},
		{"test -c /dev/infiniband/uverbs0 && test -r /dev/infiniband/uverbs0 && test -w /dev/infiniband/uverbs0 && echo yes", "yes"},
		{"cat /sys/class/infiniband/rnic1/ports/1/gids/1", "0000:0000:0000:0000:0000:ffff:7f00:0034"},
		{"cat /sys/class/infiniband/rnic0/ports/1/gid_attrs/types/1 /sys/class/infiniband/rnic0/ports/1/gid_attrs/ndevs/1", "RoCE v2\nlo"},
		{"cat /sys/class/infiniband/rnic0/ports/1/state /sys/class/infiniband/rnic0/ports/1/rate", "4: ACTIVE\n2.5 Gb/sec (1X)"},
		{"cat /sys/class/infiniband_verbs/uverbs1/ibdev", "rnic1"},
		{"ls /sys/class/infiniband/rnic0/device/net", "lo"},
		{"readlink /sys/class/infiniband/rnic0/device/net/lo", "/sys/class/net/lo"},
		{"readlink -f /sys/class/infiniband/rnic0/device/net/lo", "/sys/devices/virtual/net/lo"},
		{"realpath /sys/class/infiniband/rnic1/ports/1/../1/gids", "/sys/class/infiniband/rnic1/ports/1/gids"},
		{"realpath /dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"},
		// Not the view's: as the system has it.
		{"cat /sys/class/net/lo/mtu", "65536"},
		{"test -e /sys/class/infinibandx || echo absent", "absent"},
	} {
		if got := sh(t, tc.script); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.script, got, tc.want)
		}
	}
	// The GIDs of the view are the GIDs the verbs give (ibv_devinfo -v).
	c := exec.Command("ibv_devinfo", "-v", "-d", "rnic0")
	c.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	if out, err := c.CombinedOutput(); err == nil {
		g, _ := sysfs.ParseGID(sh(t, "cat /sys/class/infiniband/rnic0/ports/1/gids/0"))
		if !strings.Contains(string(out), "GID[  0]:\t\t"+ipString(g)+", RoCE v2") {
			t.Errorf("the view's GID 0 %s is not ibv_devinfo's:\n%s", ipString(g), out)
		}
	} else if _, lerr := exec.LookPath("ibv_devinfo"); lerr == nil {
		t.Errorf("ibv_devinfo: %v\n%s", err, out)
	}
	if out, err := nicCmd(t, "down", "--all"); err != nil {
		t.Fatalf("nic down: %v\n%s", err, out)
	}
	if got := sh(t, "ls /sys/class/infiniband /dev/infiniband"); got != "/dev/infiniband:\n\n/sys/class/infiniband:" {
		t.Errorf("after nic down, the view still has:\n%s", got)
	}
}

// ipString formats a GID as ibv_devinfo does (inet_ntop).
func ipString(g [16]byte) string { return netip.AddrFrom16(g).String() }
