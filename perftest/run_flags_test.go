package perftest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
)

// counter returns a counter of a run's device.
func counter(res *Result, name string) uint64 {
	if res == nil {
		return 0
	}
	for _, c := range res.Counters {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// TestRunDuplex runs the bandwidth tests with -b: both sides move data
// (their devices both received requests), both run the same number of
// messages, and both print the same line, the sum of the two sides'
// reports, after exchanging them.
func TestRunDuplex(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		rx   string // the counter of requests each side received
	}{
		{"write_bw", func(c *Config) { c.Test, c.Size, c.Iters = WriteBW, 2500, 200 }, "rx_write_requests"},
		// -a with -b is in TestExchangeSteps: 8 MiB each way at once
		// overflows link/mem's receive queues today (issue 9, item 4).
		{"write_bw q2", func(c *Config) { c.Test, c.Size, c.Iters, c.QPs = WriteBW, 65536, 50, 2 }, "rx_write_requests"},
		{"read_bw", func(c *Config) { c.Test, c.Size, c.Iters = ReadBW, 2500, 100 }, "rx_read_requests"},
		{"atomic_bw", func(c *Config) { c.Test, c.Iters = AtomicBW, 100 }, "rx_atomic_requests"},
		{"send_bw", func(c *Config) { c.Test, c.Size, c.Iters = SendBW, 2500, 200 }, "rx_send_requests"},
		{"send_bw UD q2", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn, c.QPs = SendBW, 512, 200, rnic.UD, 2 }, "rx_send_requests"},
		{"send_bw -D", func(c *Config) { c.Test, c.Size, c.Duration = SendBW, 2500, 2 }, "rx_send_requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(WriteBW)
			cfg.Duplex = true
			tt.cfg(&cfg)
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			for _, sd := range []*side{srv, cli} {
				if !strings.Contains(sd.out.String(), " Bidirectional BW Test\n") || !strings.Contains(sd.out.String(), " TX depth ") {
					t.Errorf("output lacks the bidirectional title or the TX depth:\n%s", sd.out.String())
				}
				if counter(sd.res, tt.rx) == 0 {
					t.Errorf("%s: no %s: the side did not receive traffic", sd.res.Device, tt.rx)
				}
			}
			if len(srv.res.BW) == 0 || len(srv.res.BW) != len(cli.res.BW) {
				t.Fatalf("server printed %d lines, client %d", len(srv.res.BW), len(cli.res.BW))
			}
			for i := range cli.res.BW {
				s, c := srv.res.BW[i], cli.res.BW[i]
				if cfg.Duration > 0 {
					// A SEND -D run prints each side's own report.
					if !(s.BWAvg > 0 && c.BWAvg > 0) {
						t.Errorf("line %d: server %+v client %+v", i, s, c)
					}
					continue
				}
				if s != c || !(c.BWAvg > 0) || c.Iters != uint64(cfg.Iters*max(cfg.QPs, 1)) {
					t.Errorf("line %d: server printed %+v, client %+v: want the same sum of both sides", i, s, c)
				}
			}
		})
	}
}

// TestRunPostList runs -l: each post list rings one doorbell, and the
// CQ moderation is the list's size.
func TestRunPostList(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"write_bw -l 8", func(c *Config) { c.Test, c.Size, c.Iters, c.PostList = WriteBW, 64, 400, 8 }},
		{"write_bw -l 8 -Q 4 q2", func(c *Config) { c.Test, c.Size, c.Iters, c.PostList, c.CQMod, c.QPs = WriteBW, 64, 400, 8, 4, 2 }},
		{"send_bw -l 4", func(c *Config) { c.Test, c.Size, c.Iters, c.PostList = SendBW, 64, 400, 4 }},
		{"read_bw -l 16 -b", func(c *Config) { c.Test, c.Size, c.Iters, c.PostList, c.Duplex = ReadBW, 64, 400, 16, true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(WriteBW)
			tt.cfg(&cfg)
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			out := cli.out.String()
			if !strings.Contains(out, "Post List BW Test") || !strings.Contains(out, " Post List       : "+strconv.Itoa(cfg.PostList)+"\n") {
				t.Errorf("output lacks the post list's lines:\n%s", out)
			}
			if cfg.CQMod == 0 && !strings.Contains(out, "Post List requested - CQ moderation will be the size of the post list") {
				t.Errorf("no CQ moderation note:\n%s", out)
			}
			lists := uint64(cfg.Iters / cfg.PostList * max(cfg.QPs, 1))
			if d := counter(cli.res, "doorbells"); d != lists {
				t.Errorf("client rang %d doorbells for %d post lists", d, lists)
			}
			if cli.res.BW[0].Iters != uint64(cfg.Iters*max(cfg.QPs, 1)) || srv.res.BW[0].Iters == 0 {
				t.Errorf("reports %+v / %+v", cli.res.BW[0], srv.res.BW[0])
			}
		})
	}
}

