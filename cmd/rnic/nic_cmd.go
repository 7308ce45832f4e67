package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/internal/device/host"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/internal/sysfs"
	"github.com/rnic/rnic/link/udp"
)

// Long-lived NICs serving other processes through the host interface:
// "rnic nic up" starts one per address in the background ("rnic nic
// serve" in a process of its own), "list" shows them, "down" stops them.
// Each NIC is a socket and a description in the run directory:
// $RNIC_RUN_DIR, else $XDG_RUNTIME_DIR/rnic, else /tmp/rnic-<uid>.

// nicInfo is a running NIC's description (<name>.json).
type nicInfo struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	PID    int    `json:"pid"`
	Socket string `json:"socket"`
	// CMSocket is the connection manager's socket (rnic's librdmacm).
	CMSocket string `json:"cm_socket,omitempty"`
	// Netdev is the network interface the NIC is bound to (ip link's name).
	Netdev string `json:"netdev,omitempty"`
}

func runDir() (string, error) {
	d := os.Getenv("RNIC_RUN_DIR")
	if d == "" {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			d = filepath.Join(x, "rnic")
		} else {
			d = filepath.Join(os.TempDir(), fmt.Sprintf("rnic-%d", os.Getuid()))
		}
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	return d, nil
}

// listNICs returns the NICs described in the run directory, by name.
func listNICs(dir string) ([]nicInfo, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []nicInfo
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var n nicInfo
		if json.Unmarshal(b, &n) == nil && n.Name != "" {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// alive reports whether the NIC answers on its socket.
func (n nicInfo) alive() bool {
	c, err := hostif.Dial(n.Socket)
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.Call(hostif.OpQueryDevice, nil)
	return err == nil
}

func newNICCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nic",
		Short: "Start, list and stop NICs that serve other processes",
		Long: `nic manages long-lived NICs, one per IP address, that serve the verbs of
other local processes through rnic's host interface (a Unix socket per NIC
in the run directory: $RNIC_RUN_DIR, else $XDG_RUNTIME_DIR/rnic, else
/tmp/rnic-<uid>). Only processes of your user are served.

  rnic nic up --addr 127.0.0.1      # rnic0, in the background
  rnic nic list
  rnic nic down rnic0               # or --all`,
	}
	cmd.AddCommand(newNICUpCmd(), newNICServeCmd(), newNICListCmd(), newNICDownCmd())
	return cmd
}

