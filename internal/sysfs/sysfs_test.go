package sysfs

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The rates the kernel's ports/N/rate shows (drivers/infiniband/core/
// sysfs.c rate_show), for the speeds and widths a RoCE port takes.
func TestRate(t *testing.T) {
	for _, tc := range []struct {
		speed, width uint8
		want         string
	}{
		{1, 1, "2.5 Gb/sec (1X)"},
		{8, 1, "10 Gb/sec (1X FDR10)"},
		{2, 2, "20 Gb/sec (4X DDR)"},
		{32, 1, "25 Gb/sec (1X EDR)"},
		{8, 2, "40 Gb/sec (4X FDR10)"},
		{32, 2, "100 Gb/sec (4X EDR)"},
		{1, 2, "10 Gb/sec (4X)"},
		{4, 8, "120 Gb/sec (12X QDR)"},
		{16, 2, "56 Gb/sec (4X FDR)"},
	} {
		if got := Rate(tc.speed, tc.width); got != tc.want {
			t.Errorf("Rate(%d, %d) = %q, want %q", tc.speed, tc.width, got, tc.want)
		}
	}
}

func TestUverbs(t *testing.T) {
	for name, want := range map[string]int{"rnic0": 0, "rnic12": 12, "rnic": -1, "x7y": -1, "a1234567": -1, "9": 9} {
		if got := Uverbs(name); got != want {
			t.Errorf("Uverbs(%q) = %d, want %d", name, got, want)
		}
	}
}

// tree lists the files and links under dir with their contents or
// targets, as "path: content" lines.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			out = append(out, rel+" -> "+l)
			return nil
		}
		b, _ := os.ReadFile(p)
		out = append(out, rel+": "+strings.TrimSuffix(string(b), "\n"))
		return nil
	})
	sort.Strings(out)
	return out
}

func testDevice() Device {
	d := Device{Name: "rnic3", NodeGUID: [8]byte{0x78, 0x70, 0x9e, 0xff, 0xfe, 0xab, 0x3e, 0x31}, FWVer: "rnic 1.0",
		Socket: "/run/rnic/rnic3.sock", Port: Port{ActiveMTU: 3, ActiveSpeed: 8, ActiveWidth: 1, CapMask: 1 << 26, TableLen: 3,
			Netdev: "veth1"}}
	d.Port.GIDs = []GID{
		{Index: 0, GID: [16]byte{0: 0xfe, 1: 0x80, 8: 0x78, 9: 0x70, 10: 0x9e, 11: 0xff, 12: 0xfe, 13: 0xab, 14: 0x3e, 15: 0x31}, Type: "RoCE v2"},
		{Index: 1, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 1}, Type: "RoCE v2"},
	}
	return d
}

