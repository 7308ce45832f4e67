package rnic

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Connection details in text and JSON, and their exchange over a
// net.Conn: what every RDMA program does before it can connect a QP
// (perftest over TCP port 18515, rc_pingpong, …). RDMA CM is the
// wire-standard way; this is the simple one.
//
// The text form is space-separated key=value pairs, numbers in hex
// (decimal, 0x, 0o and 0b are accepted), the GID as its usual string:
//
//	gid=::ffff:10.0.0.1 qpn=0x11 psn=0x123456
//	addr=0xc000100000 len=4096 rkey=0x1100
//
// JSON uses the same names, numbers as numbers, except a region's
// address, which is a "0x…" string: a 64-bit address does not survive a
// float64 JSON reader (JavaScript's) as a number.
//
// Unmarshalers require every field exactly once and check ranges (QPN and
// PSN are 24-bit, a region must not wrap around the address space);
// unknown keys are ignored, so that a later version can add some.

// RemoteRegion describes memory a peer may access with RDMA: Len bytes
// at its virtual address Addr, with remote key RKey (MR.Remote gives a
// region's). It is what a requester needs for SendWR.RemoteAddr and RKey.
type RemoteRegion struct {
	Addr uint64
	Len  uint64
	RKey uint32
}

// String returns the text form, "addr=0x… len=… rkey=0x…".
func (r RemoteRegion) String() string {
	return "addr=0x" + strconv.FormatUint(r.Addr, 16) + " len=" + strconv.FormatUint(r.Len, 10) +
		" rkey=0x" + strconv.FormatUint(uint64(r.RKey), 16)
}

// MarshalText implements encoding.TextMarshaler.
func (r RemoteRegion) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *RemoteRegion) UnmarshalText(b []byte) error {
	kv, err := parseKV(string(b), "addr", "len", "rkey")
	if err != nil {
		return fmt.Errorf("rnic: RemoteRegion: %w", err)
	}
	var v RemoteRegion
	if v.Addr, err = parseNum("addr", kv["addr"], 64); err != nil {
		return fmt.Errorf("rnic: RemoteRegion: %w", err)
	}
	if v.Len, err = parseNum("len", kv["len"], 64); err != nil {
		return fmt.Errorf("rnic: RemoteRegion: %w", err)
	}
	rkey, err := parseNum("rkey", kv["rkey"], 32)
	if err != nil {
		return fmt.Errorf("rnic: RemoteRegion: %w", err)
	}
	v.RKey = uint32(rkey)
	if err := v.check(); err != nil {
		return err
	}
	*r = v
	return nil
}

func (r RemoteRegion) check() error {
	if r.Len > 0 && r.Addr+(r.Len-1) < r.Addr {
		return fmt.Errorf("rnic: RemoteRegion: %d bytes at %#x wrap around the address space", r.Len, r.Addr)
	}
	return nil
}

// MarshalJSON implements json.Marshaler: {"addr":"0x…","len":…,"rkey":…}.
func (r RemoteRegion) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Addr string `json:"addr"`
		Len  uint64 `json:"len"`
		RKey uint32 `json:"rkey"`
	}{"0x" + strconv.FormatUint(r.Addr, 16), r.Len, r.RKey})
}

