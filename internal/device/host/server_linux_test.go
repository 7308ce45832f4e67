package host_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/device/host"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/internal/testpeer"
	"github.com/rnic/rnic/link/mem"
)

// TestHostPeer is the program of TestServeHost, another process: it
// connects to the NIC's host interface, says hello, registers its region
// (testpeer.Region) in a PD of its own at its own address, prints
// "addr A pd P lkey L", and answers dumps until stdin closes.
func TestHostPeer(t *testing.T) {
	if !testpeer.IsPeer() {
		return // not a test: the program process TestServeHost starts
	}
	fail := func(what string, err error) { fmt.Printf("error %s: %v\n", what, err); os.Exit(1) }
	c, err := hostif.Dial(os.Getenv("RNIC_HOST_SOCK"))
	if err != nil {
		fail("dial", err)
	}
	if _, err := c.Call(hostif.OpHello, hostif.Hello); err != nil {
		fail("hello", err)
	}
	r, err := c.Call(hostif.OpAllocPD, nil)
	if err != nil {
		fail("alloc pd", err)
	}
	pd := r.U32()
	buf := testpeer.Region()
	addr := testpeer.Address(buf)
	r, err = c.Call(hostif.OpRegMR, func(m *hostif.Msg) {
		m.U32(pd).U64(addr).U64(uint64(len(buf))).U64(addr).U32(uint32(rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead))
	})
	if err != nil {
		fail("reg mr", err)
	}
	_, lkey := r.U32(), r.U32()
	// And its whole address space: implicit on-demand paging.
	r, err = c.Call(hostif.OpRegMR, func(m *hostif.Msg) {
		m.U32(pd).U64(0).U64(math.MaxUint64).U64(0).U32(uint32(rnic.AccessLocalWrite|rnic.AccessRemoteRead) | 1<<6)
	})
	if err != nil {
		fail("reg mr implicit", err)
	}
	_, implicit := r.U32(), r.U32()
	fmt.Printf("addr %d pd %d lkey %d implicit %d\n", addr, pd, lkey, implicit)
	testpeer.Loop(buf)
}

// TestServeHost: a NIC serves another process's verbs over its host
// interface: the handshake and queries answer; the program's PD and MR
// are the program's (the NIC reads the program's memory through the MR,
// and another connection cannot name its handles); a malformed message
// ends only the sender's connection; and when the program is killed
// mid-session, its MR and PD are torn down.
func TestServeHost(t *testing.T) {
	sw := mem.NewSwitch()
	port, err := sw.Port(netip.MustParseAddr("10.9.0.1"), mem.Faults{})
	must0(t, err)
	dev := must(rnic.Open(rnic.Options{Link: port}))
	defer dev.Close()
	sock, stop := serve(t, dev)
	defer stop()

	// This process as a client: hello, queries, and a PD of its own.
	c := must(hostif.Dial(sock))
	defer c.Close()
	r := must(c.Call(hostif.OpHello, hostif.Hello))
	if v, name, access := r.U32(), string(r.Bytes()), r.U32(); r.End() != nil || v != hostif.Version || name != dev.Name() || access != 0 {
		t.Fatalf("hello: version %d name %q access %d (%v)", v, name, access, r.Err)
	}
	if _, err := c.Call(hostif.OpHello, func(m *hostif.Msg) { m.U32(99) }); !errors.Is(err, syscall.EPROTO) {
		t.Errorf("hello with version 99: %v, want EPROTO", err)
	}
	r = must(c.Call(hostif.OpQueryDevice, nil))
	maxMR, _ := r.U64(), r.U64()
	if maxQP := r.U32(); maxMR != dev.Attr().MaxMRSize || int(maxQP) != dev.Attr().MaxQP {
		t.Errorf("query device: max_mr_size %d max_qp %d, want %d %d", maxMR, maxQP, dev.Attr().MaxMRSize, dev.Attr().MaxQP)
	}
	r = must(c.Call(hostif.OpQueryGID, func(m *hostif.Msg) { m.U8(1).U32(1) }))
	if g := r.Fixed(16); !bytes.Equal(g, dev.GIDTable()[1].GID[:]) {
		t.Errorf("query gid 1: %x", g)
	}
	// An empty entry of the table is the zero GID; beyond gid_tbl_len, EINVAL.
	r = must(c.Call(hostif.OpQueryGID, func(m *hostif.Msg) { m.U8(1).U32(7) }))
	if g := r.Fixed(16); !bytes.Equal(g, make([]byte, 16)) {
		t.Errorf("query gid 7 (empty): %x, want zeros", g)
	}
	if _, err := c.Call(hostif.OpQueryGID, func(m *hostif.Msg) { m.U8(1).U32(uint32(dev.Attr().GIDTableLen)) }); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("query gid %d: %v, want EINVAL", dev.Attr().GIDTableLen, err)
	}
	if _, err := c.Call(hostif.Op(999), nil); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("unknown op: %v, want EOPNOTSUPP", err)
	}

	// Another process registers its memory; the NIC reads it through the
	// MR with the program's PD.
	peer := testpeer.Start(t, "TestHostPeer", "RNIC_HOST_SOCK="+sock)
	var pd, lkey, implicit uint32
	if _, err := fmt.Sscanf(peer.Line, "addr %d pd %d lkey %d implicit %d", new(uint64), &pd, &lkey, &implicit); err != nil {
		t.Fatalf("program said %q", peer.Line)
	}
	got, err := readThroughMR(dev, pd, lkey, peer.Addr+4096, 256)
	must0(t, err)
	for i, b := range got {
		if b != testpeer.Byte(4096+i) {
			t.Fatalf("byte %d through the program's MR: %#x, want %#x", i, b, testpeer.Byte(4096+i))
		}
	}
	// Through the implicit region, the same bytes at the same address:
	// every address of the program is its own IOVA.
	if got, err := readThroughMR(dev, pd, implicit, peer.Addr+4096, 256); err != nil || !slices.Equal(got, testpeer.Region()[4096:4096+256]) {
		t.Errorf("256 bytes at %#x through the implicit region: %v, %x", peer.Addr+4096, err, got[:min(8, len(got))])
	}
	// This client cannot name the program's PD (handles are per program).
	if _, err := c.Call(hostif.OpDeallocPD, func(m *hostif.Msg) { m.U32(pd) }); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("dealloc of another program's PD: %v, want EINVAL", err)
	}
	if _, err := readThroughMR(dev, pd+1000, lkey, peer.Addr, 8); err == nil {
		t.Error("the program's MR read under another PD")
	}

	// A malformed message ends its sender's connection only.
	bad := must(net.Dial("unixpacket", sock))
	bad.Write([]byte("not a message"))
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bad.Read(make([]byte, 64)); err == nil {
		t.Error("a malformed message got a reply")
	}
	bad.Close()
	if _, err := c.Call(hostif.OpQueryDevice, nil); err != nil {
		t.Errorf("after another connection's malformed message: %v", err)
	}

	// kill -9: the program's MR and PD go with it.
	peer.Cmd.Process.Kill()
	peer.Cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := readThroughMR(dev, pd, lkey, peer.Addr, 8); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed program's MR still translates")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHostOtherUIDPeer is the program of TestHostOtherUID, run as another
