package perftest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
)

// recordingListener hands out connections that log the size of each
// write: the steps of the exchange this side sends.
type recordingListener struct {
	net.Listener
	mu     sync.Mutex
	writes []int
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes = append(c.l.writes, len(p))
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// steps writes a sequence of exchange messages in short: v (version,
// 16), s (cycle buffer and cache line, 4 and 4), m (MTU, 2), q (QP info,
// 108), r (bw report, 5 × 8), d (done, 5).
func steps(writes []int) string {
	var b strings.Builder
	for i := 0; i < len(writes); i++ {
		switch w := writes[i]; {
		case w == versionSize:
			b.WriteByte('v')
		case w == 4 && i+1 < len(writes) && writes[i+1] == 4:
			b.WriteByte('s')
			i++
		case w == 2:
			b.WriteByte('m')
		case w == DestSize:
			b.WriteByte('q')
		case w == 8 && i+4 < len(writes):
			b.WriteByte('r')
			i += 4
		case w == len(done):
			b.WriteByte('d')
		default:
			fmt.Fprintf(&b, "<%d>", w)
		}
	}
	return b.String()
}

// TestExchangeSteps checks the sequence of exchange messages the server
// sends in each mode against the sequence perftest 4.5's main()s follow
// (a peer that is the real perftest expects exactly it): the QP-info
// rounds, the synchronization steps of -b and -a, the report exchanges,
// the close.
func TestExchangeSteps(t *testing.T) {
	const pre = "vsm"
	tests := []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"write_bw", func(c *Config) { c.Test, c.Size, c.Iters = WriteBW, 64, 20 }, pre + "qq" + "q" + "q" + "r" + "qd"},
		{"write_bw q2", func(c *Config) { c.Test, c.Size, c.Iters, c.QPs = WriteBW, 64, 20, 2 }, pre + "qqqq" + "q" + "q" + "r" + "qd"},
		// -b: a sync before the run and the report exchange.
		{"write_bw -b", func(c *Config) { c.Test, c.Size, c.Iters, c.Duplex = WriteBW, 64, 20, true }, pre + "qq" + "q" + "q" + "r" + "qd"},
		{"read_bw -b -a", func(c *Config) { c.Test, c.All, c.Iters, c.Duplex = ReadBW, true, 5, true }, pre + "qq" + "q" + strings.Repeat("qqr", 23) + "qd"},
		{"atomic_bw -b", func(c *Config) { c.Test, c.Iters, c.Duplex = AtomicBW, 20, true }, pre + "qq" + "q" + "q" + "r" + "qd"},
		{"send_bw", func(c *Config) { c.Test, c.Size, c.Iters = SendBW, 64, 20 }, pre + "q" + "q" + "q" + "q" + "qd"},
		{"send_bw -b", func(c *Config) { c.Test, c.Size, c.Iters, c.Duplex = SendBW, 64, 20, true }, pre + "q" + "q" + "q" + "q" + "r" + "qd"},
		{"send_bw -b -D", func(c *Config) { c.Test, c.Size, c.Duration, c.Duplex = SendBW, 64, 2, true }, pre + "q" + "q" + "q" + "q" + "qd"},
		{"send_bw -a", func(c *Config) { c.Test, c.All, c.Iters = SendBW, true, 5 }, pre + "qqq" + strings.Repeat("qq", 23) + "qd"},
		{"read_lat --reversed", func(c *Config) { c.Test, c.Size, c.Iters, c.Reversed = ReadLat, 64, 20, true }, pre + "qqqq" + "qd"},
		{"send_lat -e", func(c *Config) { c.Test, c.Size, c.Iters, c.Events = SendLat, 64, 20, true }, pre + "qqq" + "q" + "qd"},
		{"write_bw -l 4", func(c *Config) { c.Test, c.Size, c.Iters, c.PostList = WriteBW, 64, 20, 4 }, pre + "qq" + "q" + "q" + "r" + "qd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewConfig(WriteBW)
			tt.cfg(&cfg)
			var rl *recordingListener
			srv, cli := startPair(t, cfg, memOpener(t), memSrv, memCli, func(sc, cc *Config) {
				rl = &recordingListener{Listener: sc.Listener}
				sc.Listener = rl
			})
			if srv.err != nil || cli.err != nil {
				t.Fatalf("server: %v\nclient: %v", srv.err, cli.err)
			}
			rl.mu.Lock()
			got := steps(rl.writes)
			rl.mu.Unlock()
			if got != tt.want {
				t.Errorf("the server sent %s, perftest's sequence is %s", got, tt.want)
			}
		})
	}
}
