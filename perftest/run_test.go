package perftest

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// memOpener opens devices on ports of one in-process switch.
func memOpener(t *testing.T) func(netip.Addr) (*rnic.Device, error) {
	sw := mem.NewSwitch()
	return func(a netip.Addr) (*rnic.Device, error) {
		port, err := sw.Port(a, mem.Faults{})
		if err != nil {
			return nil, err
		}
		dev, err := rnic.Open(rnic.Options{Link: port, Name: "rnic_" + a.String()})
		if err != nil {
			port.Close()
		}
		return dev, err
	}
}

// side is the output and result of one side of a run.
type side struct {
	out bytes.Buffer
	res *Result
	err error
}

// runPair runs cfg as server and client against each other, through the
// TCP exchange on 127.0.0.1, and returns both sides; it fails the test if
// either side fails.
func runPair(t *testing.T, cfg Config, open func(netip.Addr) (*rnic.Device, error), srvAddr, cliAddr netip.Addr) (srv, cli *side) {
	t.Helper()
	srv, cli = startPair(t, cfg, open, srvAddr, cliAddr)
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v\nclient: %v\nserver output:\n%s\nclient output:\n%s", srv.err, cli.err, srv.out.String(), cli.out.String())
	}
	return srv, cli
}

// startPair runs the server (NIC srvAddr) and the client (NIC cliAddr)
// and returns both sides, errors included. mods may change either side's
// configuration.
func startPair(t testing.TB, cfg Config, open func(netip.Addr) (*rnic.Device, error), srvAddr, cliAddr netip.Addr, mods ...func(sc, cc *Config)) (srv, cli *side) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	srv, cli = &side{}, &side{}
	sc, cc := cfg, cfg
	sc.Listener, sc.Local, sc.Out, sc.Open = ln, srvAddr, &srv.out, open
	cc.Peer, cc.Port, cc.Local, cc.Out, cc.Open = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port, cliAddr, &cli.out, open
	for _, m := range mods {
		m(&sc, &cc)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	// No cancel when one side fails: the other must notice by itself
	// (the exchange connection closes), which the tests check this way.
	go func() {
		defer wg.Done()
		srv.res, srv.err = Run(ctx, sc)
	}()
	cli.res, cli.err = Run(ctx, cc)
	wg.Wait()
	return srv, cli
}

var (
	memSrv = netip.MustParseAddr("10.0.0.1")
	memCli = netip.MustParseAddr("10.0.0.2")
)

// TestRunPairs runs every test, server and client, over link/mem.
func TestRunPairs(t *testing.T) {
	type tc struct {
		name string
		cfg  func(*Config)
	}
	tests := []tc{
		{"write_bw", func(c *Config) { c.Test, c.Size, c.Iters = WriteBW, 2500, 50 }},
		{"write_bw_uc", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn = WriteBW, 2500, 50, rnic.UC }},
		{"write_bw_q4", func(c *Config) { c.Test, c.Size, c.Iters, c.QPs = WriteBW, 4096, 40, 4 }},
		{"write_bw_gbits", func(c *Config) { c.Test, c.Size, c.Iters, c.ReportGbits, c.MTU = WriteBW, 65536, 20, true, 1024 }},
		{"read_bw", func(c *Config) { c.Test, c.Size, c.Iters = ReadBW, 2500, 50 }},
		{"send_bw", func(c *Config) { c.Test, c.Size, c.Iters = SendBW, 2500, 50 }},
		{"send_bw_ud", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn = SendBW, 512, 50, rnic.UD }},
		{"send_bw_q2", func(c *Config) { c.Test, c.Size, c.Iters, c.QPs = SendBW, 1000, 30, 2 }},
		{"atomic_bw", func(c *Config) { c.Test, c.Iters = AtomicBW, 100 }},
		{"atomic_bw_cas", func(c *Config) { c.Test, c.Iters, c.Atomic = AtomicBW, 100, CmpAndSwap }},
		{"write_lat", func(c *Config) { c.Test, c.Size, c.Iters = WriteLat, 64, 50 }},
		{"read_lat", func(c *Config) { c.Test, c.Size, c.Iters = ReadLat, 64, 50 }},
		{"send_lat", func(c *Config) { c.Test, c.Size, c.Iters = SendLat, 64, 50 }},
		{"send_lat_ud", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn = SendLat, 64, 50, rnic.UD }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(WriteBW)
			tt.cfg(&cfg)
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			checkPair(t, cfg, srv, cli)
		})
	}
}

