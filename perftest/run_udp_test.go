package perftest

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/rnic/rnic"
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
