package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rnic/rnic"
)

// The control socket: each device the rnic command opens listens on a Unix
// socket named after it, in controlDir(), until it closes. "rnic stat"
// connects to it; the device answers with its counters and hangs up:
//
//	rnic-stat 1
//	device rnic_127.0.0.1
//	tx_packets 12
//	rx_packets 10
//	...
//
// one "name value" line per counter (rnic.Device.Counters), then EOF.
const statMagic = "rnic-stat 1"

// controlDir is where the control sockets live: $XDG_RUNTIME_DIR/rnic, or
// /tmp/rnic-$UID without a runtime directory.
func controlDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "rnic")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rnic-%d", os.Getuid()))
}

// ensurePrivateDir creates dir (mode 0700) if needed and checks that it
// is a directory of this user, not one planted by another in /tmp.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || (ok && int(st.Uid) != os.Getuid()) {
		return fmt.Errorf("%s is not a directory of user %d", dir, os.Getuid())
	}
	return nil
}

// statServer serves one device's counters on its control socket.
type statServer struct {
	ln   *net.UnixListener
	path string
	dev  *rnic.Device
	wg   sync.WaitGroup
}

// serveStats creates dev's control socket and serves it until Close. A
// socket left behind by a process that died is replaced; one that a
// running device answers on is an error.
func serveStats(dev *rnic.Device) (*statServer, error) {
	dir := controlDir()
	if err := ensurePrivateDir(dir); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	path := filepath.Join(dir, dev.Name())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if errors.Is(err, syscall.EADDRINUSE) {
		if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: a device named %s is already running", path, dev.Name())
		}
		os.Remove(path) // stale: its process is gone
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	}
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	s := &statServer{ln: ln, path: path, dev: dev}
	s.wg.Add(1)
	go s.routineAccept()
	return s, nil
}

// routineAccept answers each connection with the counters.
func (s *statServer) routineAccept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "%s\ndevice %s\n", statMagic, s.dev.Name())
		for _, ctr := range s.dev.Counters() {
			fmt.Fprintf(w, "%s %d\n", ctr.Name, ctr.Value)
		}
		w.Flush()
		c.Close()
	}
}

// Close removes the socket and waits for the server to stop.
func (s *statServer) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// deviceStats are one device's counters as read from its socket.
type deviceStats struct {
	name     string
	counters []rnic.Counter
}

// readStats asks the device behind a control socket for its counters.
func readStats(path string) (deviceStats, error) {
	var st deviceStats
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return st, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	sc := bufio.NewScanner(c)
	if !sc.Scan() || sc.Text() != statMagic {
		return st, fmt.Errorf("%s: not an rnic control socket", path)
	}
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return st, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		if name == "device" {
			st.name = val
			continue
		}
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return st, fmt.Errorf("%s: bad counter %q", path, sc.Text())
		}
		st.counters = append(st.counters, rnic.Counter{Name: name, Value: v})
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	if st.name == "" {
		return st, fmt.Errorf("%s: no device name", path)
	}
	return st, nil
}