// TestWrite: what a NIC's entries say, file by file, as the kernel
// formats them for an rxe device on veth1 (and its node).
func TestWrite(t *testing.T) {
	root := t.TempDir()
	if err := Write(root, testDevice()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"dev/infiniband/uverbs3 -> /run/rnic/rnic3.sock",
		"sys/class/infiniband/rnic3/device/net/veth1 -> /sys/class/net/veth1",
		"sys/class/infiniband/rnic3/device/numa_node: -1",
		"sys/class/infiniband/rnic3/fw_ver: rnic 1.0",
		"sys/class/infiniband/rnic3/node_desc: rnic rnic3",
		"sys/class/infiniband/rnic3/node_guid: 7870:9eff:feab:3e31",
		"sys/class/infiniband/rnic3/node_type: 1: CA",
		"sys/class/infiniband/rnic3/ports/1/cap_mask: 0x04000000",
		"sys/class/infiniband/rnic3/ports/1/gid_attrs/ndevs/0: veth1",
		"sys/class/infiniband/rnic3/ports/1/gid_attrs/ndevs/1: veth1",
		"sys/class/infiniband/rnic3/ports/1/gid_attrs/types/0: RoCE v2",
		"sys/class/infiniband/rnic3/ports/1/gid_attrs/types/1: RoCE v2",
		"sys/class/infiniband/rnic3/ports/1/gids/0: fe80:0000:0000:0000:7870:9eff:feab:3e31",
		"sys/class/infiniband/rnic3/ports/1/gids/1: 0000:0000:0000:0000:0000:ffff:0a4d:0001",
		"sys/class/infiniband/rnic3/ports/1/gids/2: 0000:0000:0000:0000:0000:0000:0000:0000",
		"sys/class/infiniband/rnic3/ports/1/lid: 0x0",
		"sys/class/infiniband/rnic3/ports/1/lid_mask_count: 0",
		"sys/class/infiniband/rnic3/ports/1/link_layer: Ethernet",
		"sys/class/infiniband/rnic3/ports/1/phys_state: 5: LinkUp",
		"sys/class/infiniband/rnic3/ports/1/pkeys/0: 0xffff",
		"sys/class/infiniband/rnic3/ports/1/rate: 10 Gb/sec (1X FDR10)",
		"sys/class/infiniband/rnic3/ports/1/sm_lid: 0x0",
		"sys/class/infiniband/rnic3/ports/1/sm_sl: 0",
		"sys/class/infiniband/rnic3/ports/1/state: 4: ACTIVE",
		"sys/class/infiniband/rnic3/sys_image_guid: 7870:9eff:feab:3e31",
		"sys/class/infiniband_verbs/abi_version: 6",
		"sys/class/infiniband_verbs/uverbs3/abi_version: 1",
		"sys/class/infiniband_verbs/uverbs3/ibdev: rnic3",
	}
	got := tree(t, root)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the view:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	g, err := ParseGID("fe80:0000:0000:0000:7870:9eff:feab:3e31\n")
	if err != nil || g != testDevice().Port.GIDs[0].GID {
		t.Errorf("ParseGID of gids/0: %x, %v", g, err)
	}
}

// TestWriteReplacesRemovePrune: writing a NIC again replaces its
// entries whole; Remove takes away only that NIC's; Prune those of NICs
// that are not alive; the class's abi_version stays.
func TestWriteReplacesRemovePrune(t *testing.T) {
	root := t.TempDir()
	a, b := testDevice(), testDevice()
	b.Name, b.Socket, b.Port.Netdev = "rnic4", "/run/rnic/rnic4.sock", ""
	for _, d := range []Device{a, b} {
		if err := Write(root, d); err != nil {
			t.Fatal(err)
		}
	}
	a.FWVer, a.Port.Netdev = "rnic 2.0", "eth0"
	if err := Write(root, a); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(tree(t, root), "\n")
	for _, w := range []string{"rnic3/fw_ver: rnic 2.0", "rnic3/device/net/eth0 -> /sys/class/net/eth0", "rnic4/fw_ver: rnic 1.0"} {
		if !strings.Contains(got, w) {
			t.Errorf("after rewriting rnic3, the view lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "veth1") {
		t.Errorf("rewriting rnic3 left its old netdev:\n%s", got)
	}
	if strings.Contains(got, "rnic4/device/net") || strings.Contains(got, "rnic4/ports/1/gid_attrs/ndevs") {
		t.Errorf("a NIC without a netdev names one:\n%s", got)
	}
	Prune(root, func(name string) bool { return name == "rnic4" })
	got = strings.Join(tree(t, root), "\n")
	if strings.Contains(got, "rnic3") || strings.Contains(got, "uverbs3") || !strings.Contains(got, "rnic4/node_type") {
		t.Errorf("Prune of rnic3:\n%s", got)
	}
	if err := Remove(root, "rnic4"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, root); len(got) != 1 || got[0] != "sys/class/infiniband_verbs/abi_version: 6" {
		t.Errorf("after Remove of both: %q", got)
	}
	for _, bad := range []string{"", "a/b", "..", "."} {
		d := testDevice()
		d.Name = bad
		if err := Write(root, d); err == nil {
			t.Errorf("Write of a NIC named %q: no error", bad)
		}
	}
}