// TestRunEvents runs the tests that take -e: the completions come through
// the CQs' completion channels, and the test says so.
func TestRunEvents(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"read_bw", func(c *Config) { c.Test, c.Size, c.Iters = ReadBW, 2500, 100 }},
		{"send_bw", func(c *Config) { c.Test, c.Size, c.Iters = SendBW, 2500, 100 }},
		{"send_bw -b", func(c *Config) { c.Test, c.Size, c.Iters, c.Duplex = SendBW, 2500, 100, true }},
		{"atomic_bw", func(c *Config) { c.Test, c.Iters = AtomicBW, 100 }},
		{"read_lat", func(c *Config) { c.Test, c.Size, c.Iters = ReadLat, 64, 50 }},
		{"send_lat", func(c *Config) { c.Test, c.Size, c.Iters = SendLat, 64, 50 }},
		{"send_lat UD", func(c *Config) { c.Test, c.Size, c.Iters, c.Conn = SendLat, 64, 50, rnic.UD }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(WriteBW)
			cfg.Events = true
			tt.cfg(&cfg)
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			if !cfg.Duplex {
				checkPair(t, cfg, srv, cli)
			}
			if !strings.Contains(cli.out.String(), " Test with events. Using rnic_10.0.0.2_comp0\n") {
				t.Errorf("no events line:\n%s", cli.out.String())
			}
		})
	}
}

// TestRunLatencySamples runs -U and -H: every sample printed as perftest
// prints it, unsorted and sorted (the slowest two left out), then the
// table's header again and the report line.
func TestRunLatencySamples(t *testing.T) {
	const n = 30
	cfg := NewConfig(ReadLat)
	cfg.Iters, cfg.Size, cfg.Unsorted, cfg.Histogram = n, 64, true, true
	_, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
	out := cli.out.String()
	parts := strings.Split(out, "#, usec\n")
	if len(parts) != 3 {
		t.Fatalf("want two sample lists:\n%s", out)
	}
	parse := func(block string) []float64 {
		var v []float64
		for i, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
			num, val, ok := strings.Cut(line, ", ")
			if !ok || num != strconv.Itoa(i+1) {
				break
			}
			f, err := strconv.ParseFloat(val, 64)
			if err != nil {
				t.Fatalf("sample %q: %v", line, err)
			}
			v = append(v, f)
		}
		return v
	}
	unsorted := parse(parts[1])
	tail := parts[2]
	sorted := parse(tail)
	if len(unsorted) != n-1 || len(sorted) != n-1-latMeasureTail {
		t.Fatalf("%d unsorted and %d sorted samples, want %d and %d:\n%s", len(unsorted), len(sorted), n-1, n-3, out)
	}
	for i := 1; i < len(sorted); i++ {
		if sorted[i] < sorted[i-1] {
			t.Fatalf("sorted samples out of order at %d: %v", i, sorted)
		}
	}
	r := cli.res.Lat[0]
	if got, _ := strconv.ParseFloat(cG(r.Min), 64); sorted[0] != got {
		t.Errorf("first sorted sample %v, report's minimum %v", sorted[0], r.Min)
	}
	if !strings.Contains(tail, resultLine+resultFmtLat) || len(parseLat(t, tail[strings.Index(tail, resultLine):])) != 1 {
		t.Errorf("after the samples, the header and one line:\n%s", tail)
	}
	for _, v := range []float64{0.5, 1.234567, 12.3456789, 100000, 1234567, 0.00012345, 3, 27.6875} {
		want := map[float64]string{0.5: "0.5", 1.234567: "1.23457", 12.3456789: "12.3457", 100000: "100000", 1234567: "1.23457e+06", 0.00012345: "0.00012345", 3: "3", 27.6875: "27.6875"}[v]
		if got := cG(v); got != want {
			t.Errorf("cG(%v) = %q, C's %%g prints %q", v, got, want)
		}
	}
}

