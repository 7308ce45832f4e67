// Package sysfs writes what Linux shows of an RDMA device outside the
// verbs — its directories under /sys/class/infiniband and
// /sys/class/infiniband_verbs and its node under /dev/infiniband — for a
// NIC that serves other processes (rnic nic), into a view directory in
// the run directory. rnic exec's preloaded library (provider/sysfs)
// shows programs that view at those paths, so that the libraries that
// look there before they use a device — UCX, which skips a device whose
// /dev/infiniband node it cannot stat and reads its GID types from
// gid_attrs; rdma-core's tests and scripts, which find the netdev under
// device/net — find rnic's devices described as the kernel describes
// rxe's, with the truth about this NIC: its GID table and types, port
// state, MTU, speed and the netdev it is bound to.
//
// The files are written once, when the NIC starts (nothing in them
// changes while it runs), and removed when it stops; a NIC that was
// killed leaves its files, which the next NIC to start prunes (Prune).
// Only the files programs read are written; docs/verbs.md lists them.
//
// Layout, under the view directory (root):
//
//	sys/class/infiniband/NAME/              node_type, node_guid, sys_image_guid, node_desc, fw_ver
//	sys/class/infiniband/NAME/ports/1/      state, phys_state, rate, lid, sm_lid, sm_sl, lid_mask_count,
//	                                        cap_mask, link_layer, gids/I, gid_attrs/types/I,
//	                                        gid_attrs/ndevs/I, pkeys/0
//	sys/class/infiniband/NAME/device/       numa_node, net/IFNAME -> /sys/class/net/IFNAME
//	sys/class/infiniband_verbs/abi_version
//	sys/class/infiniband_verbs/uverbsN/     ibdev, abi_version
//	dev/infiniband/uverbsN -> the NIC's verbs socket
//
// uverbsN is the NIC's number: rnicN's is uverbsN (Uverbs), as the
// provider names its ibv_device's dev_name.
package sysfs

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Device is what the view says of one NIC.
type Device struct {
	Name     string // the IB device's name: rnic0
	NodeGUID [8]byte
	FWVer    string
	Socket   string // the NIC's verbs socket, which /dev/infiniband/uverbsN names
	Port     Port   // port 1, the only one
}

// Port is the device's port 1.
type Port struct {
	ActiveMTU   int   // ibv_mtu: 1 (256) … 5 (4096)
	ActiveSpeed uint8 // ibv_port_attr's active_speed (1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR)
	ActiveWidth uint8 // ibv_port_attr's active_width (1 1X, 2 4X, 4 8X, 8 12X)
	CapMask     uint32
	TableLen    int // gid_tbl_len: the files gids/0 … gids/TableLen-1
	GIDs        []GID
	// Netdev is the interface the NIC is bound to ("" for none): its
	// GIDs' ndevs and the device's net/ entry.
	Netdev string
}

// GID is a valid entry of the GID table; the others up to TableLen are
// empty (all zeros, no type: the kernel fails their types' reads, the
// view has no file).
type GID struct {
	Index int
	GID   [16]byte
	Type  string // as gid_attrs/types says it: "RoCE v2", "IB/RoCE v1"
}

// Uverbs returns the index N of a NIC's uverbsN: the number its name
// ends with (rnic3: 3), as the provider computes it; -1 if it ends with
// none.
func Uverbs(name string) int {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) || len(name)-i > 6 {
		return -1
	}
	n, _ := strconv.Atoi(name[i:])
	return n
}

// uverbsName is the name of the NIC's uverbs node and class entry.
func uverbsName(name string) string {
	if n := Uverbs(name); n >= 0 {
		return "uverbs" + strconv.Itoa(n)
	}
	return name
}

// ABIVersion is the uverbs ABI version the kernel's infiniband_verbs
// class reports (IB_USER_VERBS_ABI_VERSION), which rdma-core checks.
const ABIVersion = 6

// Write writes d's entries into the view at root, replacing any it had.
// Each directory is built aside and renamed into place, so that a
// program never reads half a device.
func Write(root string, d Device) error {
	if d.Name == "" || strings.ContainsAny(d.Name, "/\x00") || d.Name == "." || d.Name == ".." {
		return fmt.Errorf("sysfs: bad device name %q", d.Name)
	}
	if err := Remove(root, d.Name); err != nil {
		return err
	}
	class := filepath.Join(root, "sys/class/infiniband")
	verbs := filepath.Join(root, "sys/class/infiniband_verbs")
	dev := filepath.Join(root, "dev/infiniband")
	for _, dir := range []string{class, verbs, dev} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	// The class's own file, shared by the NICs: replaced whole.
	if err := replaceFile(filepath.Join(verbs, "abi_version"), strconv.Itoa(ABIVersion)); err != nil {
		return err
	}
	var files []file
	files = append(files, deviceFiles(d)...)
	if err := place(filepath.Join(class, d.Name), files); err != nil {
		return err
	}
	u := uverbsName(d.Name)
	if err := place(filepath.Join(verbs, u), []file{{name: "ibdev", data: d.Name}, {name: "abi_version", data: "1"}}); err != nil {
		return err
	}
	// The device node: a symbolic link to the NIC's socket, which the
	// preloaded library reports as a character device with the socket's
	// owner and permissions (who may use the NIC). Opening it fails
	// (ENXIO): rnic's libibverbs talks to the socket, not to a node.
	tmp := filepath.Join(dev, "."+u+".tmp")
	os.Remove(tmp)
	if err := os.Symlink(d.Socket, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dev, u))
}

