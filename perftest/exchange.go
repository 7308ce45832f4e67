package perftest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rnic/rnic/wire"
)

// Version is the perftest version this package announces: that of
// perftest 4.5-0.17, whose exchange it reproduces.
const Version = "6.06"

// MinPeerVersion is the oldest peer perftest accepts
// (check_version_compatibility).
const MinPeerVersion = 5.70

// versionSize is the size of the version message (MAX_VERSION).
const versionSize = 16

// DefaultTimeout bounds each exchange step when Conn.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// ExchangeError says which step of the out-of-band exchange failed.
type ExchangeError struct {
	Step string
	Err  error
}

func (e *ExchangeError) Error() string { return "perftest exchange, " + e.Step + ": " + e.Err.Error() }
func (e *ExchangeError) Unwrap() error { return e.Err }

// Conn is one side of perftest's out-of-band exchange on a TCP connection
// (or any net.Conn). In every step the client writes first and then reads
// as many bytes as it wrote; the server reads, then writes.
type Conn struct {
	c      net.Conn
	client bool

	// Timeout bounds each read and write (DefaultTimeout if zero). A
	// read that times out fails unless it made progress or Alive says the
	// peer is busy.
	Timeout time.Duration

	// Alive, if set, is asked when a read has waited Timeout without a
	// byte: true (the test traffic is still moving) waits another Timeout.
	// The server uses it while the client runs the test.
	Alive func() bool

	ctx  context.Context
	stop func() bool // cancels the context watch
}

// NewConn wraps c. client says which side this is. Cancelling ctx makes
// every pending and later step fail at once.
func NewConn(ctx context.Context, c net.Conn, client bool) *Conn {
	x := &Conn{c: c, client: client, ctx: ctx}
	x.stop = context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return x
}

// Close closes the connection.
func (x *Conn) Close() error {
	x.stop()
	return x.c.Close()
}

// Client reports whether this is the client side.
func (x *Conn) Client() bool { return x.client }

// NetConn returns the underlying connection.
func (x *Conn) NetConn() net.Conn { return x.c }

func (x *Conn) timeout() time.Duration {
	if x.Timeout > 0 {
		return x.Timeout
	}
	return DefaultTimeout
}

// xchg sends mine and receives as many bytes, in the client's or the
// server's order.
func (x *Conn) xchg(step string, mine []byte) ([]byte, error) {
	theirs := make([]byte, len(mine))
	var err error
	if x.client {
		if err = x.write(mine); err == nil {
			err = x.read(theirs)
		}
	} else {
		if err = x.read(theirs); err == nil {
			err = x.write(mine)
		}
	}
	if err != nil {
		return nil, &ExchangeError{Step: step, Err: err}
	}
	return theirs, nil
}

func (x *Conn) write(p []byte) error {
	x.c.SetWriteDeadline(time.Now().Add(x.timeout()))
	_, err := x.c.Write(p)
	if err != nil && x.ctx.Err() != nil {
		return x.ctx.Err()
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("could not send %d bytes within %v", len(p), x.timeout())
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("peer closed the connection: %w", err)
	}
	return err
}

// read fills p, extending the deadline while bytes arrive or Alive says
// the peer is busy.
func (x *Conn) read(p []byte) error {
	n := 0
	for n < len(p) {
		x.c.SetReadDeadline(time.Now().Add(x.timeout()))
		k, err := x.c.Read(p[n:])
		n += k
		switch {
		case err == nil:
		case x.ctx.Err() != nil:
			return x.ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded):
			if k > 0 || (x.Alive != nil && x.Alive()) {
				continue
			}
			return fmt.Errorf("no answer within %v (%d of %d bytes received)", x.timeout(), n, len(p))
		case errors.Is(err, io.EOF):
			return fmt.Errorf("peer closed the connection after %d of %d bytes", n, len(p))
		case errors.Is(err, syscall.ECONNRESET):
			return fmt.Errorf("peer closed the connection (reset) after %d of %d bytes", n, len(p))
		default:
			return err
		}
	}
	return nil
}