// sniffOpener is memOpener with every frame a device sends seen by fn.
func sniffOpener(t *testing.T, fn sniff.Func) func(netip.Addr) (*rnic.Device, error) {
	sw := mem.NewSwitch()
	return func(a netip.Addr) (*rnic.Device, error) {
		port, err := sw.Port(a, mem.Faults{})
		if err != nil {
			return nil, err
		}
		dev, err := rnic.Open(rnic.Options{Link: sniff.New(port, sniff.Options{Func: fn}), Name: "rnic_" + a.String()})
		if err != nil {
			port.Close()
		}
		return dev, err
	}
}

// TestRunTrafficClass runs --tclass: the traffic class is the IP TOS of
// every frame either side sends (requests and ACKs: both sides set it).
func TestRunTrafficClass(t *testing.T) {
	for _, test := range []Test{WriteBW, SendLat} {
		var mu sync.Mutex
		tos := map[uint8]int{}
		open := sniffOpener(t, func(dir sniff.Direction, _ time.Time, f []byte) {
			if dir == sniff.TX {
				mu.Lock()
				tos[wire.IPv4(f).TOS()]++
				mu.Unlock()
			}
		})
		cfg := NewConfig(test)
		cfg.Size, cfg.Iters, cfg.TrafficClass, cfg.SL = 1024, 50, 0x68, 3
		if test == SendLat {
			cfg.Conn = rnic.UD
		}
		runPair(t, cfg, open, memSrv, memCli)
		mu.Lock()
		if len(tos) != 1 || tos[0x68] == 0 {
			t.Errorf("%v: IP TOS of the frames sent: %v, want all 0x68", test, tos)
		}
		mu.Unlock()
	}
}

// TestConnectSLTrafficClass checks that -S and --tclass reach the QP's
// address vector (ibv_modify_qp's ah_attr.sl and grh.traffic_class), and
// the UD address handle.
func TestConnectSLTrafficClass(t *testing.T) {
	open := memOpener(t)
	for _, conn := range []rnic.QPType{rnic.RC, rnic.UD} {
		cfg := NewConfig(SendBW)
		cfg.Open, cfg.Conn, cfg.SL, cfg.TrafficClass, cfg.Size = open, conn, 5, 0x20, 64
		p, err := cfg.resolve()
		if err != nil {
			t.Fatal(err)
		}
		devA, _ := open(netip.MustParseAddr("10.0.1.1"))
		devB, _ := open(netip.MustParseAddr("10.0.1.2"))
		p.mtu = devA.Attr().ActiveMTU
		ra, err := newResources(p, devA)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := newResources(p, devB)
		if err != nil {
			t.Fatal(err)
		}
		ra.qps[0].rem, rb.qps[0].rem = rb.qps[0].my, ra.qps[0].my
		if err := ra.connect(); err != nil {
			t.Fatal(err)
		}
		if conn == rnic.RC {
			a, _, err := ra.qps[0].qp.Query()
			if err != nil {
				t.Fatal(err)
			}
			if a.AH.SL != 5 || a.AH.TrafficClass != 0x20 || a.AH.HopLimit != 0xFF {
				t.Errorf("RC QP's address vector %+v, want SL 5, traffic class 0x20, hop limit 255", a.AH)
			}
		} else if ra.qps[0].ah == nil {
			t.Error("no UD address handle")
		}
		devA.Close()
		devB.Close()
	}
}

