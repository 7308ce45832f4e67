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
