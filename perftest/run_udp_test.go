package perftest

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

var (
	udpSrv = netip.MustParseAddr("127.0.0.1")
	udpCli = netip.MustParseAddr("127.0.0.2")
)

// udpOpener opens devices on real UDP sockets, port 4791.
func udpOpener(a netip.Addr) (*rnic.Device, error) {
	l, err := udp.Open(udp.Options{Addr: a})
	if err != nil {
		return nil, err
	}
	dev, err := rnic.Open(rnic.Options{Link: l, Name: "rnic_" + a.String()})
	if err != nil {
		l.Close()
	}
	return dev, err
}

// udpPortFree reports whether UDP port 4791 can be bound on a.
func udpPortFree(a netip.Addr) bool {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, wire.UDPPort)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// skipIfPortTaken skips when UDP port 4791 is busy on the test addresses
// (another test process may hold it: the NIC always sends to 4791).
func skipIfPortTaken(t *testing.T) {
	t.Helper()
	if !udpPortFree(udpSrv) || !udpPortFree(udpCli) {
		t.Skipf("UDP port %d is taken on %v or %v; skipping the test over link/udp", wire.UDPPort, udpSrv, udpCli)
	}
}

// TestRunPairsUDP runs every test over link/udp: the server's NIC on
// 127.0.0.1, the client's on 127.0.0.2, both on UDP port 4791, with the
// exchange on TCP.
func TestRunPairsUDP(t *testing.T) {
	skipIfPortTaken(t)
	tests := []struct {
		name string
		cfg  func(*Config)
	}{
		{"write_bw", func(c *Config) { c.Test, c.Size, c.Iters = WriteBW, 65536, 200 }},
		{"read_bw", func(c *Config) { c.Test, c.Size, c.Iters = ReadBW, 2500, 100 }},
		{"send_bw", func(c *Config) { c.Test, c.Size, c.Iters = SendBW, 2500, 100 }},
		{"atomic_bw", func(c *Config) { c.Test, c.Iters = AtomicBW, 100 }},
		{"write_lat", func(c *Config) { c.Test, c.Size, c.Iters = WriteLat, 64, 100 }},
		{"read_lat", func(c *Config) { c.Test, c.Size, c.Iters = ReadLat, 64, 100 }},
		{"send_lat", func(c *Config) { c.Test, c.Size, c.Iters = SendLat, 64, 100 }},
		{"write_bw UC q2", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn, c.QPs = WriteBW, 4096, 100, rnic.UC, 2 }},
		{"send_bw UD", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn = SendBW, 1024, 100, rnic.UD }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(WriteBW)
			tt.cfg(&cfg)
			srv, cli := runPairUDP(t, cfg)
			checkPair(t, cfg, srv, cli)
		})
	}
}

// runPairUDP is runPair over link/udp; it skips when a NIC cannot bind
// port 4791 because another process took it meanwhile.
func runPairUDP(t *testing.T, cfg Config) (srv, cli *side) {
	t.Helper()
	srv, cli = startPair(t, cfg, udpOpener, udpSrv, udpCli)
	if errors.Is(srv.err, syscall.EADDRINUSE) || errors.Is(cli.err, syscall.EADDRINUSE) {
		t.Skipf("UDP port %d was taken meanwhile: %v / %v", wire.UDPPort, srv.err, cli.err)
	}
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v\nclient: %v\nserver output:\n%s\nclient output:\n%s", srv.err, cli.err, srv.out.String(), cli.out.String())
	}
	return srv, cli
}

// TestRunFlagsUDP runs the flags that change what goes on the wire or
// into the exchange over link/udp, the way they meet a real perftest:
// -b, --reversed, --tclass (the IP TOS of every frame either NIC sends,
// as a capture of the link shows what the wire carried), -e and -l.
func TestRunFlagsUDP(t *testing.T) {
	skipIfPortTaken(t)
	tests := []struct {
		name string
		cfg  func(*Config)
		tos  uint8
	}{
		{"write_bw -b", func(c *Config) { c.Test, c.Size, c.Iters, c.Duplex = WriteBW, 65536, 200, true }, 0},
		{"send_bw -b", func(c *Config) { c.Test, c.Size, c.Iters, c.Duplex = SendBW, 4096, 200, true }, 0},
		{"read_bw --reversed", func(c *Config) { c.Test, c.Size, c.Iters, c.Reversed = ReadBW, 4096, 100, true }, 0},
		{"write_lat --tclass", func(c *Config) { c.Test, c.Size, c.Iters, c.TrafficClass = WriteLat, 64, 100, 0x68 }, 0x68},
		{"send_bw UD --tclass -e", func(c *Config) {
			c.Test, c.Size, c.Iters, c.Conn, c.TrafficClass, c.Events = SendBW, 1024, 100, rnic.UD, 0xb8, true
		}, 0xb8},
		{"write_bw -l 8", func(c *Config) { c.Test, c.Size, c.Iters, c.PostList = WriteBW, 1024, 200, 8 }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			tos := map[uint8]int{}
			open := func(a netip.Addr) (*rnic.Device, error) {
				l, err := udp.Open(udp.Options{Addr: a})
				if err != nil {
					return nil, err
				}
				s := sniff.New(l, sniff.Options{Func: func(dir sniff.Direction, _ time.Time, f []byte) {
					mu.Lock()
					tos[wire.IPv4(f).TOS()]++
					mu.Unlock()
				}})
				dev, err := rnic.Open(rnic.Options{Link: s, Name: "rnic_" + a.String()})
				if err != nil {
					l.Close()
				}
				return dev, err
			}
			cfg := NewConfig(WriteBW)
			tt.cfg(&cfg)
			srv, cli := startPair(t, cfg, open, udpSrv, udpCli)
			if errors.Is(srv.err, syscall.EADDRINUSE) || errors.Is(cli.err, syscall.EADDRINUSE) {
				t.Skipf("UDP port %d was taken meanwhile", wire.UDPPort)
			}
			if srv.err != nil || cli.err != nil {
				t.Fatalf("server: %v\nclient: %v\n%s\n%s", srv.err, cli.err, srv.out.String(), cli.out.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(tos) != 1 || tos[tt.tos] == 0 {
				t.Errorf("IP TOS of the frames sent and received: %v, want all %#x", tos, tt.tos)
			}
			if cfg.Duplex && (counter(srv.res, "rx_packets") == 0 || srv.res.BW[0] != cli.res.BW[0]) {
				t.Errorf("-b: server %+v, client %+v", srv.res.BW, cli.res.BW)
			}
		})
	}
}