// TestRunInfinitely runs --run_infinitely with a report every second for
// a few seconds: the sender prints a line per period (send_bw's receiver
// too) until the run is stopped.
func TestRunInfinitely(t *testing.T) {
	for _, test := range []Test{WriteBW, SendBW} {
		t.Run(test.String(), func(t *testing.T) {
			cfg := NewConfig(test)
			cfg.Size, cfg.RunInfinitely, cfg.Duration, cfg.Timeout = 1024, true, 1, 5*time.Second
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			open := memOpener(t)
			ctx, cancel := context.WithCancel(context.Background())
			srv, cli := &side{}, &side{}
			sc, cc := cfg, cfg
			sc.Listener, sc.Local, sc.Out, sc.Open = ln, memSrv, &syncBuffer{}, open
			cc.Peer, cc.Port, cc.Local, cc.Out, cc.Open = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port, memCli, &syncBuffer{}, open
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); srv.res, srv.err = Run(ctx, sc) }()
			go func() { defer wg.Done(); cli.res, cli.err = Run(ctx, cc) }()
			deadline := time.Now().Add(20 * time.Second)
			for len(cc.Out.(*syncBuffer).lines(" 1024 ")) < 3 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			lines := cc.Out.(*syncBuffer).lines(" 1024 ")
			if len(lines) < 3 {
				t.Fatalf("client printed %d report lines:\n%s", len(lines), cc.Out.(*syncBuffer).String())
			}
			if !errors.Is(cli.err, context.Canceled) {
				t.Errorf("client ended with %v, want context.Canceled", cli.err)
			}
			for _, l := range lines {
				f := strings.Fields(l)
				if v, _ := strconv.ParseFloat(f[3], 64); len(f) != 5 || f[2] != "0.00" || !(v > 0) {
					t.Errorf("report line %q: want no peak and an average", l)
				}
			}
			if test == SendBW && len(sc.Out.(*syncBuffer).lines(" 1024 ")) < 2 {
				t.Errorf("send_bw's server printed no reports:\n%s", sc.Out.(*syncBuffer).String())
			}
		})
	}
}

