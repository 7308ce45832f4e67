package perftest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic/wire"
)

// captured is one TCP payload of perftest-oob.txt.
type captured struct {
	fromClient bool
	data       []byte
}

// loadCapture reads the payloads of the real ib_write_bw exchange
// (client 198.18.0.12, server 198.18.0.11).
func loadCapture(t *testing.T) []captured {
	t.Helper()
	f, err := os.Open("testdata/perftest-oob.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []captured
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 4 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		b, err := hex.DecodeString(fields[3])
		if err != nil {
			t.Fatalf("bad hex in %q: %v", sc.Text(), err)
		}
		out = append(out, captured{fields[1] == "198.18.0.12", b})
	}
	if len(out) != 30 {
		t.Fatalf("capture has %d payloads, want 30", len(out))
	}
	return out
}

// TestDestGolden parses the captured QP-info messages, checks their
// fields against the ib_write_bw logs, and re-encodes them byte for byte.
func TestDestGolden(t *testing.T) {
	msgs := loadCapture(t)
	tests := []struct {
		msg  []byte
		want Dest
	}{
		{msgs[8].data, Dest{OutReads: 1, QPN: 0x11, PSN: 0xaa6746, RKey: 0x2dd, VAddr: 0x563ada716000,
			GID: wire.GIDFromAddr(netip.MustParseAddr("198.18.0.12"))}},
		{msgs[9].data, Dest{OutReads: 1, QPN: 0x11, PSN: 0xad0421, RKey: 0x2b7, VAddr: 0x5609d6922000,
			GID: wire.GIDFromAddr(netip.MustParseAddr("198.18.0.11"))}},
	}
	for _, tt := range tests {
		d, err := ParseDest(tt.msg)
		if err != nil {
			t.Fatal(err)
		}
		if d != tt.want {
			t.Errorf("ParseDest = %+v, want %+v", d, tt.want)
		}
		if got := d.Marshal(); !bytes.Equal(got, tt.msg) {
			t.Errorf("Marshal:\n got %q\nwant %q", got, tt.msg)
		}
	}
}

