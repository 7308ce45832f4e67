package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// nsHost is one host of TestNamespaces: a network namespace with a veth
// end, an address, and a NIC of "rnic nic up" bound to it.
type nsHost struct {
	ns, ifname, addr string
	addr6            string // its IPv6 address (a second NIC, rnic1)
	run              string // its NICs' run directory
	lib              string // rnic's libraries
}

// cmd returns a command that runs argv inside the host's namespace on
// rnic's libraries, as rnic exec would run it there, with more
// environment.
func (h *nsHost) cmd(env []string, argv ...string) *exec.Cmd {
	args := append([]string{"netns", "exec", h.ns, "env", "RNIC_RUN_DIR=" + h.run, "RNIC_TEST_MAIN=1",
		"LD_LIBRARY_PATH=" + h.lib, "LD_PRELOAD=" + filepath.Join(h.lib, "librnic-sysfs.so")}, env...)
	return exec.Command("ip", append(args, argv...)...)
}

// TestNamespaces puts rnic on a network of the test's own: two network
// namespaces joined by a veth pair, an address of the test's in each
// (198.51.100.0/24, inside the namespaces only), a NIC bound to each
// veth. Each NIC knows its netdev as rxe would (ibv_devinfo's GID 0 from
// the veth's MAC, the MTU and speed of the veth, sysfs's ndevs), and
// Debian's unmodified programs run between the two hosts: ibv_rc_pingpong,
// ib_write_bw, ib_read_lat, rping (over IPv4 and IPv6, a second NIC on
// each veth's IPv6 address), libfabric's fi_pingpong over verbs (MSG
// endpoints) and over verbs;ofi_rxm (RDM), with FI_VERBS_IFACE naming
// the veth and the data checked, and UCX's tag_bw. It needs root and
// iproute2 (it skips, saying so, without them).
func TestNamespaces(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("skipped: needs root to create network namespaces (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipped: no ip; Debian: apt-get install iproute2")
	}
	lib := buildProvider(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id := os.Getpid() % 100000
	hosts := [2]*nsHost{
		{ns: fmt.Sprintf("rnic-t%d-a", id), ifname: fmt.Sprintf("rnt%da", id), addr: "198.51.100.1", addr6: "2001:db8:77::1", run: t.TempDir(), lib: lib},
		{ns: fmt.Sprintf("rnic-t%d-b", id), ifname: fmt.Sprintf("rnt%db", id), addr: "198.51.100.2", addr6: "2001:db8:77::2", run: t.TempDir(), lib: lib},
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "add", hosts[0].ns).CombinedOutput(); err != nil {
		t.Skipf("skipped: ip netns add: %v: %s (no network namespaces here: a container without CAP_SYS_ADMIN?)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		for _, h := range hosts {
			h.cmd(nil, self, "nic", "down", "--all").Run()
			exec.Command("ip", "netns", "del", h.ns).Run()
		}
	})
	ip("netns", "add", hosts[1].ns)
	ip("link", "add", hosts[0].ifname, "netns", hosts[0].ns, "type", "veth", "peer", "name", hosts[1].ifname, "netns", hosts[1].ns)
	for _, h := range hosts {
		ip("-n", h.ns, "addr", "add", h.addr+"/24", "dev", h.ifname)
		// 2001:db8::/32 is documentation's; nodad: usable at once.
		ip("-n", h.ns, "addr", "add", h.addr6+"/64", "dev", h.ifname, "nodad")
		ip("-n", h.ns, "link", "set", h.ifname, "up")
		ip("-n", h.ns, "link", "set", "lo", "up")
		if out, err := h.cmd(nil, self, "nic", "up", "--addr", h.addr, "--addr", h.addr6).CombinedOutput(); err != nil {
			t.Fatalf("nic up in %s: %v\n%s", h.ns, err, out)
		}
	}
	srv, cli := hosts[0], hosts[1]

	// The NIC's netdev: its GID 0 and node GUID from the veth's MAC (the
	// modified EUI-64), active_mtu from the veth's 1500 (IB MTU 1024),
	// the speed the veth reports, and sysfs naming the veth.
	t.Run("netdev", func(t *testing.T) {
		out, err := exec.Command("ip", "-n", srv.ns, "-o", "link", "show", srv.ifname).CombinedOutput()
		m := regexp.MustCompile(`link/ether ([0-9a-f:]{17})`).FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("ip link show %s: %v\n%s", srv.ifname, err, out)
		}
		mac, _ := net.ParseMAC(m[1])
		eui := fmt.Sprintf("%02x%02x:%02xff:fe%02x:%02x%02x", mac[0]^2, mac[1], mac[2], mac[3], mac[4], mac[5])
		// GID 0 as inet_ntop prints it: each group without leading zeros.
		wantGID := ipString([16]byte{0: 0xfe, 1: 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]})
		if _, err := exec.LookPath("ibv_devinfo"); err == nil {
			out, err := srv.cmd(nil, "ibv_devinfo", "-v").CombinedOutput()
			if err != nil {
				t.Fatalf("ibv_devinfo: %v\n%s", err, out)
			}
			for _, w := range []string{"GID[  0]:\t\t" + wantGID + ", RoCE v2", "GID[  1]:\t\t::ffff:" + srv.addr + ", RoCE v2",
				"active_mtu:\t\t1024 (3)", "node_guid:\t\t\t" + eui} {
				if !strings.Contains(string(out), w) {
					t.Errorf("ibv_devinfo -v does not show %q:\n%s", w, out)
				}
			}
			sp, err := srv.cmd(nil, "cat", "/sys/class/net/"+srv.ifname+"/speed").Output()
			if mbps, e := strconv.Atoi(strings.TrimSpace(string(sp))); err == nil && e == nil && mbps == 10000 {
				if !strings.Contains(string(out), "active_speed:\t\t10.0 Gbps (8)") {
					t.Errorf("a 10 Gb/s veth: ibv_devinfo does not show FDR10 1X:\n%s", out)
				}
			}
		}
		view, err := srv.cmd(nil, "sh", "-c", "ls /sys/class/infiniband/rnic0/device/net; cat /sys/class/infiniband/rnic0/ports/1/gid_attrs/ndevs/1").CombinedOutput()
		if err != nil || string(view) != srv.ifname+"\n"+srv.ifname+"\n" {
			t.Errorf("the sysfs view does not name %s: %v\n%s", srv.ifname, err, view)
		}
	})

	// pair runs a server in the first namespace and its client in the
	// second (retried while the server is not yet listening: retry
	// matches what the client says then), and returns both outputs.
	pair := func(t *testing.T, env []string, retry string, srvArgv, cliArgv []string) (string, string) {
		t.Helper()
		if _, err := exec.LookPath(srvArgv[0]); err != nil {
			t.Skipf("skipped: no %s here", srvArgv[0])
		}
		return runServerClient(t, srv.cmd(env, srvArgv...), func() *exec.Cmd { return cli.cmd(env, cliArgv...) }, retry)
	}
	expect := func(t *testing.T, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("the output does not show %q:\n%s", w, out)
			}
		}
	}

	t.Run("ibv_rc_pingpong", func(t *testing.T) {
		args := []string{"ibv_rc_pingpong", "-d", "rnic0", "-g", "1", "-n", "100", "-s", "4096", "-c", "-p", "18801"}
		out, so := pair(t, nil, "Couldn't connect", args, append(args, srv.addr))
		for _, o := range []string{out, so} {
			expect(t, o, "819200 bytes in", "100 iters in")
		}
	})
	for i, prog := range []string{"ib_write_bw", "ib_read_lat"} {
		t.Run(prog, func(t *testing.T) {
			args := []string{prog, "-d", "rnic0", "-x", "1", "-n", "200", "-p", strconv.Itoa(18810 + i)}
			out, _ := pair(t, nil, "Couldn't connect", args, append(args, srv.addr))
			expect(t, out, "Device         : rnic0", map[bool]string{true: "BW average", false: "t_typical"}[prog == "ib_write_bw"])
		})
	}
	for i, a := range []string{srv.addr, srv.addr6} {
		t.Run("rping_"+map[bool]string{true: "ipv4", false: "ipv6"}[i == 0], func(t *testing.T) {
			port := strconv.Itoa(18820 + i)
			out, _ := pair(t, nil, "REJECTED|connect error|unreachable",
				[]string{"rping", "-s", "-a", a, "-p", port, "-C", "50", "-V"},
				[]string{"rping", "-c", "-a", a, "-p", port, "-C", "50", "-V"})
			t.Logf("%s", out)
		})
	}
	// libfabric: its verbs provider offers MSG endpoints on the NICs whose
	// address is on an interface FI_VERBS_IFACE names; -c checks the data.
	for i, tc := range []struct{ name, prov, ep string }{
		{"fi_pingpong_msg", "verbs", "msg"},
		{"fi_pingpong_rdm", "verbs;ofi_rxm", "rdm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(18830 + i)
			args := []string{"fi_pingpong", "-p", tc.prov, "-e", tc.ep, "-c", "-I", "50"}
			s := append(append([]string{}, args...), "-B", port)
			c := append(append([]string{}, args...), "-P", port, srv.addr)
			// FI_VERBS_IFACE is a name or a prefix: the two veths'
			// common prefix names both hosts' interfaces.
			iface := srv.ifname[:len(srv.ifname)-1]
			env := []string{"FI_VERBS_IFACE=" + iface}
			if _, err := exec.LookPath("fi_pingpong"); err != nil {
				t.Skip("skipped: no fi_pingpong here")
			}
			out, so, err := serverClient(srv.cmd(env, s...), func() *exec.Cmd { return cli.cmd(env, c...) }, "Connection refused")
			if err != nil && tc.ep == "rdm" && strings.Contains(err.Error(), "terminated with signal 11") &&
				regexp.MustCompile(`(?m)^1m\s+50\s+=50\s`).MatchString(err.Error()) {
				// Debian 12's libfabric (1.17) crashes now and then in
				// ofi_rxm's teardown, after every size has passed and
				// been checked (seen twice in about twenty runs; not
				// understood: no symbols). Once is tolerated and shown;
				// twice in a row fails.
				t.Logf("fi_pingpong RDM crashed at teardown after its last size; running it again:\n%v", err)
				out, so, err = serverClient(srv.cmd(env, s...), func() *exec.Cmd { return cli.cmd(env, c...) }, "Connection refused")
			}
			if err != nil {
				t.Fatal(err)
			}
			// One line per size: bytes, iterations ("=50": each
			// checked), total, time, rates; the largest is 1m.
			for _, o := range []string{out, so} {
				if !regexp.MustCompile(`(?m)^1m\s+50\s+=50\s`).MatchString(o) || !regexp.MustCompile(`(?m)^64\s+50\s+=50\s`).MatchString(o) {
					t.Errorf("fi_pingpong did not report 64 B and 1 MiB, 50 checked iterations each:\n%s", o)
				}
			}
		})
	}
	t.Run("ucx_tag_bw", func(t *testing.T) {
		if _, err := exec.LookPath("ucx_perftest"); err != nil {
			t.Skip("skipped: no ucx_perftest; Debian: apt-get install ucx-utils")
		}
		for i, tls := range []string{"rc_v", "ud_v"} {
			env := []string{"UCX_TLS=" + tls + ",self", "UCX_NET_DEVICES=rnic0:1"}
			port := strconv.Itoa(18840 + i)
			out, _ := pair(t, env, "Connection refused", []string{"ucx_perftest", "-p", port},
				[]string{"ucx_perftest", srv.addr, "-p", port, "-t", "tag_bw", "-n", "200", "-s", "65536"})
			v, err := ucxFinal(out)
			if err != nil {
				t.Fatal(err)
			}
			if int(v[0]) != 200 {
				t.Errorf("%s tag_bw ran %v iterations, want 200:\n%s", tls, v[0], out)
			}
			t.Logf("%s: %s", tls, strings.TrimSpace(out[strings.LastIndex(out, "Final:"):]))
		}
	})
}