// user: it dials the NIC's socket and says hello, printing what happened.
func TestHostOtherUIDPeer(t *testing.T) {
	if os.Getenv("RNIC_OTHER_UID_SOCK") == "" {
		return // not a test: the program process TestHostOtherUID starts
	}
	c, err := hostif.Dial(os.Getenv("RNIC_OTHER_UID_SOCK"))
	if err != nil {
		fmt.Printf("dial: %v\n", err)
		os.Exit(0)
	}
	if _, err := c.Call(hostif.OpHello, hostif.Hello); err != nil {
		fmt.Printf("hello: %v\n", err)
		os.Exit(0)
	}
	fmt.Println("served")
	os.Exit(0)
}

// TestHostOtherUID: a program of another user reaches the NIC's socket
// (its permissions let it) and is refused: the connection closes before
// any reply, so it holds no object and reaches no memory.
func TestHostOtherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("skipped: running a process as another user needs root")
	}
	dir := nobodyDir(t)
	sw := mem.NewSwitch()
	port := must(sw.Port(netip.MustParseAddr("10.9.0.1"), mem.Faults{}))
	dev := must(rnic.Open(rnic.Options{Link: port}))
	defer dev.Close()
	sock := filepath.Join(dir, "rnic0.sock")
	ln, err := net.Listen("unixpacket", sock)
	must0(t, err)
	must0(t, os.Chmod(sock, 0o777))
	served := make(chan error, 1)
	go func() { served <- host.Serve(dev, ln) }()
	defer func() { ln.Close(); <-served }()

	out, err := runAsNobody(dir, "TestHostOtherUIDPeer", "RNIC_OTHER_UID_SOCK="+sock)
	if err != nil {
		t.Fatalf("the other user's program: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("hello: ")) || bytes.Contains(out, []byte("served")) {
		t.Fatalf("a program of uid 65534 was not refused at hello:\n%s", out)
	}
	t.Logf("uid 65534: %s", bytes.TrimSpace(out))
}