// checkPair checks that both outputs have perftest's shape and that the
// numbers are plausible.
func checkPair(t *testing.T, cfg Config, srv, cli *side) {
	t.Helper()
	cfg.Peer = "client" // the parameters in force on the client
	cfg.Open = func(netip.Addr) (*rnic.Device, error) { return nil, nil }
	p, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	for _, sd := range []*side{srv, cli} {
		out := sd.out.String()
		if !strings.Contains(out, cfg.Test.Verb().String()) || !strings.Contains(out, " local address: LID 0000 QPN 0x") ||
			strings.Count(out, " remote address: ") != p.QPs || !strings.HasSuffix(out, resultLine) {
			t.Errorf("output lacks perftest's lines:\n%s", out)
		}
		if len(sd.res.Local) != p.QPs || len(sd.res.Remote) != p.QPs {
			t.Errorf("result has %d local / %d remote QPs", len(sd.res.Local), len(sd.res.Remote))
		}
	}
	if !strings.HasPrefix(srv.out.String(), waitBanner) {
		t.Errorf("server output does not start with the banner")
	}
	// The QP information each side printed as remote is the other's local.
	for i := range srv.res.Local {
		if srv.res.Local[i] != cli.res.Remote[i] || cli.res.Local[i] != srv.res.Remote[i] {
			t.Errorf("QP %d: exchanged information differs", i)
		}
	}
	want := p.iters * p.QPs
	switch cfg.Test.Kind() {
	case BW:
		rows := parseBW(t, cli.out.String())
		if len(rows) != 1 || len(cli.res.BW) != 1 {
			t.Fatalf("client has %d rows", len(rows))
		}
		r := cli.res.BW[0]
		if r.Iters != uint64(want) || r.Size != uint64(p.Size) || !(r.BWAvg > 0) || !(r.MsgRate > 0) {
			t.Errorf("client report %+v", r)
		}
		if !p.noPeak && r.BWPeak < r.BWAvg*0.99 {
			t.Errorf("peak %v below average %v", r.BWPeak, r.BWAvg)
		}
		if rows[0][0] != float64(p.Size) || rows[0][1] != float64(want) {
			t.Errorf("printed row %v", rows[0])
		}
		srows := parseBW(t, srv.out.String())
		if len(srows) != 1 || srows[0][1] != float64(want) || !(srows[0][3] > 0) {
			t.Errorf("server rows %v", srows)
		}
	case LAT:
		rows := parseLat(t, cli.out.String())
		if len(rows) != 1 {
			t.Fatalf("client has %d latency rows:\n%s", len(rows), cli.out.String())
		}
		r := cli.res.Lat[0]
		if r.Iters != uint64(p.iters) || !(r.Min > 0) || r.Min > r.Typical || r.Typical > r.Max || r.Max > r.P99 ||
			r.Min > r.Avg || r.Avg > r.Max || r.Stdev < 0 {
			t.Errorf("client latency %+v", r)
		}
		if r.Max > 1e6 {
			t.Errorf("implausible latency %+v", r)
		}
		if n := len(parseLat(t, srv.out.String())); (cfg.Test == ReadLat) != (n == 0) {
			t.Errorf("server printed %d latency rows", n)
		}
	}
}

var numRe = regexp.MustCompile(`^\s*[0-9]`)

// parseBW returns the numbers of the bandwidth table's rows.
func parseBW(t *testing.T, out string) [][]float64 {
	if strings.Contains(out, resultFmtG) {
		return parseRows(t, out, resultFmtG, 5)
	}
	return parseRows(t, out, resultFmt, 5)
}

// parseLat returns the numbers of the latency table's rows.
func parseLat(t *testing.T, out string) [][]float64 {
	return parseRows(t, out, resultFmtLat, 9)
}

func parseRows(t *testing.T, out, header string, cols int) [][]float64 {
	t.Helper()
	i := strings.Index(out, header)
	if i < 0 {
		return nil
	}
	var rows [][]float64
	for _, line := range strings.Split(out[i+len(header):], "\n") {
		if !numRe.MatchString(line) {
			break
		}
		f := strings.Fields(line)
		if len(f) != cols {
			t.Fatalf("row %q has %d columns, want %d", line, len(f), cols)
		}
		row := make([]float64, cols)
		for k, s := range f {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("row %q: %v", line, err)
			}
			row[k] = v
		}
		rows = append(rows, row)
	}
	return rows
}
