package perftest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/wire"
)

// TestRunAllSizes runs -a: one row per size from 2 B to 8 MiB on the
// client; write_bw's server prints the last one.
func TestRunAllSizes(t *testing.T) {
	tests := []struct {
		test  Test
		conn  rnic.QPType
		sizes int // 2 B … 8 MiB, or … the MTU (4096) for UD
	}{{WriteBW, rnic.RC, 23}, {SendBW, rnic.UD, 12}, {SendLat, rnic.RC, 23}}
	for _, tt := range tests {
		t.Run(tt.test.String()+"_"+tt.conn.String(), func(t *testing.T) {
			cfg := NewConfig(tt.test)
			cfg.All, cfg.Iters, cfg.Conn = true, 5, tt.conn
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			var sizes []int
			for _, r := range cli.res.BW {
				sizes = append(sizes, int(r.Size))
			}
			for _, r := range cli.res.Lat {
				sizes = append(sizes, r.Size)
			}
			if len(sizes) != tt.sizes || sizes[0] != 2 || sizes[tt.sizes-1] != 2<<(tt.sizes-1) {
				t.Errorf("client sizes %v", sizes)
			}
			for _, r := range append(cli.res.BW, srv.res.BW...) {
				if !(r.BWAvg > 0) || r.Iters != 5 {
					t.Errorf("row %+v", r)
				}
			}
			srows := len(srv.res.BW) + len(srv.res.Lat)
			if (tt.test == WriteBW && (srows != 1 || srv.res.BW[0].Size != 8<<20)) || (tt.test != WriteBW && srows != tt.sizes) {
				t.Errorf("server rows %+v %+v", srv.res.BW, srv.res.Lat)
			}
		})
	}
}

// TestRunDuration runs -D 2 (margin 0): the reports count what completed
// in the 2 s, and a progress line shows each second.
func TestRunDuration(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 2 s per test")
	}
	for _, test := range []Test{WriteBW, SendBW, WriteLat} {
		t.Run(test.String(), func(t *testing.T) {
			cfg := NewConfig(test)
			cfg.Duration, cfg.Margin, cfg.Size = 2, 0, 64
			var progress syncBuffer
			cfg.Err = &progress
			start := time.Now()
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			if d := time.Since(start); d < 2*time.Second || d > 10*time.Second {
				t.Errorf("run took %v", d)
			}
			switch test {
			case SendBW:
				for _, r := range []BWReport{cli.res.BW[0], srv.res.BW[0]} {
					if r.Iters < 100 || !(r.BWAvg > 0) {
						t.Errorf("report %+v", r)
					}
				}
			case WriteBW:
				r := cli.res.BW[0]
				if r.Iters < 100 || !(r.BWAvg > 0) || r.BWPeak != 0 {
					t.Errorf("client report %+v", r)
				}
				if srv.res.BW[0] != r {
					t.Errorf("server printed %+v, client measured %+v", srv.res.BW[0], r)
				}
			case WriteLat:
				r := cli.res.Lat[0]
				if !r.Duration || r.Iters < 100 || !(r.Avg > 0) || !(r.TPS > 0) {
					t.Errorf("client report %+v", r)
				}
				if !strings.Contains(cli.out.String(), resultFmtDur) {
					t.Errorf("no duration header:\n%s", cli.out.String())
				}
			}
			if !strings.Contains(progress.String(), "of 2 s") {
				t.Errorf("no progress line in %q", progress.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer both sides may write to.
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

// TestRunNoServer: a client without a server fails at once.
func TestRunNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := NewConfig(WriteBW)
	cfg.Peer, cfg.Port, cfg.Open = "127.0.0.1", port, memOpener(t)
	_, err = Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "couldn't connect to 127.0.0.1") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunServerCancel: a server waiting for a client stops when its
// context is cancelled.
func TestRunServerCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	cfg := NewConfig(WriteBW)
	cfg.Listener, cfg.Open = ln, memOpener(t)
	_, err = Run(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

// fakePeer speaks the exchange as a perftest peer would, up to and
// including n QP-info rounds, announcing a QP on addr, then stops.
func fakePeer(t *testing.T, c net.Conn, client bool, addr netip.Addr, n int) error {
	x := NewConn(context.Background(), c, client)
	x.Timeout = 5 * time.Second
	if _, err := x.ExchangeVersions(); err != nil {
		return err
	}
	if _, _, err := x.ExchangeSysData(4096, 64); err != nil {
		return err
	}
	if _, err := x.ExchangeMTU(wire.MTU1024); err != nil {
		return err
	}
	d := Dest{OutReads: 1, QPN: 0x11, PSN: 1, RKey: 0x100, VAddr: 0x1000, GID: wire.GIDFromAddr(addr)}
	for range n {
		if _, err := x.HandShake("qp", d); err != nil {
			return err
		}
	}
	return nil
}

// TestRunPeerUnreachable: the exchange succeeds but the peer's QP is on
// no NIC: the client's WRITEs are retried, then fail with a completion
// error instead of hanging.
func TestRunPeerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		err = fakePeer(t, c, false, netip.MustParseAddr("10.9.9.9"), 3)
		drain(c)
		done <- err
	}()
	cfg := NewConfig(WriteBW)
	cfg.Peer, cfg.Port, cfg.Open, cfg.Size, cfg.Iters = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port, memOpener(t), 64, 10
	cfg.Local = memCli
	start := time.Now()
	_, err = Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "completion with error") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	if err := <-done; err != nil {
		t.Errorf("fake server: %v", err)
	}
}

// TestRunClientVanishes: the client does the exchange and hangs up; the
// write_bw server, waiting for "finished", reports it.
func TestRunClientVanishes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		fakePeer(t, c, true, memCli, 3)
		c.Close()
	}()
	cfg := NewConfig(WriteBW)
	cfg.Listener, cfg.Open, cfg.Local = ln, memOpener(t), memSrv
	cfg.Timeout = 2 * time.Second
	var out bytes.Buffer
	cfg.Out = &out
	_, err = Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "client finished") || !strings.Contains(err.Error(), "peer closed the connection") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunBadGIDIndex: a GID index the device lacks is refused.