// TestHostNoAccessPeer is both processes of TestHostNoAccess, run as
// user nobody: with RNIC_NOACCESS_NIC it runs a NIC on that socket and
// then the program (this test again, with RNIC_NOACCESS_SOCK), printing
// what the program printed; the program says hello three ways.
func TestHostNoAccessPeer(t *testing.T) {
	if sock := os.Getenv("RNIC_NOACCESS_NIC"); sock != "" {
		sw := mem.NewSwitch()
		port := must(sw.Port(netip.MustParseAddr("10.9.0.1"), mem.Faults{}))
		dev := must(rnic.Open(rnic.Options{Link: port}))
		ln := must(net.Listen("unixpacket", sock))
		go host.Serve(dev, ln)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostNoAccessPeer$")
		cmd.Env = append(os.Environ(), "RNIC_NOACCESS_NIC=", "RNIC_NOACCESS_SOCK="+sock)
		out, err := cmd.CombinedOutput()
		fmt.Printf("%s", out)
		if err != nil {
			fmt.Printf("program: %v\n", err)
		}
		os.Exit(0)
	}
	sock := os.Getenv("RNIC_NOACCESS_SOCK")
	if sock == "" {
		return // not a test: the processes TestHostNoAccess starts
	}
	// hello says hello, and registers a page of this program's memory:
	// it prints what the NIC said of its access, and REG_MR's error.
	page := testpeer.Region()
	hello := func(what string, fill func(*hostif.Msg)) {
		c, err := hostif.Dial(sock)
		if err != nil {
			fmt.Printf("%s: dial: %v\n", what, err)
			return
		}
		defer c.Close()
		r, err := c.Call(hostif.OpHello, fill)
		if err != nil {
			fmt.Printf("%s: hello: %v\n", what, err)
			return
		}
		_, _, access := r.U32(), r.Bytes(), syscall.Errno(r.U32())
		r, err = c.Call(hostif.OpAllocPD, nil)
		if err != nil {
			fmt.Printf("%s: alloc pd: %v\n", what, err)
			return
		}
		pd, addr := r.U32(), testpeer.Address(page)
		_, err = c.Call(hostif.OpRegMR, func(m *hostif.Msg) {
			m.U32(pd).U64(addr).U64(uint64(len(page))).U64(addr).U32(uint32(rnic.AccessLocalWrite))
		})
		fmt.Printf("%s: access %d, reg mr %v\n", what, access, err)
	}
	// Not dumpable: the kernel refuses the NIC (another process without
	// CAP_SYS_PTRACE) this program's memory.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Printf("prctl: %v\n", err)
	}
	hello("not dumpable", hostif.Hello)
	unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	hello("dumpable", hostif.Hello)
	// A probe address where the program has no page, and one whose
	// bytes are not the probe word.
	hello("unmapped probe", func(m *hostif.Msg) { m.U32(hostif.Version).U64(8) })
	word := new(uint64)
	hello("wrong probe", func(m *hostif.Msg) { m.U32(hostif.Version).U64(uint64(uintptr(unsafe.Pointer(word)))) })
	os.Exit(0)
}

// TestHostNoAccess: a program whose memory the kernel does not let the
// NIC reach (here: not dumpable, the NIC another process of the same
// user without CAP_SYS_PTRACE — as Yama's ptrace_scope 1 refuses a NIC
// the program did not name) is told so at hello (access EACCES), and
// registering memory fails with EACCES, before any QP depends on the
// access; a hello whose probe address is not the probe word gets EFAULT
// so; a dumpable program is served.
func TestHostNoAccess(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("skipped: running the NIC and the program as another user (so that the NIC lacks CAP_SYS_PTRACE) needs root")
	}
	dir := nobodyDir(t)
	must0(t, os.Chmod(dir, 0o777)) // the NIC's socket goes in it
	out, err := runAsNobody(dir, "TestHostNoAccessPeer", "RNIC_NOACCESS_NIC="+filepath.Join(dir, "rnic0.sock"))
	if err != nil {
		t.Fatalf("the NIC's process: %v\n%s", err, out)
	}
	for _, want := range []string{
		fmt.Sprintf("not dumpable: access %d, reg mr %v", syscall.EACCES, syscall.EACCES),
		"dumpable: access 0, reg mr <nil>",
		fmt.Sprintf("unmapped probe: access %d, reg mr %v", syscall.EFAULT, syscall.EFAULT),
		fmt.Sprintf("wrong probe: access %d, reg mr %v", syscall.EFAULT, syscall.EFAULT),
	} {
		if !bytes.Contains(out, []byte(want+"\n")) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// nobodyDir makes a directory that user nobody may enter, holding a copy
// of the test binary (peer.test) that nobody may run.
func nobodyDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "rnic-nobody-")
	must0(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must0(t, os.Chmod(dir, 0o755))
	self, err := os.ReadFile(os.Args[0])
	must0(t, err)
	must0(t, os.WriteFile(filepath.Join(dir, "peer.test"), self, 0o755))
	return dir
}

// runAsNobody runs test of dir's peer.test as uid and gid 65534, with env
// added to this process's environment, and returns its output.
func runAsNobody(dir, test string, env ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(dir, "peer.test"), "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd.CombinedOutput()
}
