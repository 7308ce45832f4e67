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
// address printed, then "dump OFF N" answered with the hex of those
// bytes, until stdin closes.
func Serve(t *testing.T) {
	if os.Getenv(env) != "1" {
		t.Skip("the peer process of the tests that reach another process's memory")
	}
	buf := make([]byte, Len)
	for i := range buf {
		buf[i] = Byte(i)
	}
	fmt.Printf("addr %d\n", uintptr(unsafe.Pointer(&buf[0])))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var off, n int
		if _, err := fmt.Sscanf(in.Text(), "dump %d %d", &off, &n); err != nil || off < 0 || n < 0 || off+n > Len {
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
	in   io.WriteCloser
	out  *bufio.Reader
}

// Start runs the test binary as a peer whose body is the test function
// named serve (which calls Serve); the peer is killed when t ends.
func Start(t testing.TB, serve string) *Peer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+serve+"$")
	cmd.Env = append(os.Environ(), env+"=1")
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
