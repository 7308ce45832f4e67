package perftest

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/sim/vclock"
)

// The perftest workloads in virtual time: both sides are threads of one
// rnic.VirtualClock, their devices timing models of a hardware profile,
// their exchange a Pipe of the clock. The same Config runs on the wall
// clock in the other tests of this package.

// runVirtual runs cfg as server and client on a clock of profile prof
// and returns both sides.
func runVirtual(t *testing.T, prof string, cfg Config) (srv, cli *side, clk *rnic.VirtualClock) {
	t.Helper()
	vc, err := vclock.New(vclock.Options{Profile: prof, Seed: 1, WatchWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	open := func(a netip.Addr) (*rnic.Device, error) { return rnic.Open(rnic.Options{Clock: vc, Addr: a}) }
	sa, ca := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	pa, pb := vc.Pipe()
	srv, cli = &side{}, &side{}
	sc, cc := cfg, cfg
	sc.Clock, sc.ExchangeConn, sc.Local, sc.Out, sc.Open = vc, pa, sa, &srv.out, open
	cc.Clock, cc.ExchangeConn, cc.Local, cc.Out, cc.Open, cc.Peer = vc, pb, ca, &cli.out, open, sa.String()
	err = vc.Run(func() {
		server := vc.Go(func() { srv.res, srv.err = Run(t.Context(), sc) })
		cli.res, cli.err = Run(t.Context(), cc)
		if err := server.Wait(); err != nil {
			t.Errorf("server thread: %v", err)
		}
	})
	if err != nil || srv.err != nil || cli.err != nil {
		t.Fatalf("clock: %v\nserver: %v\nclient: %v\nserver output:\n%s\nclient output:\n%s", err, srv.err, cli.err, srv.out.String(), cli.out.String())
	}
	return srv, cli, vc
}

// TestVirtualTime runs every test in virtual time on cx6: each finishes,
// reports what the profile's hardware would (a 64 KiB WRITE stream near
// the 100 Gb/s line, an 8-byte write_lat near the 1007 ns of `rnic sim
// --test write_lat --size 8`), and the same run twice prints the same
// report, byte for byte (PSNs and addresses included).
func TestVirtualTime(t *testing.T) {
	for _, tc := range []struct {
		test   Test
		size   int
		lo, hi float64 // Gb/s for bandwidth tests, µs (typical) for latency tests
	}{
		{WriteBW, 65536, 85, 100},
		{ReadBW, 65536, 85, 100},
		{SendBW, 65536, 85, 100},
		{AtomicBW, 8, 0.1, 2},
		{WriteLat, 8, 0.9, 1.1}, // rnic sim --test write_lat --size 8: 1007 ns through cx6's 300 ns switch
		{ReadLat, 8, 1.2, 2.5},
		{SendLat, 8, 0.8, 1.6},
	} {
		t.Run(tc.test.String(), func(t *testing.T) {
			cfg := NewConfig(tc.test)
			cfg.Size, cfg.Iters, cfg.ReportGbits = tc.size, 500, true
			srv, cli, vc := runVirtual(t, "cx6", cfg)
			var got float64
			if tc.test.Kind() == LAT {
				got = cli.res.Lat[0].Typical
			} else {
				got = cli.res.BW[0].BWAvg
			}
			if got < tc.lo || got > tc.hi {
				t.Errorf("%v %d B: %.3f, want %v..%v\nclient output:\n%s", tc.test, tc.size, got, tc.lo, tc.hi, cli.out.String())
			}
			t.Logf("%v %d B: %.3f after %v of virtual time", tc.test, tc.size, got, vc.Now())
			srv2, cli2, _ := runVirtual(t, "cx6", cfg)
			if srv.out.String() != srv2.out.String() || cli.out.String() != cli2.out.String() {
				t.Errorf("two runs differ:\n%s\n%s", cli.out.String(), cli2.out.String())
			}
		})
	}
}

// TestVirtualTimeRefuses: what needs the wall clock is refused, with the
// reason.
func TestVirtualTimeRefuses(t *testing.T) {
	vc, err := vclock.New(vclock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := vc.Pipe()
	open := func(netip.Addr) (*rnic.Device, error) { return nil, nil }
	base := NewConfig(SendBW)
	base.Clock, base.ExchangeConn, base.Local, base.Open = vc, a, netip.MustParseAddr("10.0.0.1"), open
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no-conn", func(c *Config) { c.ExchangeConn = nil }, "ExchangeConn"},
		{"no-local", func(c *Config) { c.Local = netip.Addr{} }, "Config.Local"},
		{"events", func(c *Config) { c.Events = true }, "-e"},
		{"duration", func(c *Config) { c.Duration = 2 }, "-D"},
		{"cpu-util", func(c *Config) { c.CPUUtil = true }, "--cpu_util"},
		{"rate-limit", func(c *Config) { c.RateLimit = 10 }, "--rate_limit"},
	} {
		cfg := base
		tc.mod(&cfg)
		var out bytes.Buffer
		cfg.Out = &out
		_, err := Run(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run = %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
