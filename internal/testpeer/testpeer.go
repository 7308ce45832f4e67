// Package testpeer is another process for tests of the NIC reaching a
// program's memory (the verbs device): the test binary runs itself again
// as a peer holding a region of memory, tells its address, and answers
// requests to show or fill parts of it. A test package calls Serve from a
// test function of its own (which the peer runs) and Start from its
// tests.
package testpeer

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"
)

// Len is the size of the peer's region.
const Len = 1 << 20

// Byte is the peer's initial byte at offset i of its region.
func Byte(i int) byte { return byte(i*7 + 3) }

const env = "RNIC_TESTPEER"

// Serve is the peer's body when the test binary runs as a peer (Start's
// environment), and skips t otherwise: a region filled with Byte, its
// address printed ("addr N"), then Loop.
func Serve(t *testing.T) {
	if !IsPeer() {
		return // not a test: the peer process the tests that reach another process's memory start
	}
	buf := Region()
	fmt.Printf("addr %d\n", Address(buf))
	Loop(buf)
}

// IsPeer reports whether this process runs as a peer.
func IsPeer() bool { return os.Getenv(env) == "1" }

// Region returns a new region of Len bytes filled with Byte.
func Region() []byte {
	buf := make([]byte, Len)
	for i := range buf {
		buf[i] = Byte(i)
	}
	return buf
}

// Address returns buf's address in this process.
func Address(buf []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&buf[0]))) }

// Loop answers "dump OFF N" with the hex of those bytes of buf until
// stdin closes, then exits the process.
func Loop(buf []byte) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var off, n int
		if _, err := fmt.Sscanf(in.Text(), "dump %d %d", &off, &n); err != nil || off < 0 || n < 0 || off+n > len(buf) {
			fmt.Println("?")
			continue
		}
		fmt.Println(hex.EncodeToString(buf[off : off+n]))
	}
	os.Exit(0) // nothing of the test framework's on stdout after this
}

// Peer is a running peer.
type Peer struct {
	Cmd  *exec.Cmd
	Addr uint64 // its region's address in its address space
	Line string // the first line it printed (it begins "addr N")
	in   io.WriteCloser
	out  *bufio.Reader
}

// Start runs the test binary as a peer whose body is the test function
// named serve (which calls Serve, or prints "addr N ..." and calls Loop),
// with the extra environment variables env; the peer is killed when t
// ends.
func Start(t testing.TB, serve string, extraEnv ...string) *Peer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+serve+"$")
	cmd.Env = append(append(os.Environ(), env+"=1"), extraEnv...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Peer{Cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	if _, err := fmt.Sscanf(line, "addr %d", &p.Addr); err != nil {
		t.Fatalf("peer said %q", line)
	}
	p.Line = strings.TrimSpace(line)
	return p
}

// Pid returns the peer's process id.
func (p *Peer) Pid() int { return p.Cmd.Process.Pid }

// Dump returns n bytes of the peer's region at off, as the peer reads
// them.
func (p *Peer) Dump(t testing.TB, off, n int) []byte {
	t.Helper()
	fmt.Fprintf(p.in, "dump %d %d\n", off, n)
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("peer said %q", line)
	}
	return b
}

// Exit ends the peer and waits for it.
func (p *Peer) Exit() {
	p.in.Close()
	p.Cmd.Wait()
}

// Stdin is the peer's standard input, for requests of the test's own.
func (p *Peer) Stdin() io.Writer { return p.in }

// ReadLine returns the peer's next line of output.
func (p *Peer) ReadLine(t testing.TB) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	return strings.TrimSpace(line)
}
