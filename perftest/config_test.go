package perftest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rnic/rnic"
)

func noOpen(netip.Addr) (*rnic.Device, error) { return nil, nil }

// TestResolveDefaults checks perftest's defaults and dependencies for
// each test, as client.
func TestResolveDefaults(t *testing.T) {
	type want struct{ size, iters, tx, rx, cqMod, inline int }
	tests := []struct {
		name string
		cfg  func(*Config)
		want want
	}{
		{"write_bw", func(c *Config) {}, want{65536, 5000, 128, 1, 1, 0}}, // > 8 KiB: CQ moderation off
		{"write_bw -s 64", func(c *Config) { c.Size = 64 }, want{64, 5000, 128, 1, 100, 0}},
		{"write_bw -n 8", func(c *Config) { c.Size, c.Iters = 2500, 8 }, want{2500, 8, 8, 1, 8, 0}},
		{"write_bw -a", func(c *Config) { c.All = true }, want{maxSize, 5000, 128, 1, 100, 0}},
		{"write_bw -Q 4", func(c *Config) { c.CQMod = 4 }, want{65536, 5000, 128, 1, 4, 0}},
		{"read_bw", func(c *Config) { c.Test = ReadBW }, want{65536, 1000, 128, 1, 1, 0}},
		{"send_bw", func(c *Config) { c.Test, c.Size = SendBW, 2500 }, want{2500, 1000, 128, 512, 100, 0}},
		{"send_bw -n 7", func(c *Config) { c.Test, c.Iters = SendBW, 7 }, want{65536, 7, 7, 8, 1, 0}}, // odd rx depth + 1
		{"send_bw UD -D", func(c *Config) { c.Test, c.Conn, c.Duration = SendBW, rnic.UD, 10 }, want{65536, 0, 128, 512, 100, 0}},
		{"atomic_bw", func(c *Config) { c.Test = AtomicBW }, want{8, 1000, 128, 1, 100, 0}},
		{"write_lat", func(c *Config) { c.Test = WriteLat }, want{2, 1000, 1, 1, 1, 220}},
		{"send_lat", func(c *Config) { c.Test = SendLat }, want{2, 1000, 1, 512, 1, 236}},
		{"send_lat UD", func(c *Config) { c.Test, c.Conn = SendLat, rnic.UD }, want{2, 1000, 1, 1000, 1, 188}}, // UD: rx depth = iters
		{"send_lat -I 0", func(c *Config) { c.Test, c.Inline = SendLat, 0 }, want{2, 1000, 1, 512, 1, 0}},
		{"read_lat", func(c *Config) { c.Test = ReadLat }, want{2, 1000, 1, 1, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig(WriteBW)
			c.Peer, c.Open = "server", noOpen
			tt.cfg(&c)
			p, err := c.resolve()
			if err != nil {
				t.Fatal(err)
			}
			got := want{p.Size, p.iters, p.txDepth, p.rxDepth, p.cqMod, p.inline}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestResolveNoPeak checks when perftest skips the peak computation.
func TestResolveNoPeak(t *testing.T) {
	tests := []struct {
		test   Test
		peer   string
		iters  int
		noPeak bool
	}{
		{WriteBW, "s", 5000, false},
		{WriteBW, "s", 20001, true},
		{SendBW, "", 1000, true}, // send_bw's server only times first and last
		{SendBW, "s", 1000, false},
	}
	for _, tt := range tests {
		c := NewConfig(tt.test)
		c.Peer, c.Iters, c.Open = tt.peer, tt.iters, noOpen
		p, err := c.resolve()
		if err != nil || p.noPeak != tt.noPeak {
			t.Errorf("%v peer=%q n=%d: noPeak=%v err=%v, want %v", tt.test, tt.peer, tt.iters, p.noPeak, err, tt.noPeak)
		}
	}
}

// TestResolveErrors checks that bad combinations are refused with
// perftest's reasons.
func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"no Open", func(c *Config) { c.Open = nil }, "Config.Open is required"},
		{"UC read", func(c *Config) { c.Test, c.Conn = ReadBW, rnic.UC }, "UC connection not possible"},
		{"UD write", func(c *Config) { c.Conn = rnic.UD }, "UD connection only possible in SEND"},
		{"-q on latency", func(c *Config) { c.Test, c.QPs = WriteLat, 2 }, "multiple QPs only available on bw tests"},
		{"atomic size", func(c *Config) { c.Test, c.Size = AtomicBW, 16 }, "cannot be changed for Atomic"},
		{"inline read", func(c *Config) { c.Test, c.Inline = ReadBW, 64 }, "inline feature not available"},
		{"inline too big", func(c *Config) { c.Inline = 1000 }, "max inline 1000 out of range"},
		{"few iterations", func(c *Config) { c.Iters = 4 }, "iteration number 4 out of range"},
		{"bad MTU", func(c *Config) { c.MTU = 1500 }, "invalid MTU 1500"},
		{"rx depth on RDMA", func(c *Config) { c.RxDepth = 8 }, "rx depth can be only 1"},
		{"-D with -a", func(c *Config) { c.Duration, c.All = 5, true }, "does not support running on all sizes"},
		{"margin", func(c *Config) { c.Duration, c.Margin = 4, 2 }, "more than twice the margin"},
		{"bad port", func(c *Config) { c.Port = 70000 }, "port 70000 out of range"},
		{"bad conn", func(c *Config) { c.Conn = 9 }, "not supported"},
		{"QP timeout", func(c *Config) { c.QPTimeout = 32 }, "QP timeout 32 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig(WriteBW)
			c.Open = noOpen
			tt.cfg(&c)
			_, err := c.resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestQPTimeout checks -u: perftest's 14 by default, else the value given
// (0: no local ACK timeout).
func TestQPTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{-1, 14}, {0, 0}, {18, 18}, {31, 31}} {
		c := NewConfig(ReadBW)
		c.Open, c.QPTimeout = noOpen, tc.in
		p, err := c.resolve()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.qpTimeout(); int(got) != tc.want {
			t.Errorf("-u %d: timeout %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestParsers checks the command-line value parsers.
func TestParsers(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
		ok   bool
	}{{"2500", 2500, true}, {"64K", 65536, true}, {"1M", 1 << 20, true}, {"0x10", 16, true}, {"0", 0, false}, {"x", 0, false}, {"4096M", 0, false}} {
		got, err := ParseSize(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseSize(%q) = %d, %v", tt.in, got, err)
		}
	}
	for _, name := range []string{"write_bw", "ib_write_bw", "ib_send_lat"} {
		if _, err := ParseTest(name); err != nil {
			t.Errorf("ParseTest(%q): %v", name, err)
		}
	}
	if _, err := ParseTest("write_bandwidth"); err == nil || !strings.Contains(err.Error(), "write_bw, read_bw") {
		t.Errorf("ParseTest of an unknown test: %v", err)
	}
	if _, err := ParseConn("XRC"); err == nil {
		t.Error("ParseConn(XRC) succeeded")
	}
	if a, err := ParseAtomicType("CMP_AND_SWAP"); err != nil || a != CmpAndSwap {
		t.Errorf("ParseAtomicType: %v %v", a, err)
	}
	if _, err := ParseAtomicType("ADD"); err == nil {
		t.Error("ParseAtomicType(ADD) succeeded")
	}
}

// TestResolveFlags checks the flags perftest's scripts use: what each
// sets in force, and the lines perftest prints about them.
func TestResolveFlags(t *testing.T) {
	tests := []struct {
		name  string
		cfg   func(*Config)
		check func(t *testing.T, p *params)
	}{
		{"-l 4 sets the CQ moderation", func(c *Config) { c.Size, c.PostList = 64, 4 }, func(t *testing.T, p *params) {
			if p.postList != 4 || p.cqMod != 4 || len(p.notes) != 1 || !strings.Contains(p.notes[0], "CQ moderation will be the size of the post list") {
				t.Errorf("post list %d, cq_mod %d, notes %q", p.postList, p.cqMod, p.notes)
			}
		}},
		{"-l 8 -Q 4", func(c *Config) { c.Size, c.PostList, c.CQMod = 64, 8, 4 }, func(t *testing.T, p *params) {
			if p.postList != 8 || p.cqMod != 4 || len(p.notes) != 0 {
				t.Errorf("post list %d, cq_mod %d, notes %q", p.postList, p.cqMod, p.notes)
			}
		}},
		{"-e keeps CQ moderation on large messages", func(c *Config) { c.Test, c.Events = ReadBW, true }, func(t *testing.T, p *params) {
			if p.cqMod != 100 {
				t.Errorf("cq_mod %d, want 100", p.cqMod)
			}
		}},
		{"-Q on large messages warns", func(c *Config) { c.CQMod = 10 }, func(t *testing.T, p *params) {
			if p.cqMod != 10 || len(p.notes) != 1 || !strings.Contains(p.notes[0], "Large message requested and CQ moderation enabled") {
				t.Errorf("cq_mod %d, notes %q", p.cqMod, p.notes)
			}
		}},
		{"--reversed client", func(c *Config) { c.Reversed = true }, func(t *testing.T, p *params) {
			if p.client || !p.tcpClient {
				t.Errorf("client %v, tcp client %v: want the data server and the TCP client", p.client, p.tcpClient)
			}
		}},
		{"--reversed server", func(c *Config) { c.Reversed, c.Peer = true, "" }, func(t *testing.T, p *params) {
			if !p.client || p.tcpClient {
				t.Errorf("client %v, tcp client %v: want the data client and the TCP server", p.client, p.tcpClient)
			}
		}},
		{"send_bw -b server computes the peak", func(c *Config) { c.Test, c.Peer, c.Duplex = SendBW, "", true }, func(t *testing.T, p *params) {
			if p.noPeak {
				t.Error("noPeak: perftest's send_bw server skips the peak only without -b")
			}
		}},
		{"--run_infinitely", func(c *Config) { c.RunInfinitely = true }, func(t *testing.T, p *params) {
			if !p.duration || p.Duration != 5 || p.margin != 1 || !p.noPeak || p.iters != 0 {
				t.Errorf("duration %v/%d margin %d noPeak %v iters %d", p.duration, p.Duration, p.margin, p.noPeak, p.iters)
			}
		}},
		{"--cpu_util without -D warns", func(c *Config) { c.CPUUtil = true }, func(t *testing.T, p *params) {
			if p.cpuUtil || len(p.warnings) != 1 || !strings.Contains(p.warnings[0], "CPU Utilization works only with Duration mode") {
				t.Errorf("cpuUtil %v, warnings %q", p.cpuUtil, p.warnings)
			}
		}},
		{"--cpu_util -D", func(c *Config) { c.CPUUtil, c.Duration = true, 4 }, func(t *testing.T, p *params) {
			if !p.cpuUtil {
				t.Error("cpu_util off")
			}
		}},
		{"--rate_limit_type SW", func(c *Config) { c.RateLimit, c.RateLimitType, c.RateUnits = 1000, RateLimitSW, RatePps }, func(t *testing.T, p *params) {
			if p.rateType != RateLimitSW || p.rateHWSW || p.burstSize != 128 || len(p.warnings) != 1 || p.warnings[0] != " Setting burst size to tx depth = 128" {
				t.Errorf("rate type %v (HW fallback %v), burst %d, warnings %q", p.rateType, p.rateHWSW, p.burstSize, p.warnings)
			}
		}},
		{"--rate_limit 10: HW, falls back to SW", func(c *Config) { c.RateLimit = 10 }, func(t *testing.T, p *params) {
			if p.rateType != RateLimitSW || !p.rateHWSW || p.burstSize != 128 || len(p.warnings) != 0 {
				t.Errorf("rate type %v (HW fallback %v), burst %d, warnings %q", p.rateType, p.rateHWSW, p.burstSize, p.warnings)
			}
		}},
		{"--burst_size", func(c *Config) { c.RateLimit, c.RateLimitType, c.BurstSize = 5, RateLimitSW, 16 }, func(t *testing.T, p *params) {
			if p.burstSize != 16 {
				t.Errorf("burst %d", p.burstSize)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig(WriteBW)
			c.Peer, c.Open = "server", noOpen
			tt.cfg(&c)
			p, err := c.resolve()
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

// TestResolveFlagErrors checks that each flag is refused where perftest
// refuses it, with perftest's reason, and where rnic cannot do what it
// asks, saying why; the refusals were compared with the messages of
// perftest 4.5-0.17's own binaries.
func TestResolveFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"-b on latency", func(c *Config) { c.Test, c.Duplex = ReadLat, true }, "bidirectional is only available in BW test"},
		{"-e on write", func(c *Config) { c.Events = true }, "events feature not available on WRITE verb"},
		{"-e on write_lat", func(c *Config) { c.Test, c.Events = WriteLat, true }, "events feature not available on WRITE verb"},
		{"-e with -D", func(c *Config) { c.Test, c.Events, c.Duration = ReadBW, true, 4 }, "duration mode doesn't work with events"},
		{"-H on bw", func(c *Config) { c.Histogram = true }, "available only on latency tests"},
		{"-U on bw", func(c *Config) { c.Unsorted = true }, "available only on latency tests"},
		{"-l on latency", func(c *Config) { c.Test, c.PostList = SendLat, 2 }, "post list is supported in BW tests only"},
		{"-l and -n", func(c *Config) { c.PostList, c.Iters, c.Size = 3, 100, 64 }, "number of iterations 100 must be a multiple of post list size 3"},
		{"-l and -Q", func(c *Config) { c.PostList, c.CQMod, c.Size = 4, 3, 64 }, "post list size 4 must be a multiple of CQ moderation 3"},
		{"-l past -t", func(c *Config) { c.PostList, c.TxDepth, c.Iters, c.Size = 20, 10, 100, 64 }, "larger than the tx depth"},
		{"-l 0", func(c *Config) { c.PostList = -1 }, "post list size -1"},
		{"-S 16", func(c *Config) { c.SL = 16 }, "only 15 service levels"},
		{"--tclass 256", func(c *Config) { c.TrafficClass = 256 }, "traffic class 256 out of range"},
		{"--run_infinitely on latency", func(c *Config) { c.Test, c.RunInfinitely = WriteLat, true }, "run_infinitely exists only in BW tests"},
		{"--run_infinitely -e", func(c *Config) { c.Test, c.RunInfinitely, c.Events = ReadBW, true, true }, "run_infinitely does not support events"},
		{"--run_infinitely send -b", func(c *Config) { c.Test, c.RunInfinitely, c.Duplex = SendBW, true, true }, "not supported in SEND Bidirectional BW test"},
		{"--run_infinitely rate", func(c *Config) { c.RunInfinitely, c.RateLimit, c.RateLimitType = true, 5, RateLimitSW }, "run_infinitely does not support rate limit"},
		{"--run_infinitely -a", func(c *Config) { c.RunInfinitely, c.All = true, true }, "exclude each other"},
		{"--out_json_file alone", func(c *Config) { c.OutJSONFile = "x.json" }, "--out_json_file needs --out_json"},
		{"rate HW", func(c *Config) { c.RateLimit, c.RateLimitType = 10, RateLimitHW }, "failed to accept HW rate limit"},
		{"rate PP", func(c *Config) { c.RateLimit, c.RateLimitType = 10, RateLimitPP }, "only supported for Raw Ethernet"},
		{"rate HW value", func(c *Config) { c.RateLimit = 3 }, "unknown rate limit value 3"},
		{"rate HW pps", func(c *Config) { c.RateLimit, c.RateUnits = 1000, RatePps }, "pps rate limit units is not supported when setting HW rate limit"},
		{"rate SW atomic", func(c *Config) { c.Test, c.RateLimit, c.RateLimitType = AtomicBW, 5, RateLimitSW }, "SW rate limiter cannot be executed on non-BW, ATOMIC"},
		{"rate SW latency", func(c *Config) { c.Test, c.RateLimit, c.RateLimitType = ReadLat, 5, RateLimitSW }, "non-BW"},
		{"rate SW send -b", func(c *Config) { c.Test, c.RateLimit, c.RateLimitType, c.Duplex = SendBW, 5, RateLimitSW, true }, "bidirectional SEND"},
		{"rate fallback latency", func(c *Config) { c.Test, c.RateLimit = ReadLat, 10 }, "runs only in BW tests"},
		{"rate type alone", func(c *Config) { c.RateLimitType = RateLimitSW }, "rate limit must be positive"},
		{"burst alone", func(c *Config) { c.BurstSize = 4 }, "can't enable burst mode when rate limiter is off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig(WriteBW)
			c.Peer, c.Open = "server", noOpen
			tt.cfg(&c)
			_, err := c.resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
