package hostif

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Client is a program's side of the host interface: what the verbs
// library (the provider) does, in Go, for tests and for Go programs in
// other processes.
type Client struct {
	c   *net.UnixConn
	seq uint32
	out []byte
	in  []byte
	oob []byte
	fds []int
}

// probe is this process's probe word (ProbeWord), which Hello names.
var probe = ProbeWord

// Hello fills a Hello request: the protocol version, and where this
// process holds ProbeWord.
func Hello(m *Msg) { m.U32(Version).U64(uint64(uintptr(unsafe.Pointer(&probe)))) }

// Dial connects to the NIC serving the host interface at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return &Client{c: c, out: make([]byte, 0, MaxMsg), in: make([]byte, MaxMsg+1), oob: make([]byte, unix.CmsgSpace(4*8))}, nil
}

// Close ends the connection: the NIC tears down what the program held.
func (c *Client) Close() error { return c.c.Close() }

// Call sends a request of op with the fields fill appends, and returns a
// Reader over the reply's fields; a reply with an errno is returned as
// that syscall.Errno.
func (c *Client) Call(op Op, fill func(*Msg)) (*Reader, error) {
	c.seq++
	m := NewMsg(c.out, Header{Op: op, Seq: c.seq})
	if fill != nil {
		fill(m)
	}
	b, err := m.Done()
	if err != nil {
		return nil, err
	}
	if _, err := c.c.Write(b); err != nil {
		return nil, err
	}
	n, oobn, _, _, err := c.c.ReadMsgUnix(c.in, c.oob)
	if err != nil {
		return nil, err
	}
	c.fds = c.fds[:0]
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(c.oob[:oobn])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil {
				c.fds = append(c.fds, fds...)
			}
		}
	}
	h, r, err := Parse(c.in[:n])
	if err != nil {
		return nil, err
	}
	if h.Op != op || h.Seq != c.seq {
		return nil, fmt.Errorf("%w: reply %v seq %d to %v seq %d", ErrMalformed, h.Op, h.Seq, op, c.seq)
	}
	if h.Errno != 0 {
		return nil, syscall.Errno(h.Errno)
	}
	return r, nil
}

// FDs returns the descriptors the last reply carried (the caller owns
// them).
func (c *Client) FDs() []int { return c.fds }