// lines returns the output's lines that start with prefix.
func (s *syncBuffer) lines(prefix string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestRunOutJSON runs --out_json: the file is JSON, holds perftest's keys,
// and its numbers are those of the last line printed.
func TestRunOutJSON(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  func(*Config)
		keys []string
	}{
		{"write_bw", func(c *Config) { c.Test, c.Size, c.Iters = WriteBW, 4096, 100 }, []string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}},
		{"send_bw -b -l 2", func(c *Config) { c.Test, c.Size, c.Iters, c.Duplex, c.PostList = SendBW, 512, 100, true, 2 }, []string{"MsgSize", "BW_average"}},
		{"read_lat", func(c *Config) { c.Test, c.Size, c.Iters = ReadLat, 64, 50 }, []string{"MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "percentile_99", "percentile_99.9"}},
		{"write_lat -D", func(c *Config) { c.Test, c.Size, c.Duration = WriteLat, 64, 2 }, []string{"MsgSize", "n_iterations", "t_avg", "tps_average"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := NewConfig(WriteBW)
			cfg.OutJSON = true
			tt.cfg(&cfg)
			_, cli := startPair(t, cfg, memOpener(t), memSrv, memCli, func(sc, cc *Config) {
				sc.OutJSONFile, cc.OutJSONFile = filepath.Join(dir, "srv.json"), filepath.Join(dir, "cli.json")
			})
			if cli.err != nil {
				t.Fatal(cli.err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "cli.json"))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Info    map[string]any     `json:"test_info"`
				Results map[string]float64 `json:"results"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b)
			}
			for _, k := range append([]string{"test", "Device", "Number_of_qps", "Connection_type", "Mtu", "Link_type", "GID_index", "Data_ex_method"}, tt.keys...) {
				_, info := doc.Info[k]
				_, res := doc.Results[k]
				if !info && !res {
					t.Errorf("no %q in:\n%s", k, b)
				}
			}
			if doc.Info["Device"] != "rnic_10.0.0.2" || doc.Results["MsgSize"] != float64(cfg.Size) {
				t.Errorf("device %v, size %v:\n%s", doc.Info["Device"], doc.Results["MsgSize"], b)
			}
			if cfg.Test.Kind() == BW {
				r := cli.res.BW[len(cli.res.BW)-1]
				if doc.Results["n_iterations"] != float64(r.Iters) || strconv.FormatFloat(doc.Results["BW_average"], 'f', 2, 64) != strconv.FormatFloat(r.BWAvg, 'f', 2, 64) {
					t.Errorf("results %v, the line printed %+v", doc.Results, r)
				}
			} else if r := cli.res.Lat[0]; strconv.FormatFloat(doc.Results["t_avg"], 'f', 2, 64) != strconv.FormatFloat(r.Avg, 'f', 2, 64) {
				t.Errorf("results %v, the line printed %+v", doc.Results, r)
			}
		})
	}
}

// TestRunMRPerQP checks both buffer layouts: one region for all QPs (one
// rkey, QP i reached at BUFF_SIZE·(qps+i)) or one per QP (--mr_per_qp).
func TestRunMRPerQP(t *testing.T) {
	for _, per := range []bool{false, true} {
		cfg := NewConfig(WriteBW)
		cfg.Size, cfg.Iters, cfg.QPs, cfg.MRPerQP = 8192, 50, 3, per
		_, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
		d := cli.res.Local
		keys := map[uint32]bool{}
		for _, q := range d {
			keys[q.RKey] = true
		}
		if per && len(keys) != 3 || !per && len(keys) != 1 {
			t.Errorf("--mr_per_qp=%v: %d rkeys among 3 QPs", per, len(keys))
		}
		if !per && (d[1].VAddr-d[0].VAddr != 8192 || d[2].VAddr-d[1].VAddr != 8192) {
			t.Errorf("shared region: remote parts at %#x %#x %#x, want BUFF_SIZE apart", d[0].VAddr, d[1].VAddr, d[2].VAddr)
		}
	}
}

// TestRunCPUUtil runs --cpu_util with -D: the table and the lines have
// the CPU column.
func TestRunCPUUtil(t *testing.T) {
	cfg := NewConfig(WriteBW)
	cfg.Size, cfg.Duration, cfg.CPUUtil = 64, 2, true
	_, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
	out := cli.out.String()
	m := regexp.MustCompile(`(?m)^ 64 .*\t    ([0-9.]+)\n`).FindStringSubmatch(out)
	if !strings.Contains(out, "MsgRate[Mpps]    CPU_Util[%]\n") || m == nil {
		t.Fatalf("no CPU column:\n%s", out)
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v < 0 || v > 100 {
		t.Errorf("CPU utilization %v%%", v)
	}
}

// TestCPUUtil checks the computation from /proc/stat's first line.
func TestCPUUtil(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	old := procStat
	procStat = path
	defer func() { procStat = old }()
	c := &cpuUtil{on: true}
	os.WriteFile(path, []byte("cpu  100 5 7 900 3 0 0\ncpu0 1 2 3 4\n"), 0o600)
	c.read(0)
	os.WriteFile(path, []byte("cpu  130 5 9 970 3 0 0\n"), 0o600)
	c.read(1)
	if got := c.percent(); got < 29.99 || got > 30.01 { // 30 user of 30+70
		t.Errorf("utilization %v, want 30", got)
	}
}

// TestRunRateLimit runs the software rate limiter: 2000 messages per
// second in bursts of 10, so 200 messages take 19 gaps of 5 ms; and the
// default type (HW) falls back to it with perftest's message.
func TestRunRateLimit(t *testing.T) {
	cfg := NewConfig(WriteBW)
	cfg.Size, cfg.Iters, cfg.RateLimit, cfg.RateUnits, cfg.RateLimitType, cfg.BurstSize = 64, 200, 2000, RatePps, RateLimitSW, 10
	start := time.Now()
	_, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
	if el := time.Since(start); el < 95*time.Millisecond {
		t.Errorf("200 messages at 2000/s took %v", el)
	}
	// The first burst goes at once, so the fastest the limiter allows is
	// 200 messages in 95 ms: 0.002105 Mpps.
	if r := cli.res.BW[0]; r.MsgRate > 200/95e-3/1e6 {
		t.Errorf("message rate %v Mpps, above the 0.002 limit's 200 in 95 ms", r.MsgRate)
	}
	var errOut syncBuffer
	cfg.RateLimitType, cfg.RateUnits, cfg.RateLimit, cfg.BurstSize, cfg.Err = RateLimitDefault, RateGbps, 10, 0, &errOut
	runPair(t, cfg, memOpener(t), memSrv, memCli)
	if !strings.Contains(errOut.String(), "The QP failed to accept HW rate limit, providing SW rate limit") {
		t.Errorf("no fallback message: %q", errOut.String())
	}
}

// TestRunReversed runs --reversed: the TCP server's device sends and the
// TCP client's receives; the TCP client prints what write_bw's server
// prints (the sender's report) and read_lat's latencies are the TCP
// server's.
func TestRunReversed(t *testing.T) {
	for _, tt := range []struct {
		test Test
		rx   string
	}{{WriteBW, "rx_write_requests"}, {SendBW, "rx_send_requests"}, {ReadLat, "rx_read_requests"}, {WriteLat, "rx_write_requests"}} {
		t.Run(tt.test.String(), func(t *testing.T) {
			cfg := NewConfig(tt.test)
			cfg.Size, cfg.Iters, cfg.Reversed = 1024, 50, true
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			if tt.test.Kind() == BW && (counter(srv.res, tt.rx) != 0 || counter(cli.res, tt.rx) == 0) {
				t.Errorf("%s: TCP server %d, TCP client %d; want the TCP client to receive", tt.rx, counter(srv.res, tt.rx), counter(cli.res, tt.rx))
			}
			if tt.test == ReadLat && (len(srv.res.Lat) != 1 || len(cli.res.Lat) != 0 || counter(cli.res, tt.rx) == 0) {
				t.Errorf("read_lat: TCP server printed %d lines, TCP client %d", len(srv.res.Lat), len(cli.res.Lat))
			}
			if tt.test == WriteBW && (len(cli.res.BW) != 1 || cli.res.BW[0] != srv.res.BW[0]) {
				t.Errorf("write_bw: the TCP client printed %+v, the sender %+v", cli.res.BW, srv.res.BW)
			}
			if strings.Contains(srv.out.String(), "Waiting for client") || !strings.Contains(cli.out.String(), "Waiting for client") {
				t.Error("the banner belongs to the receiving side, the TCP client, as in perftest")
			}
		})
	}
}

// TestRunReportCounters runs -W: after the line, each counter's change.
func TestRunReportCounters(t *testing.T) {
	cfg := NewConfig(WriteBW)
	cfg.Size, cfg.Iters, cfg.ReportCounters = 4096, 100, "hw_counters/rx_write_requests,counters/port_rcv_packets,counters/port_rcv_data"
	srv, _ := runPair(t, cfg, memOpener(t), memSrv, memCli)
	out := srv.out.String()
	for _, want := range []string{"\thw_counters/rx_write_requests=100\n", "\tcounters/port_rcv_packets=100\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("server output lacks %q:\n%s", want, out)
		}
	}
	// 4-byte words: the payloads and the headers of 100 frames.
	m := regexp.MustCompile(`\tcounters/port_rcv_data=([0-9]+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no counters/port_rcv_data:\n%s", out)
	}
	if v, _ := strconv.Atoi(m[1]); v < 100*4096/4 || v > 100*4200/4 {
		t.Errorf("port_rcv_data=%d", v)
	}
	cfg.ReportCounters = "hw_counters/no_such"
	srvSide, _ := startPair(t, cfg, memOpener(t), memSrv, memCli)
	if srvSide.err == nil || !strings.Contains(srvSide.err.Error(), "no counter \"no_such\"") {
		t.Errorf("unknown counter: %v", srvSide.err)
	}
	cfg.ReportCounters = "counters/port_foo"
	if _, err := newCounterReport(cfg.ReportCounters); err == nil {
		t.Error("-W counters/port_foo accepted")
	}
}

// TestRunSizeMismatch runs read_lat -a against a server without -a, the
// README's old mistake: the client's error says what to do.
func TestRunSizeMismatch(t *testing.T) {
	cfg := NewConfig(ReadLat)
	cfg.Iters = 10
	_, cli := startPair(t, cfg, memOpener(t), memSrv, memCli, func(sc, cc *Config) { cc.All = true })
	if cli.err == nil || !strings.Contains(cli.err.Error(), "start both with the same (this side has -a)") {
		t.Errorf("client error: %v", cli.err)
	}
}