// Remove removes the entries of the NIC name from the view at root.
func Remove(root, name string) error {
	u := uverbsName(name)
	var errs []error
	for _, p := range []string{
		filepath.Join(root, "sys/class/infiniband", name),
		filepath.Join(root, "sys/class/infiniband_verbs", u),
		filepath.Join(root, "dev/infiniband", u),
	} {
		if err := os.RemoveAll(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Prune removes the entries of every NIC in the view for which alive
// returns false (a NIC that was killed and left its files).
func Prune(root string, alive func(name string) bool) {
	ents, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband"))
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && !alive(e.Name()) {
			Remove(root, e.Name())
		}
	}
}

// file is one file of a device directory, relative to it; link is the
// target of a symbolic link instead of a file.
type file struct {
	name, data, link string
}

// deviceFiles lists the files of /sys/class/infiniband/NAME.
func deviceFiles(d Device) []file {
	g := d.NodeGUID
	guid := fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7])
	p := d.Port
	fs := []file{
		{name: "node_type", data: "1: CA"},
		{name: "node_guid", data: guid},
		{name: "sys_image_guid", data: guid},
		{name: "node_desc", data: "rnic " + d.Name},
		{name: "fw_ver", data: d.FWVer},
		{name: "ports/1/state", data: "4: ACTIVE"},
		{name: "ports/1/phys_state", data: "5: LinkUp"},
		{name: "ports/1/rate", data: Rate(p.ActiveSpeed, p.ActiveWidth)},
		{name: "ports/1/lid", data: "0x0"},
		{name: "ports/1/sm_lid", data: "0x0"},
		{name: "ports/1/sm_sl", data: "0"},
		{name: "ports/1/lid_mask_count", data: "0"},
		{name: "ports/1/cap_mask", data: fmt.Sprintf("0x%08x", p.CapMask)},
		{name: "ports/1/link_layer", data: "Ethernet"},
		{name: "ports/1/pkeys/0", data: "0xffff"},
		// The device: rnic is on no bus, so no NUMA node (-1, as the
		// kernel says of a device without one); its net/ directory
		// names the netdev, as a PCI function's does.
		{name: "device/numa_node", data: "-1"},
	}
	if p.Netdev != "" {
		fs = append(fs, file{name: "device/net/" + p.Netdev, link: "/sys/class/net/" + p.Netdev})
	}
	valid := map[int]GID{}
	for _, e := range p.GIDs {
		valid[e.Index] = e
	}
	for i := 0; i < p.TableLen; i++ {
		e := valid[i]
		fs = append(fs, file{name: "ports/1/gids/" + strconv.Itoa(i), data: gidString(e.GID)})
		if e.Type == "" {
			continue
		}
		fs = append(fs, file{name: "ports/1/gid_attrs/types/" + strconv.Itoa(i), data: e.Type})
		if p.Netdev != "" {
			fs = append(fs, file{name: "ports/1/gid_attrs/ndevs/" + strconv.Itoa(i), data: p.Netdev})
		}
	}
	return fs
}

// gidString formats a GID as sysfs does (%pI6: eight groups of four hex
// digits, no compression).
func gidString(g [16]byte) string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// ParseGID reads a GID as gidString writes it.
func ParseGID(s string) ([16]byte, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || !a.Is6() || a.Zone() != "" {
		return [16]byte{}, fmt.Errorf("sysfs: bad GID %q", s)
	}
	return a.As16(), nil
}

// Rate formats a port's rate as the kernel's ports/N/rate does: the
// lane rate times the width, in Gb/s, and the width and speed names.
func Rate(speed, width uint8) string {
	name, tenths := "", 25 // SDR, and anything the kernel does not name
	switch speed {
	case 2:
		name, tenths = " DDR", 50
	case 4:
		name, tenths = " QDR", 100
	case 8:
		name, tenths = " FDR10", 100
	case 16:
		name, tenths = " FDR", 140
	case 32:
		name, tenths = " EDR", 250
	}
	lanes := 1
	switch width {
	case 2:
		lanes = 4
	case 4:
		lanes = 8
	case 8:
		lanes = 12
	case 16:
		lanes = 2
	}
	tenths *= lanes
	half := ""
	if tenths%10 != 0 {
		half = ".5"
	}
	return fmt.Sprintf("%d%s Gb/sec (%dX%s)", tenths/10, half, lanes, name)
}

// place writes files into a new directory beside dir and renames it to
// dir.
func place(dir string, files []file) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".")
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	for _, f := range files {
		p := filepath.Join(tmp, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			os.RemoveAll(tmp)
			return err
		}
		if f.link != "" {
			err = os.Symlink(f.link, p)
		} else {
			err = writeFile(p, f.data)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}

// writeFile writes a sysfs attribute: its value and a newline, readable
// by all (the kernel's 0444).
func writeFile(p, data string) error {
	return os.WriteFile(p, []byte(data+"\n"), 0o444)
}

// replaceFile writes an attribute file beside p and renames it to p, so
// that it replaces one another NIC wrote (0444: not writable in place).
func replaceFile(p, data string) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".")
	if err != nil {
		return err
	}
	_, err = f.WriteString(data + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