func TestRunBadGIDIndex(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		fakePeer(t, c, true, memCli, 0)
		drain(c)
	}()
	cfg := NewConfig(WriteBW)
	cfg.Listener, cfg.Open, cfg.Local, cfg.GIDIndex = ln, memOpener(t), memSrv, 3
	_, err = Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "-x 3") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunMTUAboveActive: -m above the port's MTU is refused.
func TestRunMTUAboveActive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		fakePeer(t, c, true, memCli, 0)
		drain(c)
	}()
	cfg := NewConfig(WriteBW)
	cfg.Listener, cfg.Local, cfg.MTU = ln, memSrv, 4096
	cfg.Open = func(a netip.Addr) (*rnic.Device, error) {
		port, err := mem.NewSwitch().Port(a, mem.Faults{})
		if err != nil {
			return nil, err
		}
		return rnic.Open(rnic.Options{Link: port, MTU: rnic.MTU1024})
	}
	_, err = Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "above the port's active MTU 1024") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunUDLoss: UD loses messages (here 30 % of the client's frames);
// the send_bw server, missing some for good, gives up after the timeout
// with a clear error, and the client is not left hanging.
func TestRunUDLoss(t *testing.T) {
	sw := mem.NewSwitch()
	open := func(a netip.Addr) (*rnic.Device, error) {
		f := mem.Faults{}
		if a == memCli {
			f = mem.Faults{Seed: 7, Loss: 0.3}
		}
		port, err := sw.Port(a, f)
		if err != nil {
			return nil, err
		}
		return rnic.Open(rnic.Options{Link: port})
	}
	cfg := NewConfig(SendBW)
	cfg.Conn, cfg.Size, cfg.Iters, cfg.Timeout = rnic.UD, 256, 50, 300*time.Millisecond
	start := time.Now()
	// The client, done sending, waits longer than the server.
	srv, cli := startPair(t, cfg, open, memSrv, memCli, func(_, cc *Config) { cc.Timeout = 10 * time.Second })
	if srv.err == nil || !strings.Contains(srv.err.Error(), "no message for 300ms") {
		t.Errorf("server: %v", srv.err)
	}
	if cli.err == nil || !strings.Contains(cli.err.Error(), "peer closed the connection") {
		t.Errorf("client: %v (the server gave up)\n%s", cli.err, cli.out.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}
