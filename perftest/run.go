package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/wire"
)

// Result is what a run printed: its table's rows and the QPs' addresses.
type Result struct {
	BW     []BWReport  // bw tests (the server of write/read/atomic: the client's report)
	Lat    []LatReport // latency tests (client; send_lat and write_lat: both sides)
	Local  []Dest
	Remote []Dest
	MTU    int    // the path MTU used, in bytes
	Device string // the device's name

	// Counters are the device's counters when the run ended, taken just
	// before Run closed the device (whether the run succeeded or not).
	Counters []rnic.Counter
}

// session is one run: the exchange, the device and its resources.
type session struct {
	p    *params
	x    *Conn
	dev  *rnic.Device
	res  *resources
	out  io.Writer
	errw io.Writer
	r    *Result
	rx   uint64  // rx_packets when Alive last looked
	cpu  float64 // the last run's CPU utilization (--cpu_util)
	ctrs *counterReport
	// paceErr is why a Worker's pacer (WorkerConfig.Rate) stopped.
	paceErr error
}

// Run runs the test cfg describes, as server or client, printing
// perftest's report to cfg.Out. It returns when the test is over, the
// exchange fails, or ctx is cancelled; the device it opened is closed.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	p, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &session{p: p, out: cfg.Out, errw: cfg.Err, r: &Result{}}
	if s.out == nil {
		s.out = io.Discard
	}
	if s.ctrs, err = newCounterReport(cfg.ReportCounters); err != nil {
		return nil, err
	}
	for _, n := range p.notes {
		io.WriteString(s.out, resultLine+n+"\n")
	}
	if s.errw != nil {
		for _, w := range p.warnings {
			fmt.Fprintln(s.errw, w)
		}
	}
	conn, err := s.establish(ctx)
	if err != nil {
		return nil, err
	}
	s.x = NewConn(ctx, conn, p.tcpClient)
	s.x.Timeout = p.Timeout
	defer s.x.Close()
	if err := s.prepare(); err != nil {
		return nil, err
	}
	defer s.dev.Close()
	defer func() { s.r.Counters = s.dev.Counters() }()
	s.ctrs.open(s.dev)
	if err := s.ctrs.check(); err != nil {
		return s.r, err
	}
	if err := s.script(ctx); err != nil {
		return s.r, err
	}
	return s.r, nil
}

func (s *session) timeout() time.Duration {
	if s.p.Timeout > 0 {
		return s.p.Timeout
	}
	return DefaultTimeout
}

// establish makes the TCP connection: the server prints perftest's
// banner and accepts one client, the client connects. (perftest prints
// the banner on the side that receives: the TCP client with --reversed.)
func (s *session) establish(ctx context.Context) (net.Conn, error) {
	p := s.p
	if p.ExchangeConn != nil {
		if !p.client {
			io.WriteString(s.out, waitBanner)
		}
		return p.ExchangeConn, nil
	}
	if p.tcpClient {
		if !p.client {
			io.WriteString(s.out, waitBanner)
		}
		d := net.Dialer{Timeout: s.timeout()}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(p.Peer, strconv.Itoa(p.Port)))
		if err != nil {
			return nil, fmt.Errorf("perftest: couldn't connect to %s:%d: %w", p.Peer, p.Port, err)
		}
		return c, nil
	}
	ln := p.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", p.Port)); err != nil {
			return nil, fmt.Errorf("perftest: couldn't listen to port %d: %w", p.Port, err)
		}
	}
	defer ln.Close()
	if !p.client {
		io.WriteString(s.out, waitBanner) // once listening: a client may connect when it sees it
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("perftest: accept: %w", err)
	}
	return c, nil
}

// prepare does the exchange up to the QP information: versions, system
// data, the device, the MTU; then creates the resources and prints the
// test's header.
func (s *session) prepare() error {
	p, x := s.p, s.x
	if _, err := x.ExchangeVersions(); err != nil {
		return err
	}
	cyc, cache, err := x.ExchangeSysData(p.cycleBuffer, p.cacheLine)
	if err != nil {
		return err
	}
	p.cycleBuffer, p.cacheLine = max(p.cycleBuffer, cyc), max(p.cacheLine, cache)
	local := p.Local
	if !local.IsValid() {
		local = addrOf(x.NetConn().LocalAddr())
	}
	if s.dev, err = p.Open(local); err != nil {
		return fmt.Errorf("perftest: opening the device for %v: %w", local, err)
	}
	s.r.Device = s.dev.Name()
	if err := s.exchangeMTU(); err != nil {
		s.dev.Close()
		return err
	}
	if p.Test.Verb() == VerbRead || p.Test.Verb() == VerbAtomic {
		p.outReads = s.dev.Attr().MaxQPRdAtom
	} else {
		p.outReads = 1
	}
	if s.res, err = newResources(p, s.dev); err != nil {
		s.dev.Close()
		return err
	}
	x.Alive = s.alive
	printTestInfo(s.out, p, s.dev.Name())
	return nil
}

// exchangeMTU agrees on the path MTU (check_mtu): the smaller of both
// sides'. A UD message must fit in it.
func (s *session) exchangeMTU() error {
	p := s.p
	mine := s.dev.Attr().ActiveMTU
	if p.MTU != 0 {
		m, _ := rnic.MTUFromBytes(p.MTU)
		if m > mine {
			return fmt.Errorf("perftest: MTU %d is above the port's active MTU %d", p.MTU, mine.Bytes())
		}
		mine = m
	}
	rem, err := s.x.ExchangeMTU(wire.MTU(mine))
	if err != nil {
		return err
	}
	p.mtu = min(mine, rnic.MTU(rem))
	s.r.MTU = p.mtu.Bytes()
	if p.Conn == rnic.UD && p.Size > p.mtu.Bytes() {
		if !p.All && p.Config.Size != 0 {
			return fmt.Errorf("perftest: max message size in UD cannot be greater than MTU %d", p.mtu.Bytes())
		}
		if s.errw != nil {
			fmt.Fprintf(s.errw, " Max msg size in UD is MTU %d\n Changing to this MTU\n", p.mtu.Bytes())
		}
		p.Size = p.mtu.Bytes()
	}
	return nil
}

// alive tells the exchange whether the peer's traffic is still arriving:
// a long wait for the client's "finished" message is not a timeout while
// packets come in.
func (s *session) alive() bool {
	v, _ := s.dev.Counter("rx_packets")
	moved := v != s.rx
	s.rx = v
	return moved
}

// stalled turns a failed wait for the peer's traffic into an error.
func (s *session) stalled(err error, what string, done, total uint64) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("perftest: no %s for %v: %d of %d done", what, s.timeout(), done, total)
	}
	return err
}

// addrOf returns the IP address of a TCP address, unmapped.
func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}
