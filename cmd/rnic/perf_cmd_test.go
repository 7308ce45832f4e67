package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
)

// syncBuffer is an output both a command and the test read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// cmdRun is an rnic command running in this process.
type cmdRun struct {
	out  syncBuffer
	done chan error
}

// startCmd runs "rnic args..." in a goroutine.
func startCmd(ctx context.Context, args ...string) *cmdRun {
	r := &cmdRun{done: make(chan error, 1)}
	root := newRootCmd()
	root.SetOut(&r.out)
	root.SetErr(&r.out)
	root.SetArgs(args)
	go func() { r.done <- root.ExecuteContext(ctx) }()
	return r
}

// waitFor waits until the command's output contains s.
func (r *cmdRun) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.out.String(), s) {
		select {
		case err := <-r.done:
			t.Fatalf("command ended (%v) before printing %q:\n%s", err, s, r.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", s, r.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the command to end.
func (r *cmdRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("command still running:\n%s", r.out.String())
		return nil
	}
}

// useMemLinks makes perf open its devices on an in-process switch for
// the test, and gives it a private control-socket directory.
func useMemLinks(t *testing.T) {
	t.Helper()
	sw := mem.NewSwitch()
	old := perfLink
	perfLink = func(a netip.Addr, loss float64) (link.Link, error) {
		return sw.Port(a, mem.Faults{Seed: 1, Loss: loss})
	}
	t.Cleanup(func() { perfLink = old })
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
}

// freePort returns a TCP port free on 127.0.0.1 for the exchange.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// perfPair runs "rnic perf" as server and client with the same flags and
// returns their outputs.
func perfPair(t *testing.T, srvDev, cliDev string, flags ...string) (srv, cli string) {
	t.Helper()
	return perfPair2(t, srvDev, cliDev, flags, flags)
}

// perfPair2 is perfPair with flags of each side's own.
func perfPair2(t *testing.T, srvDev, cliDev string, srvFlags, cliFlags []string) (srv, cli string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	s := startCmd(ctx, append([]string{"perf", "-d", srvDev, "-p", port}, srvFlags...)...)
	s.waitFor(t, "Waiting for client to connect")
	c := startCmd(ctx, append(append([]string{"perf", "-d", cliDev, "-p", port}, cliFlags...), "127.0.0.1")...)
	cerr, serr := c.wait(t), s.wait(t)
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v\n%s\nserver: %v\n%s", cerr, c.out.String(), serr, s.out.String())
	}
	return s.out.String(), c.out.String()
}

// TestPerfCommand runs "rnic perf write_bw" as server and client, two
// invocations of the cobra command in this process, over link/mem.
func TestPerfCommand(t *testing.T) {
	useMemLinks(t)
	srv, cli := perfPair(t, "10.0.0.1", "10.0.0.2", "write_bw", "-s", "2500", "-n", "50", "-F", "-x", "1")
	for _, out := range []string{srv, cli} {
		for _, want := range []string{"RDMA_Write BW Test", "GID index       : 1", " #bytes     #iterations    BW peak[MB/sec]", "\n 2500       50   "} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
	if !strings.Contains(srv, "Device         : rnic_10.0.0.1") || !strings.Contains(cli, "Device         : rnic_10.0.0.2") {
		t.Errorf("device names:\n%s\n%s", srv, cli)
	}
	// The control sockets are gone with the devices.
	if entries, _ := os.ReadDir(controlDir()); len(entries) != 0 {
		t.Errorf("control sockets left: %v", entries)
	}
}

// TestPerfCommandErrors checks the command line's errors.
func TestPerfCommandErrors(t *testing.T) {
	useMemLinks(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"perf"}, "accepts between 1 and 2 arg(s)"},
		{[]string{"perf", "write_bandwidth"}, "unknown test"},
		{[]string{"perf", "write_bw", "-c", "XRC"}, "connection type \"XRC\""},
		{[]string{"perf", "atomic_bw", "-A", "ADD"}, "invalid atomic type"},
		{[]string{"perf", "write_bw", "-s", "lots"}, "message size"},
		{[]string{"perf", "write_bw", "-d", "no-such-if0"}, "neither an IP address nor a network interface"},
		{[]string{"perf", "write_lat", "-q", "2", "127.0.0.1"}, "multiple QPs only available on bw tests"},
		{[]string{"perf", "read_bw", "-u", "32", "127.0.0.1"}, "QP timeout 32 out of range"},
		{[]string{"perf", "read_bw", "-u", "-3", "127.0.0.1"}, "QP timeout out of range"},
		{[]string{"perf", "write_bw", "-p", "1", "-n", "5", "127.0.0.1"}, "couldn't connect to 127.0.0.1:1"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		root := newRootCmd()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tt.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rnic %s: err = %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// TestStatSeesRunningDevice runs a 2-second write_bw and, while it runs,
// "rnic stat": it must list both devices with moving counters, then see
// none once they are closed.
func TestStatSeesRunningDevice(t *testing.T) {
	useMemLinks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	s := startCmd(ctx, "perf", "write_bw", "-d", "10.0.0.1", "-p", port, "-D", "2", "-s", "64")
	s.waitFor(t, "Waiting for client")
	c := startCmd(ctx, "perf", "write_bw", "-d", "10.0.0.2", "-p", port, "-D", "2", "-s", "64", "127.0.0.1")
	c.waitFor(t, "BW peak[MB/sec]") // the traffic is on
	time.Sleep(200 * time.Millisecond)

	var out, errOut bytes.Buffer
	if err := runStat(&out, &errOut, ""); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "link rnic_10.0.0.1/1 ") || !strings.HasPrefix(lines[1], "link rnic_10.0.0.2/1 ") {
		t.Fatalf("rnic stat:\n%s%s", out.String(), errOut.String())
	}
	if strings.Contains(lines[1], " tx_packets 0 ") || !strings.Contains(lines[0], " rx_write_requests ") {
		t.Errorf("counters do not move: %s", lines[1])
	}
	// The named device only, through the cobra command.
	var one bytes.Buffer
	root := newRootCmd()
	root.SetOut(&one)
	root.SetArgs([]string{"stat", "rnic_10.0.0.2"})
	if err := root.Execute(); err != nil || !strings.HasPrefix(one.String(), "link rnic_10.0.0.2/1 tx_packets ") || strings.Count(one.String(), "\n") != 1 {
		t.Errorf("rnic stat rnic_10.0.0.2: %v\n%s", err, one.String())
	}
	if err := c.wait(t); err != nil {
		t.Fatalf("client: %v\n%s", err, c.out.String())
	}
	if err := s.wait(t); err != nil {
		t.Fatalf("server: %v\n%s", err, s.out.String())
	}
	out.Reset()
	errOut.Reset()
	if err := runStat(&out, &errOut, ""); err != nil || out.Len() != 0 || !strings.Contains(errOut.String(), "no running rnic devices") {
		t.Errorf("after the run: %v %q %q", err, out.String(), errOut.String())
	}
}

// TestPerfPcap runs send_lat with --pcap on the client, with whole frames
// and with the default snapshot length, and checks that the file parses,
// holds both directions, and that every frame's ICRC verifies (whole
// frames) or that every record keeps the headers and says how long the
// frame was (cut frames).
func TestPerfPcap(t *testing.T) {
	useMemLinks(t)
	for _, snap := range []string{"0", ""} {
		path := filepath.Join(t.TempDir(), "lat.pcap")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		port := freePort(t)
		s := startCmd(ctx, "perf", "send_lat", "-d", "10.0.0.1", "-p", port, "-n", "20", "-s", "3000")
		s.waitFor(t, "Waiting for client")
		args := []string{"perf", "send_lat", "-d", "10.0.0.2", "-p", port, "-n", "20", "-s", "3000", "--pcap", path}
		if snap != "" {
			args = append(args, "--pcap-snaplen", snap)
		}
		c := startCmd(ctx, append(args, "127.0.0.1")...)
		if err := errors.Join(c.wait(t), s.wait(t)); err != nil {
			t.Fatalf("%v\n%s\n%s", err, c.out.String(), s.out.String())
		}
		cancel()
		wantSnap := defaultSnapLen
		if snap == "0" {
			wantSnap = pcap.SnapLen
		}
		checkPcap(t, path, "10.0.0.2", "10.0.0.1", wantSnap)
	}
}

// checkPcap checks a capture of a and b's traffic with snapshot length
// snap: every frame is RoCEv2 on UDP 4791, with a valid ICRC if it was
// kept whole, with its headers and its length otherwise, and both
// directions are there.
func checkPcap(t *testing.T, path, a, b string, snap int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.SnapLen() != uint32(snap) {
		t.Errorf("snapshot length %d, want %d", r.SnapLen(), snap)
	}
	dirs := map[string]int{}
	frames, cut := 0, 0
	for {
		rec, err := r.NextRecord()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ip, ok := pcap.IPPacket(r.LinkType(), rec.Data)
		if !ok || len(ip) < 40 || ip[0]>>4 != 4 {
			t.Fatalf("record %d is not IPv4 with its headers: % x", frames, rec.Data)
		}
		if dport := int(ip[22])<<8 | int(ip[23]); dport != wire.UDPPort {
			t.Errorf("record %d: UDP port %d", frames, dport)
		}
		whole := int(ip[2])<<8 | int(ip[3])
		switch {
		case len(rec.Data) > snap || rec.OrigLen != 14+whole:
			t.Errorf("record %d: %d bytes kept of %d (IP length %d), snaplen %d", frames, len(rec.Data), rec.OrigLen, whole, snap)
		case len(rec.Data) == rec.OrigLen:
			if err := wire.CheckICRC(ip); err != nil {
				t.Errorf("record %d: %v", frames, err)
			}
		default:
			cut++
		}
		src, dst := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		dirs[src.String()+">"+dst.String()]++
		frames++
	}
	if dirs[a+">"+b] == 0 || dirs[b+">"+a] == 0 {
		t.Errorf("directions in the capture: %v", dirs)
	}
	if snap < 1000 && cut == 0 {
		t.Errorf("snaplen %d cut none of %d frames", snap, frames)
	}
}

// TestPerfPcapBounded runs write_bw with a capture bounded as the
// README's example is (snapshot length, file size, ring of files) and
// checks that the capture stays within the bounds: the ring's files and
// no others, none over the size by more than the record that took it
// over, no record over the snapshot length.
func TestPerfPcapBounded(t *testing.T) {
	useMemLinks(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "bw.pcap")
	flags := []string{"write_bw", "-s", "8192", "-n", "2000"}
	perfPair2(t, "10.0.0.1", "10.0.0.2", flags,
		append(flags, "--pcap", path, "--pcap-snaplen", "100", "--pcap-filesize", "20k", "--pcap-filecount", "3"))
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[bw.pcap0 bw.pcap1 bw.pcap2]" {
		t.Fatalf("files %v, want the ring bw.pcap0..2", names)
	}
	var total int
	for _, name := range names {
		st, _ := os.Stat(filepath.Join(dir, name))
		if st.Size() > 20<<10+16+100 {
			t.Errorf("%s is %d bytes, over 20 KiB by more than a record", name, st.Size())
		}
		snap, recs := readFile(t, filepath.Join(dir, name))
		if snap != 100 {
			t.Errorf("%s: snaplen %d", name, snap)
		}
		for _, r := range recs {
			if len(r.Data) > 100 {
				t.Errorf("%s: a record of %d bytes", name, len(r.Data))
			}
		}
		total += len(recs)
	}
	if total == 0 {
		t.Error("the ring holds no records")
	}
}

// TestPerfCommandUDP runs "rnic perf" over link/udp, the default link:
// write_bw between 127.0.0.1 and 127.0.0.2 on UDP port 4791, with a
// capture on the client.
func TestPerfCommandUDP(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.0.0.2"} {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(a), Port: wire.UDPPort})
		if err != nil {
			t.Skipf("UDP port %d is taken on %s (%v); skipping the test over link/udp", wire.UDPPort, a, err)
		}
		c.Close()
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	path := filepath.Join(t.TempDir(), "udp.pcap")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	s := startCmd(ctx, "perf", "write_bw", "-d", "127.0.0.1", "-p", port, "-n", "100", "-s", "8192")
	s.waitFor(t, "Waiting for client")
	c := startCmd(ctx, "perf", "write_bw", "-d", "127.0.0.2", "-p", port, "-n", "100", "-s", "8192", "--pcap", path, "127.0.0.1")
	err := errors.Join(c.wait(t), s.wait(t))
	if errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("UDP port %d was taken meanwhile: %v", wire.UDPPort, err)
	}
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, c.out.String(), s.out.String())
	}
	if !strings.Contains(c.out.String(), "\n 8192       100  ") {
		t.Errorf("client output:\n%s", c.out.String())
	}
	checkPcap(t, path, "127.0.0.2", "127.0.0.1", defaultSnapLen)
}
