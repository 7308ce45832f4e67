package statsrv

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type fakeSource struct {
	name string
	ctrs []Counter
	qps  []QP
}

func (f fakeSource) Name() string        { return f.name }
func (f fakeSource) Counters() []Counter { return f.ctrs }
func (f fakeSource) QPs() []QP           { return f.qps }

// TestRoundTrip: each request gets what it asks for, with the process's
// pid and name.
func TestRoundTrip(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	src := fakeSource{"dev0", []Counter{{"tx_packets", 12}, {"rx_packets", 10}},
		[]QP{{LQPN: 17, Type: "RC", State: "RTS", Port: 1, SQPSN: 5, RQPSN: 7, RQPN: 18, PDN: 1}}}
	s, err := Serve(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "rnic", "dev0"); s.Path() != want || Path("dev0") != want {
		t.Errorf("socket at %s, Path %s; want %s", s.Path(), Path("dev0"), want)
	}
	r, err := Ask(s.Path(), ReqCounters)
	if err != nil {
		t.Fatal(err)
	}
	if r.Device != "dev0" || r.PID != os.Getpid() || r.Comm == "" || !reflect.DeepEqual(r.Counters, src.ctrs) || r.QPs != nil {
		t.Errorf("counters reply %+v", r)
	}
	r, err = Ask(s.Path(), ReqQPs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.QPs, src.qps) || r.Counters != nil {
		t.Errorf("qp reply %+v", r)
	}
	if _, err := Ask(s.Path(), "mrs"); err == nil || !strings.Contains(err.Error(), `unknown request "mrs"`) {
		t.Errorf("unknown request: %v", err)
	}
	if paths, err := List(); err != nil || len(paths) != 1 || paths[0] != s.Path() {
		t.Errorf("List: %v %v", paths, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}
}

// TestStaleAndDuplicate: a socket left by a dead process is replaced; a
// second device of the same name is refused while the first runs.
func TestStaleAndDuplicate(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	if err := ensurePrivateDir(Dir()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: Path("dup"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // bound, then gone without unlinking: a stale socket
	s, err := Serve(fakeSource{name: "dup"})
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer s.Close()
	if _, err := Serve(fakeSource{name: "dup"}); err == nil || !strings.Contains(err.Error(), "already published") {
		t.Errorf("duplicate device: %v", err)
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if _, err := Serve(fakeSource{name: bad}); err == nil || !strings.Contains(err.Error(), "cannot name a socket") {
			t.Errorf("name %q: %v", bad, err)
		}
	}
}

// TestAskGarbage: a socket that does not speak the protocol, or speaks
// another version of it, is an error that says so, not a hang.
func TestAskGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bogus")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	replies := []string{
		"hello\n",
		"rnic-stat 1\ndevice x\ntx_packets 1\n",
		Magic + "\n{\"device\":",
		Magic + "\n{}\n",
		"",
	}
	go func() {
		for _, reply := range replies {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if reply != "" {
				c.Write([]byte(reply))
				bufio.NewReader(c).ReadString('\n') // the request, or the client hanging up
			}
			c.Close()
		}
	}()
	for _, want := range []string{"not an rnic control socket", `the device speaks "rnic-stat 1"`, "bad reply", "no device name", "not an rnic control socket"} {
		if _, err := Ask(path, ReqCounters); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}
