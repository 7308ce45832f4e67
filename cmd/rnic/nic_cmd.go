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
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/hostif"
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
	var addr string
	c := &cobra.Command{
		Use:   "up --addr A",
		Short: "Start a NIC on address A in the background",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := netip.ParseAddr(addr)
			if err != nil {
				return fmt.Errorf("--addr %q: %w", addr, err)
			}
			dir, err := runDir()
			if err != nil {
				return err
			}
			nics, _ := listNICs(dir)
			used := map[string]bool{}
			for _, n := range nics {
				if n.alive() {
					if n.Addr == a.String() {
						return fmt.Errorf("%s already serves %s (pid %d)", n.Name, a, n.PID)
					}
					used[n.Name] = true
				}
			}
			name := ""
			for i := 0; name == ""; i++ {
				if !used[fmt.Sprintf("rnic%d", i)] {
					name = fmt.Sprintf("rnic%d", i)
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			logPath := filepath.Join(dir, name+".log")
			logf, err := os.Create(logPath)
			if err != nil {
				return err
			}
			defer logf.Close()
			p := exec.Command(exe, "nic", "serve", "--addr", a.String(), "--name", name)
			p.Stdout, p.Stderr = logf, logf
			p.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // not the terminal's: it outlives this command
			if err := p.Start(); err != nil {
				return err
			}
			exited := make(chan error, 1)
			go func() { exited <- p.Wait() }()
			info := nicInfo{Name: name, Addr: a.String(), PID: p.Process.Pid, Socket: filepath.Join(dir, name+".sock")}
			deadline := time.Now().Add(10 * time.Second)
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
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s (pid %d, socket %s)\n", name, a, info.PID, info.Socket)
			return nil
		},
	}
	c.Flags().StringVar(&addr, "addr", "", "the NIC's IP address (RoCEv2 on UDP port 4791 of it)")
	c.MarkFlagRequired("addr")
	return c
}

func newNICServeCmd() *cobra.Command {
	var addr, name string
	c := &cobra.Command{
		Use:    "serve --addr A --name N",
		Short:  "Run a NIC in the foreground (what nic up starts)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := netip.ParseAddr(addr)
			if err != nil {
				return fmt.Errorf("--addr %q: %w", addr, err)
			}
			dir, err := runDir()
			if err != nil {
				return err
			}
			return serveNIC(cmd.ErrOrStderr(), dir, a, name)
		},
	}
	c.Flags().StringVar(&addr, "addr", "", "the NIC's IP address")
	c.Flags().StringVar(&name, "name", "rnic0", "the device's name")
	return c
}

// serveNIC runs a NIC on a until SIGTERM or SIGINT.
func serveNIC(errw io.Writer, dir string, a netip.Addr, name string) error {
	if os.Getenv("GOMAXPROCS") == "" {
		// The NIC's goroutines (a poller per program, the engine, the
		// link) take at most half the CPUs, and leave the rest to the
		// programs' own polling threads, as a hardware NIC takes none
		// of them: Go's idle processors spin looking for work, and on
		// two cores that spinning is the programs' time. On the 2-core
		// development VM, ib_write_lat -s 8 between two NICs: 42-52 µs
		// typical with GOMAXPROCS 1, 63-73 µs with 2 (three runs each).
		runtime.GOMAXPROCS(max(1, runtime.NumCPU()/2))
	}
	l, err := udp.Open(udp.Options{Addr: a})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("UDP port 4791 of %s is taken (by the kernel's rdma_rxe, or another rnic): %w", a, err)
		}
		return err
	}
	// READs and atomics outstanding per QP as rxe allows them (128, not
	// the modelled hardware's 16): perftest sets max_rd_atomic to the
	// peer's limit, and a smaller one here would refuse a QP that
	// connects to rxe.
	dev, err := rnic.Open(rnic.Options{Link: l, Name: name, Hardware: rnic.Hardware{MaxQPRdAtom: 128}})
	if err != nil {
		l.Close()
		return err
	}
	defer dev.Close()
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
		return err
	}
	info := nicInfo{Name: name, Addr: a.String(), PID: os.Getpid(), Socket: sock}
	b, _ := json.Marshal(info)
	desc := filepath.Join(dir, name+".json")
	if err := os.WriteFile(desc, b, 0o600); err != nil {
		ln.Close()
		return err
	}
	defer os.Remove(desc)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	served := make(chan error, 1)
	go func() { served <- dev.ServeHost(ln) }()
	fmt.Fprintf(errw, "%s serving %s on %s\n", name, a, sock)
	select {
	case s := <-sig:
		fmt.Fprintf(errw, "%s: %v, stopping\n", name, s)
	case err := <-served:
		return err
	}
	ln.Close()
	<-served
	return nil
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
			fmt.Fprintf(w, "%-8s %-16s %-8s %s\n", "name", "addr", "pid", "state")
			for _, n := range nics {
				state := "up"
				if !n.alive() {
					state = "not answering"
				}
				fmt.Fprintf(w, "%-8s %-16s %-8d %s\n", n.Name, n.Addr, n.PID, state)
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
			var errs []error
			for _, n := range nics {
				if !all && !want[n.Name] {
					continue
				}
				delete(want, n.Name)
				if err := stopNIC(dir, n); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s stopped\n", n.Name)
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

// stopNIC signals the NIC's process and waits for its description to go.
func stopNIC(dir string, n nicInfo) error {
	desc := filepath.Join(dir, n.Name+".json")
	if !n.alive() {
		os.Remove(desc)
		os.Remove(n.Socket)
		return nil // a stale description
	}
	p, err := os.FindProcess(n.PID)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s (pid %d): %w", n.Name, n.PID, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(desc); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) did not stop within 10 s", n.Name, n.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