// ExchangeVersions sends Version and returns the peer's version string.
// A peer older than MinPeerVersion, or one whose message is not a
// version, is an error.
func (x *Conn) ExchangeVersions() (string, error) {
	mine := make([]byte, versionSize)
	copy(mine, Version)
	theirs, err := x.xchg("version", mine)
	if err != nil {
		return "", err
	}
	s := string(theirs)
	if i := bytes.IndexByte(theirs, 0); i >= 0 {
		s = s[:i]
	}
	v, ok := parseVersion(s)
	if !ok {
		return "", &ExchangeError{"version", fmt.Errorf("peer sent %q, not a perftest version", theirs)}
	}
	if v < MinPeerVersion {
		return "", &ExchangeError{"version", fmt.Errorf("peer's perftest version %s is older than %.2f, which is not compatible", s, MinPeerVersion)}
	}
	return s, nil
}

// parseVersion reads the leading number of a version string as C's atof
// does ("6.06" → 6.06), requiring at least one digit.
func parseVersion(s string) (float64, bool) {
	end, dot := 0, false
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' && !dot) {
		dot = dot || s[end] == '.'
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	return v, err == nil
}

// ExchangeSysData exchanges the cycle buffer (page) size and the cache
// line size, 4 bytes big-endian each, and returns the peer's values
// (check_sys_data; the caller keeps the larger of each).
func (x *Conn) ExchangeSysData(cycleBuffer, cacheLine int) (remCycle, remCache int, err error) {
	r, err := x.xchgInt32("cycle buffer", cycleBuffer)
	if err != nil {
		return 0, 0, err
	}
	c, err := x.xchgInt32("cache line size", cacheLine)
	return r, c, err
}

func (x *Conn) xchgInt32(step string, v int) (int, error) {
	theirs, err := x.xchg(step, binary.BigEndian.AppendUint32(nil, uint32(v)))
	if err != nil {
		return 0, err
	}
	r := int(int32(binary.BigEndian.Uint32(theirs)))
	if r <= 0 || r > 1<<30 {
		return 0, &ExchangeError{step, fmt.Errorf("peer sent %d", r)}
	}
	return r, nil
}

// ExchangeMTU exchanges the MTU as "%d\0" of its ibv_mtu number (2 bytes)
// and returns the peer's (check_mtu; the smaller one is used).
func (x *Conn) ExchangeMTU(m wire.MTU) (wire.MTU, error) {
	theirs, err := x.xchg("MTU", []byte{'0' + byte(m), 0})
	if err != nil {
		return 0, err
	}
	r := wire.MTU(theirs[0] - '0')
	if theirs[1] != 0 || theirs[0] < '0' || r < wire.MTU256 || r > wire.MTU4096 {
		return 0, &ExchangeError{"MTU", fmt.Errorf("peer sent %q, not an ibv_mtu number 1-5", theirs)}
	}
	return r, nil
}

// HandShake exchanges one QP-info message (ctx_hand_shake).
func (x *Conn) HandShake(step string, my Dest) (Dest, error) {
	theirs, err := x.xchg(step, my.Marshal())
	if err != nil {
		return Dest{}, err
	}
	d, err := ParseDest(theirs)
	if err != nil {
		return Dest{}, &ExchangeError{step, err}
	}
	return d, nil
}

// done is the last message of each side (ctx_close_connection).
var done = []byte("done\x00")

// CloseExchange does perftest's close: one more QP-info message, then
// each side sends "done\0". perftest itself does not read the peer's
// "done"; this side does, to make sure the peer got to its end.
func (x *Conn) CloseExchange(my Dest) error {
	if _, err := x.HandShake("close", my); err != nil {
		return err
	}
	if err := x.write(done); err != nil {
		return &ExchangeError{"done", err}
	}
	got := make([]byte, len(done))
	if err := x.read(got); err != nil {
		return &ExchangeError{"done", err}
	}
	if !bytes.Equal(got, done) {
		return &ExchangeError{"done", fmt.Errorf("peer sent %q, want %q", got, done)}
	}
	return nil
}

// WaitPeerClose waits, at most Timeout, for the peer to close the
// connection, discarding anything it sends.
func (x *Conn) WaitPeerClose() {
	x.c.SetReadDeadline(time.Now().Add(x.timeout()))
	var b [64]byte
	for {
		if _, err := x.c.Read(b[:]); err != nil {
			return
		}
	}
}