// UnmarshalJSON implements json.Unmarshaler. The address may also be a
// JSON number.
func (r *RemoteRegion) UnmarshalJSON(b []byte) error {
	var raw struct {
		Addr json.RawMessage `json:"addr"`
		Len  *uint64         `json:"len"`
		RKey *uint32         `json:"rkey"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("rnic: RemoteRegion: %w", err)
	}
	switch {
	case raw.Addr == nil:
		return errors.New("rnic: RemoteRegion: addr missing")
	case raw.Len == nil:
		return errors.New("rnic: RemoteRegion: len missing")
	case raw.RKey == nil:
		return errors.New("rnic: RemoteRegion: rkey missing")
	}
	v := RemoteRegion{Len: *raw.Len, RKey: *raw.RKey}
	var s string
	if err := json.Unmarshal(raw.Addr, &s); err == nil {
		if v.Addr, err = parseNum("addr", s, 64); err != nil {
			return fmt.Errorf("rnic: RemoteRegion: %w", err)
		}
	} else if err := json.Unmarshal(raw.Addr, &v.Addr); err != nil {
		return fmt.Errorf("rnic: RemoteRegion: addr %s is neither a string nor a 64-bit number", raw.Addr)
	}
	if err := v.check(); err != nil {
		return err
	}
	*r = v
	return nil
}

// String returns the text form, "gid=… qpn=0x… psn=0x…".
func (e Endpoint) String() string {
	return "gid=" + e.GID.String() + " qpn=0x" + strconv.FormatUint(uint64(e.QPN), 16) +
		" psn=0x" + strconv.FormatUint(uint64(e.PSN), 16)
}

// MarshalText implements encoding.TextMarshaler.
func (e Endpoint) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (e *Endpoint) UnmarshalText(b []byte) error {
	kv, err := parseKV(string(b), "gid", "qpn", "psn")
	if err != nil {
		return fmt.Errorf("rnic: Endpoint: %w", err)
	}
	var v Endpoint
	if v.GID, err = ParseGID(kv["gid"]); err != nil {
		return fmt.Errorf("rnic: Endpoint: gid: %w", err)
	}
	qpn, err := parseNum("qpn", kv["qpn"], 24)
	if err != nil {
		return fmt.Errorf("rnic: Endpoint: %w", err)
	}
	psn, err := parseNum("psn", kv["psn"], 24)
	if err != nil {
		return fmt.Errorf("rnic: Endpoint: %w", err)
	}
	v.QPN, v.PSN = uint32(qpn), PSN(psn)
	*e = v
	return nil
}

// MarshalJSON implements json.Marshaler: {"gid":"…","qpn":…,"psn":…}.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		GID GID    `json:"gid"`
		QPN uint32 `json:"qpn"`
		PSN uint32 `json:"psn"`
	}{e.GID, e.QPN, uint32(e.PSN)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (e *Endpoint) UnmarshalJSON(b []byte) error {
	var raw struct {
		GID *GID    `json:"gid"`
		QPN *uint32 `json:"qpn"`
		PSN *uint32 `json:"psn"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("rnic: Endpoint: %w", err)
	}
	switch {
	case raw.GID == nil:
		return errors.New("rnic: Endpoint: gid missing")
	case raw.QPN == nil:
		return errors.New("rnic: Endpoint: qpn missing")
	case raw.PSN == nil:
		return errors.New("rnic: Endpoint: psn missing")
	case *raw.QPN > 1<<24-1:
		return fmt.Errorf("rnic: Endpoint: qpn %#x exceeds 24 bits", *raw.QPN)
	case *raw.PSN > 1<<24-1:
		return fmt.Errorf("rnic: Endpoint: psn %#x exceeds 24 bits", *raw.PSN)
	}
	*e = Endpoint{GID: *raw.GID, QPN: *raw.QPN, PSN: PSN(*raw.PSN)}
	return nil
}

// parseKV splits "k=v k=v" into a map, requiring each of want exactly
// once.
func parseKV(s string, want ...string) (map[string]string, error) {
	kv := make(map[string]string, len(want))
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", f)
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("%s given twice", k)
		}
		kv[k] = v
	}
	for _, k := range want {
		if _, ok := kv[k]; !ok {
			return nil, fmt.Errorf("%s missing in %q", k, s)
		}
	}
	return kv, nil
}

// parseNum parses an unsigned number of at most bits bits.
func parseNum(name, s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a number", name, s)
	}
	if bits < 64 && v >= 1<<bits {
		return 0, fmt.Errorf("%s %#x exceeds %d bits", name, v, bits)
	}
	return v, nil
}

