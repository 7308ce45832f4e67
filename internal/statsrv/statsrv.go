// Package statsrv publishes a running device's counters and QPs to
// "rnic stat", as the kernel's RDMA netlink interface publishes a hardware
// NIC's to "rdma statistic" and "rdma resource": each published device
// listens on a Unix socket named after it in Dir() until it closes, and
// "rnic stat" asks every socket it finds there.
//
// The exchange (version 2): the server greets with the line
// "rnic-stat 2"; the client sends one request line, "counters" or "qp";
// the server answers with one JSON object (a Reply) and hangs up. The
// greeting comes first so that a client meeting another version (version
// 1 sent its counters at once) can say so without sending anything.
//
// The package is internal because the protocol is between two parts of
// this module (rnic.Device.Publish and the rnic command) and changes with
// them; a program publishes its device with rnic.Options.Publish and
// reads it with "rnic stat".
package statsrv

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Magic is the first line of every answer, with the protocol's version.
const Magic = "rnic-stat 2"

// The requests.
const (
	ReqCounters = "counters" // the device's counters
	ReqQPs      = "qp"       // the device's QPs
)

// Counter is one named counter.
type Counter struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// QP is one QP as "rdma resource show qp" shows it. Type and State are
// named as there ("RC", "RTS"). RQPN and RQPSN mean something for RC and
// UC only (the kernel does not report them for UD).
type QP struct {
	LQPN  uint32 `json:"lqpn"`
	Type  string `json:"type"`
	State string `json:"state"`
	Port  uint32 `json:"port"` // 0: not assigned yet
	SQPSN uint32 `json:"sq_psn"`
	RQPSN uint32 `json:"rq_psn"`
	RQPN  uint32 `json:"rqpn"`
	PDN   uint32 `json:"pdn"`
}

// Reply is a device's answer to a request.
type Reply struct {
	Device string `json:"device"`
	// PID and Comm name the process that runs the device, as the kernel
	// names a verbs program's ("pid", "comm").
	PID      int       `json:"pid"`
	Comm     string    `json:"comm"`
	Counters []Counter `json:"counters,omitempty"`
	QPs      []QP      `json:"qps,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Source is a device that can be published.
type Source interface {
	Name() string
	Counters() []Counter
	QPs() []QP
}

// Dir is where the sockets live: $XDG_RUNTIME_DIR/rnic, or /tmp/rnic-$UID
// without a runtime directory.
func Dir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "rnic")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rnic-%d", os.Getuid()))
}

// Path is the socket of the device called name.
func Path(name string) string { return filepath.Join(Dir(), name) }

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

// Server answers for one device on its socket.
type Server struct {
	ln   *net.UnixListener
	path string
	src  Source
	pid  int
	comm string
	wg   sync.WaitGroup
}

// ioTimeout bounds one exchange, so that a client that stops reading
// cannot hold the server.
const ioTimeout = 5 * time.Second

// Serve creates the socket of src's device and answers on it until Close.
// A socket left by a process that died is replaced; one that a running
// device answers on is an error naming it.
func Serve(src Source) (*Server, error) {
	name := src.Name()
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("device name %q cannot name a socket", name)
	}
	dir := Dir()
	if err := ensurePrivateDir(dir); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	path := filepath.Join(dir, name)
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	ln, err := net.ListenUnix("unix", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: a device named %s is already published", path, name)
		}
		os.Remove(path) // stale: its process is gone
		ln, err = net.ListenUnix("unix", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	s := &Server{ln: ln, path: path, src: src, pid: os.Getpid(), comm: comm()}
	s.wg.Add(1)
	go s.routineAccept()
	return s, nil
}

// comm is the process's name as the kernel keeps it (/proc/self/comm, at
// most 15 bytes), or the program's file name elsewhere.
func comm() string {
	if b, err := os.ReadFile("/proc/self/comm"); err == nil {
		return strings.TrimSpace(string(b))
	}
	c := filepath.Base(os.Args[0])
	if len(c) > 15 {
		c = c[:15]
	}
	return c
}

// Path is the server's socket.
func (s *Server) Path() string { return s.path }

// routineAccept answers each connection in turn.
func (s *Server) routineAccept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.answer(c)
	}
}

// answer reads one request from c and writes the reply.
func (s *Server) answer(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, Magic+"\n"); err != nil {
		return
	}
	req, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
	if err != nil {
		return
	}
	r := Reply{Device: s.src.Name(), PID: s.pid, Comm: s.comm}
	switch strings.TrimSpace(req) {
	case ReqCounters:
		r.Counters = s.src.Counters()
	case ReqQPs:
		r.QPs = s.src.QPs()
	default:
		r.Error = fmt.Sprintf("unknown request %q", strings.TrimSpace(req))
	}
	w := bufio.NewWriter(c)
	json.NewEncoder(w).Encode(&r)
	w.Flush()
}

// Close removes the socket and waits for the server to stop.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// List returns the sockets in Dir, sorted by name; none if Dir does not
// exist.
func List() ([]string, error) {
	entries, err := os.ReadDir(Dir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		// NAME.sock is a NIC's host interface ("rnic nic"), in the same
		// directory by default: not a control socket.
		if e.Type()&os.ModeSocket != 0 && !strings.HasSuffix(e.Name(), ".sock") {
			paths = append(paths, filepath.Join(Dir(), e.Name()))
		}
	}
	sort.Strings(paths)
	return paths, nil
}

// Ask sends a request to the device behind the socket at path and returns
// its reply.
func Ask(path, request string) (*Reply, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	br := bufio.NewReader(c)
	magic, err := br.ReadString('\n')
	magic = strings.TrimSpace(magic)
	switch {
	case strings.HasPrefix(magic, "rnic-stat ") && magic != Magic:
		return nil, fmt.Errorf("%s: the device speaks %q; this rnic stat speaks %q (a different rnic version)", path, magic, Magic)
	case magic != Magic:
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, fmt.Errorf("%s: not an rnic control socket", path)
	}
	if _, err := io.WriteString(c, request+"\n"); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var r Reply
	if err := json.NewDecoder(br).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: bad reply: %w", path, err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%s: %s", path, r.Error)
	}
	if r.Device == "" {
		return nil, fmt.Errorf("%s: no device name", path)
	}
	return &r, nil
}