// TestReportGolden decodes the client's captured bw report (ib_write_bw
// -s 2500 -n 8: 2500 B, 8 iterations, 0.38 / 0.31 MB/s, 0.000129 Mpps).
func TestReportGolden(t *testing.T) {
	msgs := loadCapture(t)
	var raw []byte
	for _, m := range msgs[16:26] {
		if m.fromClient {
			raw = append(raw, m.data...)
		}
	}
	a, b := tcpPair(t)
	srv := NewConn(context.Background(), b, false)
	go func() {
		a.Write(raw)
		drain(a)
	}()
	rep, err := srv.ExchangeReport(BWReport{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Size != 2500 || rep.Iters != 8 || fmt.Sprintf("%.2f", rep.BWPeak) != "0.38" ||
		fmt.Sprintf("%.2f", rep.BWAvg) != "0.31" || fmt.Sprintf("%.6f", rep.MsgRate) != "0.000129" {
		t.Errorf("report = %+v", rep)
	}
}

// TestClientReplay runs this package's client side against the captured
// server bytes and checks that every byte it sends equals the real
// ib_write_bw client's.
func TestClientReplay(t *testing.T) {
	msgs := loadCapture(t)
	myDest, _ := ParseDest(msgs[8].data)
	report := reportFromCapture(t, msgs)
	replay(t, msgs, true, func(x *Conn) error {
		return clientScript(x, myDest, report)
	})
}

// TestServerReplay runs the server side against the captured client
// bytes. The real server's bw-report answers are uninitialized memory;
// ours are zeros, so those five steps are not compared.
func TestServerReplay(t *testing.T) {
	msgs := loadCapture(t)
	myDest, _ := ParseDest(msgs[9].data)
	var got BWReport
	replay(t, msgs, false, func(x *Conn) error {
		var err error
		got, err = serverScript(x, myDest)
		return err
	})
	if got.Size != 2500 || got.Iters != 8 {
		t.Errorf("server got report %+v", got)
	}
}

// clientScript is ib_write_bw's client side of the exchange, as Run does it.
func clientScript(x *Conn, my Dest, rep BWReport) error {
	if _, err := x.ExchangeVersions(); err != nil {
		return err
	}
	if _, _, err := x.ExchangeSysData(4096, 64); err != nil {
		return err
	}
	if _, err := x.ExchangeMTU(wire.MTU1024); err != nil {
		return err
	}
	for range 4 {
		if _, err := x.HandShake("qp", my); err != nil {
			return err
		}
	}
	if _, err := x.ExchangeReport(rep); err != nil {
		return err
	}
	return x.CloseExchange(my)
}

// serverScript is ib_write_bw's server side.
func serverScript(x *Conn, my Dest) (BWReport, error) {
	if _, err := x.ExchangeVersions(); err != nil {
		return BWReport{}, err
	}
	if _, _, err := x.ExchangeSysData(4096, 64); err != nil {
		return BWReport{}, err
	}
	if _, err := x.ExchangeMTU(wire.MTU1024); err != nil {
		return BWReport{}, err
	}
	for range 4 {
		if _, err := x.HandShake("qp", my); err != nil {
			return BWReport{}, err
		}
	}
	rep, err := x.ExchangeReport(BWReport{})
	if err != nil {
		return rep, err
	}
	return rep, x.CloseExchange(my)
}

func reportFromCapture(t *testing.T, msgs []captured) BWReport {
	t.Helper()
	var raw []byte
	for _, m := range msgs[16:26] {
		if m.fromClient {
			raw = append(raw, m.data...)
		}
	}
	var u [5]uint64
	for i := range u {
		for _, c := range raw[8*i : 8*i+8] {
			u[i] = u[i]<<8 | uint64(c)
		}
	}
	f := math.Float64frombits
	return BWReport{u[0], u[1], f(u[2]), f(u[3]), f(u[4])}
}

// replay plays the other side of the capture against fn's Conn over a
// pipe: it sends the captured bytes of the other side and compares what
// fn's side sends with the captured bytes of this side.
func replay(t *testing.T, msgs []captured, client bool, fn func(x *Conn) error) {
	t.Helper()
	a, b := tcpPair(t)
	x := NewConn(context.Background(), a, client)
	x.Timeout = 5 * time.Second
	errc := make(chan error, 1)
	go func() { errc <- fn(x); a.Close() }()
	for i, m := range msgs {
		if m.fromClient == client { // ours: compare
			got := make([]byte, len(m.data))
			b.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := readAll(b, got); err != nil {
				t.Fatalf("payload %d: %v (side error: %v)", i, err, <-errc)
			}
			isReport := len(m.data) == 8
			if !bytes.Equal(got, m.data) && !(isReport && !client) {
				t.Errorf("payload %d: sent %x, perftest sent %x", i, got, m.data)
			}
			continue
		}
		b.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := b.Write(m.data); err != nil {
			t.Fatalf("payload %d: %v (side error: %v)", i, err, <-errc)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func readAll(c net.Conn, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := c.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestExchangeRoundTrip runs both sides of every step against each other.
func TestExchangeRoundTrip(t *testing.T) {
	a, b := tcpPair(t)
	cli, srv := NewConn(context.Background(), a, true), NewConn(context.Background(), b, false)
	defer cli.Close()
	defer srv.Close()
	dc := Dest{LID: 1, OutReads: 16, QPN: 0x123456, PSN: 0xabcdef, RKey: 0xdeadbeef, VAddr: 0xc000123000, GID: wire.GIDFromAddr(netip.MustParseAddr("127.0.0.2")), SRQN: 7}
	ds := Dest{QPN: 0x11, PSN: 1, RKey: 2, VAddr: 3, GID: wire.GIDFromAddr(netip.MustParseAddr("::1"))}
	repC := BWReport{Size: 65536, Iters: 5000, BWPeak: 1234.5, BWAvg: 1000.25, MsgRate: 0.016}
	type result struct {
		ver        string
		cyc, cache int
		mtu        wire.MTU
		dest       Dest
		rep        BWReport
		err        error
	}
	run := func(x *Conn, cyc, cache int, mtu wire.MTU, my Dest, rep BWReport) (r result) {
		if r.ver, r.err = x.ExchangeVersions(); r.err != nil {
			return
		}
		if r.cyc, r.cache, r.err = x.ExchangeSysData(cyc, cache); r.err != nil {
			return
		}
		if r.mtu, r.err = x.ExchangeMTU(mtu); r.err != nil {
			return
		}
		if r.dest, r.err = x.HandShake("qp", my); r.err != nil {
			return
		}
		if r.rep, r.err = x.ExchangeReport(rep); r.err != nil {
			return
		}
		r.err = x.CloseExchange(my)
		return
	}
	sc := make(chan result)
	go func() { sc <- run(srv, 8192, 128, wire.MTU4096, ds, BWReport{}) }()
	rc := run(cli, 4096, 64, wire.MTU1024, dc, repC)
	rs := <-sc
	if rc.err != nil || rs.err != nil {
		t.Fatalf("client: %v, server: %v", rc.err, rs.err)
	}
	if rc.ver != Version || rs.ver != Version {
		t.Errorf("versions %q %q", rc.ver, rs.ver)
	}
	if rc.cyc != 8192 || rc.cache != 128 || rs.cyc != 4096 || rs.cache != 64 {
		t.Errorf("sys data: client got %d/%d, server got %d/%d", rc.cyc, rc.cache, rs.cyc, rs.cache)
	}
	if rc.mtu != wire.MTU4096 || rs.mtu != wire.MTU1024 {
		t.Errorf("MTUs: client got %v, server got %v", rc.mtu, rs.mtu)
	}
	if rc.dest != ds || rs.dest != dc {
		t.Errorf("dests: client got %+v, server got %+v", rc.dest, rs.dest)
	}
	if rs.rep != repC {
		t.Errorf("server got report %+v, want %+v", rs.rep, repC)
	}
}

// TestExchangeMalformed feeds the server side bad or short input: every
// case must fail with an error naming the problem, quickly.
func TestExchangeMalformed(t *testing.T) {
	ver := func(s string) []byte { b := make([]byte, 16); copy(b, s); return b }
	good := ver(Version)
	sys := []byte{0, 0, 0x10, 0, 0, 0, 0, 0x40}
	okDest := (&Dest{QPN: 1}).Marshal()
	garbled := bytes.Clone(okDest)
	garbled[7] = 'z'
	tests := []struct {
		name  string
		input []byte
		close bool // close after input; otherwise stall (timeout)
		want  string
	}{
		{"empty", nil, true, "peer closed the connection after 0 of 16 bytes"},
		{"short version", []byte("6.0"), true, "after 3 of 16 bytes"},
		{"stalled version", []byte("6.0"), false, "no answer within"},
		{"garbage version", ver("hello"), true, "not a perftest version"},
		{"old version", ver("5.60"), true, "older than 5.70"},
		{"bad cycle buffer", append(bytes.Clone(good), 0xff, 0xff, 0xff, 0xff), true, "peer sent -1"},
		{"bad MTU", cat(good, sys, []byte("9\x00")), true, `peer sent "9\x00"`},
		{"MTU not terminated", cat(good, sys, []byte("33")), true, "not an ibv_mtu number"},
		{"garbage QP info", cat(good, sys, []byte("3\x00"), bytes.Repeat([]byte{'x'}, DestSize)), true, "NUL-terminated"},
		{"bad hex in QP info", cat(good, sys, []byte("3\x00"), garbled), true, "is not hexadecimal"},
		{"truncated QP info", cat(good, sys, []byte("3\x00"), okDest[:50]), false, "no answer within"},
		{"bad done", cat(good, sys, []byte("3\x00"), okDest, okDest, []byte("nope\x00")), true, `peer sent "nope\x00"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tcpPair(t)
			srv := NewConn(context.Background(), b, false)
			srv.Timeout = 100 * time.Millisecond
			defer srv.Close()
			go func() {
				a.Write(tt.input)
				if tt.close {
					a.(*net.TCPConn).CloseWrite() // EOF for the server, which may still write
				}
			}()
			go drain(a)
			start := time.Now()
			err := func() error {
				if _, err := srv.ExchangeVersions(); err != nil {
					return err
				}
				if _, _, err := srv.ExchangeSysData(4096, 64); err != nil {
					return err
				}
				if _, err := srv.ExchangeMTU(wire.MTU1024); err != nil {
					return err
				}
				if _, err := srv.HandShake("qp", Dest{}); err != nil {
					return err
				}
				return srv.CloseExchange(Dest{})
			}()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			var xe *ExchangeError
			if !errors.As(err, &xe) {
				t.Errorf("err %T is not an *ExchangeError", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestExchangeCancel checks that cancelling the context ends a wait at
// once, even with Alive saying the peer is busy.
func TestExchangeCancel(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	srv := NewConn(ctx, b, false)
	srv.Timeout = 20 * time.Millisecond
	srv.Alive = func() bool { return true }
	defer srv.Close()
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := srv.HandShake("finish", Dest{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestAliveExtendsWait checks that Alive keeps a slow step going.
func TestAliveExtendsWait(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	srv := NewConn(context.Background(), b, false)
	srv.Timeout = 20 * time.Millisecond
	calls := 0
	srv.Alive = func() bool { calls++; return true }
	defer srv.Close()
	go func() {
		time.Sleep(150 * time.Millisecond)
		a.Write((&Dest{QPN: 5}).Marshal())
		drain(a)
	}()
	d, err := srv.HandShake("finish", Dest{})
	if err != nil || d.QPN != 5 {
		t.Fatalf("HandShake = %+v, %v", d, err)
	}
	if calls == 0 {
		t.Error("Alive was never asked")
	}
}

func drain(c net.Conn) {
	buf := make([]byte, 256)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// tcpPair returns both ends of a loopback TCP connection (buffered,
// unlike net.Pipe, as perftest's peers rely on); they are closed when the
// test ends.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