// PeerInfo is what two programs tell each other before RDMA: the QP to
// connect to, and the memory the peer may access.
type PeerInfo struct {
	Endpoint Endpoint       `json:"endpoint"`
	Regions  []RemoteRegion `json:"regions,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler; the endpoint is required.
func (p *PeerInfo) UnmarshalJSON(b []byte) error {
	var raw struct {
		Endpoint *Endpoint      `json:"endpoint"`
		Regions  []RemoteRegion `json:"regions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("rnic: PeerInfo: %w", err)
	}
	if raw.Endpoint == nil {
		return errors.New("rnic: PeerInfo: endpoint missing")
	}
	*p = PeerInfo{Endpoint: *raw.Endpoint, Regions: raw.Regions}
	return nil
}

// MaxPeerInfoBytes bounds the message Exchange accepts from a peer (about
// 1500 regions): a peer cannot make it allocate more.
const MaxPeerInfoBytes = 64 << 10

// exchangeMagic starts every Exchange message, followed by the JSON's
// length (4 bytes, big-endian) and the JSON.
const exchangeMagic = "rnX1"

// Exchange sends mine to the peer at the other end of c and returns what
// the peer sent: both sides call it, in either order (it writes and reads
// at once, so even an unbuffered net.Pipe cannot deadlock). ctx bounds
// it: its deadline becomes c's, and cancelling it interrupts the exchange.
// A message longer than MaxPeerInfoBytes, or one that does not parse, is
// an error. Exchange reads exactly the peer's message and nothing after
// it, and clears c's deadline before it returns, so c remains usable; it
// does not close c. After an error, where the stream stands is unknown:
// close c.
func Exchange(ctx context.Context, c net.Conn, mine PeerInfo) (PeerInfo, error) {
	body, err := json.Marshal(mine)
	if err != nil {
		return PeerInfo{}, fmt.Errorf("rnic: Exchange: %w", err)
	}
	if len(body) > MaxPeerInfoBytes {
		return PeerInfo{}, fmt.Errorf("rnic: Exchange: %d bytes to send exceed %d (%d regions)", len(body), MaxPeerInfoBytes, len(mine.Regions))
	}
	if err := ctx.Err(); err != nil {
		return PeerInfo{}, fmt.Errorf("rnic: Exchange: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	// Cancellation interrupts both directions by moving the deadline into
	// the past.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	msg := make([]byte, 0, 8+len(body))
	msg = append(msg, exchangeMagic...)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(body)))
	msg = append(msg, body...)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		wrote <- err
	}()
	theirs, rerr := readPeerInfo(c)
	if rerr != nil {
		c.SetDeadline(time.Unix(1, 0)) // unblock the writer
	}
	werr := <-wrote
	stop()
	c.SetDeadline(time.Time{})
	if ctx.Err() != nil {
		return PeerInfo{}, fmt.Errorf("rnic: Exchange: %w", ctx.Err())
	}
	// A timeout is ctx's deadline, which c had, passing a moment before
	// ctx noticed (a writer interrupted after a failed read reports one
	// too, but the read's error comes first).
	_, hasDeadline := ctx.Deadline()
	for _, e := range []struct {
		err  error
		what string
	}{{rerr, "reading the peer's details"}, {werr, "sending ours"}} {
		if e.err == nil {
			continue
		}
		if hasDeadline && errors.Is(e.err, os.ErrDeadlineExceeded) {
			return PeerInfo{}, fmt.Errorf("rnic: Exchange: %s: %w", e.what, context.DeadlineExceeded)
		}
		return PeerInfo{}, fmt.Errorf("rnic: Exchange: %s: %w", e.what, e.err)
	}
	return theirs, nil
}

func readPeerInfo(r io.Reader) (PeerInfo, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return PeerInfo{}, err
	}
	if string(hdr[:4]) != exchangeMagic {
		return PeerInfo{}, fmt.Errorf("the peer does not speak rnic's exchange (it sent %q)", hdr[:])
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n > MaxPeerInfoBytes {
		return PeerInfo{}, fmt.Errorf("the peer's message of %d bytes exceeds %d", n, MaxPeerInfoBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return PeerInfo{}, err
	}
	var p PeerInfo
	if err := json.Unmarshal(body, &p); err != nil {
		return PeerInfo{}, err
	}
	return p, nil
}