func newNICUpCmd() *cobra.Command {
	var addrs []string
	c := &cobra.Command{
		Use:   "up --addr A [--addr B...]",
		Short: "Start NICs in the background: one per address, all in one process",
		Long: `up starts a NIC on each address, in the background: rnic0, rnic1, ... (the
first free names). The NICs of one "up" run in one process and stop together;
a program that uses several NICs under Yama's ptrace_scope 1 (Ubuntu's
default) needs them so, since it can let one process reach its memory.

  rnic nic up --addr 127.0.0.1
  rnic nic up --addr 127.0.0.1 --addr 127.0.0.2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var as []netip.Addr
			for _, s := range addrs {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return fmt.Errorf("--addr %q: %w", s, err)
				}
				if slices.Contains(as, a) {
					return fmt.Errorf("--addr %s given twice", a)
				}
				as = append(as, a)
			}
			dir, err := runDir()
			if err != nil {
				return err
			}
			nics, _ := listNICs(dir)
			used := map[string]bool{}
			for _, n := range nics {
				if n.alive() {
					for _, a := range as {
						if n.Addr == a.String() {
							return fmt.Errorf("%s already serves %s (pid %d)", n.Name, a, n.PID)
						}
					}
					used[n.Name] = true
				}
			}
			args := []string{"nic", "serve"}
			var names []string
			for i, a := 0, 0; a < len(as); i++ {
				if name := fmt.Sprintf("rnic%d", i); !used[name] {
					names = append(names, name)
					args = append(args, "--addr", as[a].String(), "--name", name)
					a++
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			logPath := filepath.Join(dir, names[0]+".log")
			logf, err := os.Create(logPath)
			if err != nil {
				return err
			}
			defer logf.Close()
			p := exec.Command(exe, args...)
			p.Stdout, p.Stderr = logf, logf
			p.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // not the terminal's: it outlives this command
			if err := p.Start(); err != nil {
				return err
			}
			exited := make(chan error, 1)
			go func() { exited <- p.Wait() }()
			deadline := time.Now().Add(10 * time.Second)
			for i, name := range names {
				info := nicInfo{Name: name, Addr: as[i].String(), PID: p.Process.Pid, Socket: filepath.Join(dir, name+".sock")}
				for !info.alive() {
					select {
					case err := <-exited:
						b, _ := os.ReadFile(logPath)
						return fmt.Errorf("%s did not start (%v): %s", name, err, strings.TrimSpace(string(b)))
					default:
					}
					if time.Now().After(deadline) {
						p.Process.Kill()
						return fmt.Errorf("%s did not answer on %s within 10 s", name, info.Socket)
					}
					time.Sleep(10 * time.Millisecond)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (pid %d, socket %s)\n", name, as[i], info.PID, info.Socket)
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&addrs, "addr", nil, "a NIC's IP address (RoCEv2 on UDP port 4791 of it); repeat for more NICs in the same process")
	c.MarkFlagRequired("addr")
	return c
}

func newNICServeCmd() *cobra.Command {
	var addrs, names []string
	c := &cobra.Command{
		Use:    "serve --addr A --name N [--addr B --name M...]",
		Short:  "Run NICs in the foreground (what nic up starts)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(addrs) == 0 || len(addrs) != len(names) {
				return errors.New("one --name for each --addr")
			}
			var as []netip.Addr
			for _, s := range addrs {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return fmt.Errorf("--addr %q: %w", s, err)
				}
				as = append(as, a)
			}
			dir, err := runDir()
			if err != nil {
				return err
			}
			return serveNICs(cmd.ErrOrStderr(), dir, as, names)
		},
	}
	c.Flags().StringArrayVar(&addrs, "addr", nil, "a NIC's IP address")
	c.Flags().StringArrayVar(&names, "name", nil, "its device's name")
	return c
}

// serveNICs runs a NIC on each address, in this process, until SIGTERM
// or SIGINT, or until one of them fails.
func serveNICs(errw io.Writer, dir string, addrs []netip.Addr, names []string) error {
	if os.Getenv("GOMAXPROCS") == "" {
		// The NICs' goroutines (a poller per program, the engine, the
		// link) take at most half the CPUs, and leave the rest to the
		// programs' own polling threads, as a hardware NIC takes none
		// of them: Go's idle processors spin looking for work, and on
		// two cores that spinning is the programs' time. On the 2-core
		// development VM, ib_write_lat -s 8 between two NICs: 42-52 µs
		// typical with GOMAXPROCS 1, 63-73 µs with 2 (three runs each).
		runtime.GOMAXPROCS(max(1, runtime.NumCPU()/2))
	}
	var (
		nics   []*servedNIC
		served = make(chan error, 2*len(addrs))
		ended  = 0 // Serve calls (verbs: host.Serve, CM: cm.ServeHost) that returned
	)
	// Stopping, in order: no more programs (each Serve returns after
	// tearing down each program's objects), then the view's entries, then
	// the descriptions (nic down waits for them to go: the view must be
	// gone by then), then the NICs.
	defer func() {
		for _, n := range nics {
			n.Close()
			n.cmln.Close()
		}
		for ; ended < 2*len(nics); ended++ {
			<-served
		}
		for _, n := range nics {
			sysfs.Remove(n.view, n.dev.Name())
		}
		for _, n := range nics {
			os.Remove(n.desc)
			n.dev.Close()
		}
	}()
	for i, a := range addrs {
		n, err := openNIC(errw, dir, a, names[i])
		if err != nil {
			return err
		}
		nics = append(nics, n)
		go func() { served <- host.Serve(n.dev, n) }()
		go func() { served <- cm.ServeHost(n.dev, n.cmln) }()
		fmt.Fprintf(errw, "%s serving %s on %s\n", names[i], a, n.Addr())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		fmt.Fprintf(errw, "%s: %v, stopping\n", strings.Join(names, ", "), s)
		return nil
	case err := <-served:
		ended++
		return err
	}
}

// servedNIC is a NIC and the listeners of its sockets: the verbs
// socket (NAME.sock) and the connection manager's (NAME.rdmacm, which
// rnic's librdmacm speaks).
type servedNIC struct {
	net.Listener
	cmln net.Listener
	dev  *rnic.Device
	desc string // its description in the run directory
	view string // the sysfs view its entries are in
}

// openNIC starts the NIC named name on address a, listening on its
// socket and described in dir.
func openNIC(errw io.Writer, dir string, a netip.Addr, name string) (*servedNIC, error) {
	// Siblings: the NICs of this process hand each other frames in
	// memory, no system call; every other peer is reached through the
	// socket.
	l, err := udp.Open(udp.Options{Addr: a, Siblings: true})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("UDP port 4791 of %s is taken (by the kernel's rdma_rxe, or another rnic): %w", a, err)
		}
		return nil, err
	}
	// READs and atomics outstanding per QP as rxe allows them (128, not
	// the modelled hardware's 16): perftest sets max_rd_atomic to the
	// peer's limit, and a smaller one here would refuse a QP that
	// connects to rxe.
	dev, err := rnic.Open(rnic.Options{Link: l, Name: name, Hardware: rnic.Hardware{MaxQPRdAtom: 128}})
	if err != nil {
		l.Close()
		return nil, err
	}
	// Published, "rnic stat" shows its counters; a device of the same
	// name published by another program keeps them from being shown,
	// and nothing else.
	if err := dev.Publish(); err != nil {
		fmt.Fprintf(errw, "rnic nic: %s's counters are not shown by rnic stat: %v\n", name, err)
	}
	sock := filepath.Join(dir, name+".sock")
	os.Remove(sock)
	ln, err := net.Listen("unixpacket", sock)
	if err != nil {
		dev.Close()
		return nil, err
	}
	cmsock := filepath.Join(dir, name+".rdmacm")
	os.Remove(cmsock)
	cmln, err := net.Listen("unixpacket", cmsock)
	if err != nil {
		ln.Close()
		dev.Close()
		return nil, err
	}
	// The device's CM answers from now on (a REQ for a port nobody
	// listens on: REJ 8), whether or not a program uses it.
	if err := cm.Start(dev); err != nil {
		cmln.Close()
		ln.Close()
		dev.Close()
		return nil, err
	}
	info := nicInfo{Name: name, Addr: a.String(), PID: os.Getpid(), Socket: sock, CMSocket: cmsock}
	if nd, ok := dev.Netdev(); ok {
		info.Netdev = nd.Name
	}
	b, _ := json.Marshal(info)
	desc := filepath.Join(dir, name+".json")
	if err := os.WriteFile(desc, b, 0o600); err != nil {
		cmln.Close()
		ln.Close()
		dev.Close()
		return nil, err
	}
	// What programs find of the NIC in sysfs and /dev (rnic exec shows
	// them this view): NICs that were killed leave theirs, pruned here.
	view := viewDir(dir)
	sysfs.Prune(view, func(n string) bool { return n == name || nicAlive(dir, n) })
	if err := sysfs.Write(view, sysfsDevice(dev, sock)); err != nil {
		fmt.Fprintf(errw, "rnic nic: %s is not shown in the sysfs view of rnic exec: %v\n", name, err)
	}
	return &servedNIC{Listener: ln, cmln: cmln, dev: dev, desc: desc, view: view}, nil
}

// viewDir is the sysfs view in the run directory (package sysfs), which
// rnic exec's preloaded library shows programs at /sys/class/infiniband,
// /sys/class/infiniband_verbs and /dev/infiniband.
func viewDir(run string) string { return filepath.Join(run, "view") }

// nicAlive reports whether a NIC listens on the socket of the name in
// the run directory: a connection is taken by the kernel even before
// the NIC serves it (a NIC of this process that is still starting).
func nicAlive(dir, name string) bool {
	c, err := net.Dial("unixpacket", filepath.Join(dir, name+".sock"))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// sysfsDevice describes dev, served on sock, for the sysfs view.
func sysfsDevice(dev *rnic.Device, sock string) sysfs.Device {
	a := dev.Attr()
	g0, _ := dev.GID(0)
	d := sysfs.Device{Name: dev.Name(), FWVer: a.FWVer, Socket: sock, Port: sysfs.Port{
		ActiveMTU: int(a.ActiveMTU), ActiveSpeed: uint8(a.ActiveSpeed), ActiveWidth: uint8(a.ActiveWidth),
		CapMask:  1 << 26, // IBV_PORT_IP_BASED_GIDS, as ibv_query_port says
		TableLen: a.GIDTableLen,
	}}
	copy(d.NodeGUID[:], g0[8:]) // the EUI-64 of the link-local GID, as ibv_get_device_guid
	for _, e := range dev.GIDTable() {
		d.Port.GIDs = append(d.Port.GIDs, sysfs.GID{Index: e.Index, GID: e.GID, Type: sysfsGIDType(e.Type)})
	}
	if nd, ok := dev.Netdev(); ok {
		d.Port.Netdev = nd.Name
	}
	return d
}

// sysfsGIDType is a GID's type as gid_attrs/types says it.
func sysfsGIDType(t rnic.GIDType) string {
	if t == rnic.GIDTypeRoCEv2 {
		return "RoCE v2"
	}
	return "IB/RoCE v1"
}

func newNICListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the running NICs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := runDir()
			if err != nil {
				return err
			}
			nics, err := listNICs(dir)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(nics) == 0 {
				fmt.Fprintln(w, "no NICs (rnic nic up --addr A starts one)")
				return nil
			}
			fmt.Fprintf(w, "%-8s %-16s %-10s %-8s %s\n", "name", "addr", "netdev", "pid", "state")
			for _, n := range nics {
				state := "up"
				if !n.alive() {
					state = "not answering"
				}
				nd := n.Netdev
				if nd == "" {
					nd = "-"
				}
				fmt.Fprintf(w, "%-8s %-16s %-10s %-8d %s\n", n.Name, n.Addr, nd, n.PID, state)
			}
			return nil
		},
	}
}

func newNICDownCmd() *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "down [NAME...] [--all]",
		Short: "Stop NICs",
		RunE: func(cmd *cobra.Command, names []string) error {
			if len(names) == 0 && !all {
				return errors.New("name the NICs to stop, or --all")
			}
			dir, err := runDir()
			if err != nil {
				return err
			}
			nics, err := listNICs(dir)
			if err != nil {
				return err
			}
			want := map[string]bool{}
			for _, n := range names {
				want[n] = true
			}
			// The NICs of one process stop together.
			var errs []error
			done := map[string]bool{}
			for _, n := range nics {
				if done[n.Name] || !all && !want[n.Name] {
					continue
				}
				var group []nicInfo
				for _, m := range nics {
					if m.PID == n.PID {
						group = append(group, m)
					}
				}
				err := stopNICs(dir, group)
				for _, m := range group {
					done[m.Name] = true
					delete(want, m.Name)
					switch {
					case err != nil:
					case all || slices.Contains(names, m.Name):
						fmt.Fprintf(cmd.OutOrStdout(), "%s stopped\n", m.Name)
					default:
						fmt.Fprintf(cmd.OutOrStdout(), "%s stopped (it ran in the process of %s, pid %d)\n", m.Name, n.Name, n.PID)
					}
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
			for n := range want {
				errs = append(errs, fmt.Errorf("no NIC named %s", n))
			}
			return errors.Join(errs...)
		},
	}
	c.Flags().BoolVar(&all, "all", false, "stop every NIC")
	return c
}

// stopNICs signals the process of the NICs of group (one process) and
// waits for their descriptions to go.
func stopNICs(dir string, group []nicInfo) error {
	n := group[0]
	var live []nicInfo
	for _, m := range group {
		if m.alive() {
			live = append(live, m)
		} else {
			os.Remove(filepath.Join(dir, m.Name+".json")) // a stale description
			sysfs.Remove(viewDir(dir), m.Name)
			os.Remove(m.Socket)
			if m.CMSocket != "" {
				os.Remove(m.CMSocket)
			}
		}
	}
	if len(live) == 0 {
		return nil
	}
	p, err := os.FindProcess(n.PID)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s (pid %d): %w", n.Name, n.PID, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range live {
		for {
			if _, err := os.Stat(filepath.Join(dir, m.Name+".json")); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s (pid %d) did not stop within 10 s", m.Name, m.PID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}
