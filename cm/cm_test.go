package cm_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

// devices opens two NICs on an in-process link, a at 10.0.0.1 and b at
// 10.0.0.2; a's link passes through drop, if set, both ways.
func devices(t *testing.T, drop *madFilter) (a, b *rnic.Device) {
	t.Helper()
	pa, pb, err := mem.Pipe(addrA, addrB, mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	var la, lb link.Link = pa, pb
	if drop != nil {
		la, lb = drop.wrap(pa), drop.wrap(pb)
	}
	if a, err = rnic.Open(rnic.Options{Link: la, Name: "a", Addr: addrA}); err != nil {
		t.Fatal(err)
	}
	if b, err = rnic.Open(rnic.Options{Link: lb, Name: "b", Addr: addrB}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// madFilter drops the first n MADs of each attribute it is given, on
// every link it wraps, and counts what it saw.
type madFilter struct {
	mu   sync.Mutex
	drop map[mad.Attr]int
	seen map[mad.Attr]int
}

func newFilter(drop map[mad.Attr]int) *madFilter {
	return &madFilter{drop: drop, seen: map[mad.Attr]int{}}
}

func (f *madFilter) wrap(l link.Link) link.Link { return &filterLink{Link: l, f: f} }

func (f *madFilter) count(a mad.Attr) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[a]
}

type filterLink struct {
	link.Link
	f *madFilter
}

func (l *filterLink) Send(bufs []*link.Buf) {
	keep := bufs[:0]
	for _, b := range bufs {
		var p wire.Packet
		if err := p.Parse(append([]byte(nil), b.Bytes()...)); err == nil && p.BTH.DestQP() == 1 {
			if m, err := mad.Parse(p.Payload); err == nil {
				l.f.mu.Lock()
				l.f.seen[m.Attr()]++
				drop := l.f.drop[m.Attr()] > 0
				if drop {
					l.f.drop[m.Attr()]--
				}
				l.f.mu.Unlock()
				if drop {
					b.Release()
					continue
				}
			}
		}
		keep = append(keep, b)
	}
	if len(keep) > 0 {
		l.Link.Send(keep)
	}
}

// connect dials b's port 7471 from a, accepting on b, and returns both
// ends.
func connect(t *testing.T, a, b *rnic.Device, dcfg, lcfg *cm.Config) (client, server *cm.Conn) {
	t.Helper()
	l, err := cm.Listen(b, 7471, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		var err error
		server, err = l.Accept(ctx)
		accepted <- err
	}()
	client, err = cm.Dial(ctx, a, netip.AddrPortFrom(addrB, 7471), dcfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("Accept: %v", err)
	}
	return client, server
}

// TestDialListen: Dial and Accept connect two RC QPs through REQ, REP and
// RTU (IBTA §12.9.5); each side's private data reaches the other; the
// QPs carry a SEND and an RDMA WRITE; Close on one side sends DREQ, the
// other answers DREP and sees its connection end (Done), and both go
// through the time wait to Idle.
func TestDialListen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := devices(t, nil)
		buf := make([]byte, 4096)
		pdb, _ := b.AllocPD()
		mrb, _ := pdb.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite)
		client, server := connect(t, a, b,
			&cm.Config{PrivateData: []byte("hello from a")},
			&cm.Config{PD: pdb, Access: rnic.AccessRemoteWrite, PrivateData: []byte("welcome from b")})
		if got := string(bytes.TrimRight(client.PrivateData(), "\x00")); got != "welcome from b" {
			t.Errorf("client sees the REP's private data %q", got)
		}
		if got := string(bytes.TrimRight(server.PrivateData(), "\x00")); got != "hello from a" {
			t.Errorf("server sees the REQ's private data %q", got)
		}
		if client.State() != cm.Established || server.State() != cm.Established {
			t.Fatalf("states %v %v, want ESTABLISHED", client.State(), server.State())
		}
		if client.RemoteAddr() != netip.AddrPortFrom(addrB, 7471) || server.RemoteAddr() != client.LocalAddr() {
			t.Errorf("addresses: client %v -> %v, server sees %v", client.LocalAddr(), client.RemoteAddr(), server.RemoteAddr())
		}
		for _, qp := range []*rnic.QP{client.QP(), server.QP()} {
			if qp.State() != rnic.QPSRTS {
				t.Fatalf("QP %#x in %v, want RTS", qp.QPN(), qp.State())
			}
			// As the kernel CM readies a QP: the longest RNR NAK timer.
			if a, _, err := qp.Query(); err != nil || a.MinRNRTimer != cm.MinRNRTimer || cm.MinRNRTimer != 0 {
				t.Errorf("QP %#x: min_rnr_timer %d (%v), want 0", qp.QPN(), a.MinRNRTimer, err)
			}
		}

		// An RDMA WRITE from the client into the server's region.
		src, _ := client.QP().PD().RegMR([]byte("written through a CM connection"), rnic.AccessLocalWrite)
		if err := client.QP().PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.SGE(0, src.Len())}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}); err != nil {
			t.Fatal(err)
		}
		scq := cqOf(t, client)
		wcs := make([]rnic.WC, 1)
		if n, err := scq.Wait(context.Background(), wcs); err != nil || n != 1 || wcs[0].Status != rnic.WCSuccess {
			t.Fatalf("WRITE: %v %+v", err, wcs[0])
		}
		if got := string(buf[:src.Len()]); got != "written through a CM connection" {
			t.Errorf("server's region holds %q", got)
		}

		if err := client.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-server.Done():
		case <-time.After(time.Minute):
			t.Fatal("the server's connection did not end after the client's Close")
		}
		if !errors.Is(server.Err(), cm.ErrDisconnected) {
			t.Errorf("server Err %v", server.Err())
		}
		time.Sleep(10 * time.Second) // past the time wait
		if s := server.State(); s != cm.Idle {
			t.Errorf("server after the time wait: %v, want IDLE", s)
		}
		ca, cb := cm.CountersOf(a), cm.CountersOf(b)
		want := map[string][2]uint64{ // a, b
			"cm_tx_msgs_req": {1, 0}, "cm_tx_msgs_rep": {0, 1}, "cm_tx_msgs_rtu": {1, 0},
			"cm_tx_msgs_dreq": {1, 0}, "cm_tx_msgs_drep": {0, 1}, "cm_rx_msgs_req": {0, 1}, "cm_rx_msgs_drep": {1, 0},
		}
		for name, w := range want {
			if g := [2]uint64{counter(ca, name), counter(cb, name)}; g != w {
				t.Errorf("%s: a %d b %d, want %d %d", name, g[0], g[1], w[0], w[1])
			}
		}
		server.Close()
	})
}

func counter(c cm.Counters, name string) uint64 {
	for _, n := range c.Named() {
		if n.Name == name {
			return n.Value
		}
	}
	panic("no counter " + name)
}

// cqOf returns the connection's send CQ.
func cqOf(t *testing.T, c *cm.Conn) *rnic.CQ {
	_, init, err := c.QP().Query()
	if err != nil {
		t.Fatal(err)
	}
	return init.SendCQ
}

// TestDialRejected: a REQ for a port nobody listens on is answered with
// REJ reason 8 (invalid service ID), as Linux answers (testdata/cm
// rdmacm_rej.pcap); a listener's Reject sends reason 28 (consumer
// defined) with the consumer's private data.
func TestDialRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := devices(t, nil)
		if err := cm.Start(b); err != nil {
			t.Fatal(err)
		}
		_, err := cm.Dial(context.Background(), a, netip.AddrPortFrom(addrB, 9999), nil)
		var rej *cm.RejectError
		if !errors.As(err, &rej) || rej.Reason != mad.RejInvalidServiceID {
			t.Fatalf("Dial to no listener: %v, want REJ reason 8\na %+v\nb %+v", err, cm.CountersOf(a), cm.CountersOf(b))
		}
		l, err := cm.Listen(b, 7000, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			r, err := l.Next(context.Background())
			if err == nil {
				r.Reject([]byte("go away"))
			}
		}()
		_, err = cm.Dial(context.Background(), a, netip.AddrPortFrom(addrB, 7000), nil)
		if !errors.As(err, &rej) || rej.Reason != mad.RejConsumerDefined || !bytes.HasPrefix(rej.PrivateData, []byte("go away")) {
			t.Fatalf("Dial to a rejecting listener: %v, want REJ reason 28 with the private data", err)
		}
		if _, err := cm.Listen(b, 7000, nil); err == nil {
			t.Error("a second listener on the same port was allowed")
		}
	})
}

// TestLostMessages: a REQ, REP, RTU, DREQ or DREP lost on the link is
// recovered by the protocol: the REQ and REP are sent again after their
// timeouts (6 s and 4 s, Linux's), a lost RTU makes the server send the
// REP again, which the client answers with the RTU again; a lost DREQ is
// sent again, and a lost DREP is answered again when the DREQ comes
// again. In a testing/synctest bubble, the timeouts take no real time.
func TestLostMessages(t *testing.T) {
	for _, attr := range []mad.Attr{mad.AttrREQ, mad.AttrREP, mad.AttrRTU, mad.AttrDREQ, mad.AttrDREP} {
		t.Run(attr.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFilter(map[mad.Attr]int{attr: 2})
				a, b := devices(t, f)
				start := time.Now()
				client, server := connect(t, a, b, nil, nil)
				took := time.Since(start)
				if err := client.Close(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-server.Done():
				case <-time.After(5 * time.Minute):
					t.Fatal("server not disconnected")
				}
				time.Sleep(time.Minute)
				if f.count(attr) < 3 {
					t.Errorf("%v seen %d times, want the two lost and a third", attr, f.count(attr))
				}
				t.Logf("connected after %v; %v sent %d times", took, attr, f.count(attr))
				if s := client.State(); s != cm.Idle {
					t.Errorf("client ends in %v", s)
				}
				server.Close()
			})
		})
	}
}

// TestPeerVanishes: a server that never answers makes Dial fail with
// ErrUnreachable after the REQ's 16 sends (about 98 s, Linux's timing);
// a peer that vanishes after its REP leaves the server's Accept failing
// unreachable after the REP's retries, never hanging.
func TestPeerVanishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFilter(map[mad.Attr]int{mad.AttrREQ: 100})
		a, b := devices(t, f)
		l, _ := cm.Listen(b, 7471, nil)
		defer l.Close()
		start := time.Now()
		_, err := cm.Dial(context.Background(), a, netip.AddrPortFrom(addrB, 7471), nil)
		if !errors.Is(err, cm.ErrUnreachable) {
			t.Fatalf("Dial: %v, want unreachable", err)
		}
		if took := time.Since(start); took < 90*time.Second || took > 110*time.Second {
			t.Errorf("gave up after %v, want 16 × 6.1 s", took)
		}
		if n := f.count(mad.AttrREQ); n != 16 {
			t.Errorf("REQ sent %d times, want 16", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFilter(map[mad.Attr]int{mad.AttrRTU: 100})
		a, b := devices(t, f)
		l, _ := cm.Listen(b, 7471, nil)
		defer l.Close()
		accepted := make(chan error, 1)
		go func() {
			r, err := l.Next(context.Background())
			if err == nil {
				_, err = r.Accept(context.Background(), nil)
			}
			accepted <- err
		}()
		// A client whose RTUs never arrive (as if it vanished after the REP).
		c, err := cm.Dial(context.Background(), a, netip.AddrPortFrom(addrB, 7471), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case err := <-accepted:
			if !errors.Is(err, cm.ErrUnreachable) {
				t.Errorf("Accept: %v, want unreachable", err)
			}
		case <-time.After(10 * time.Minute):
			t.Fatal("Accept hangs")
		}
	})
}

// TestDialRouted: Dial with no device takes the device of this process
// that has the destination's address (as rdma_resolve_addr picks the
// device that reaches itself); an address no device serves is an error
// naming it.
func TestDialRouted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := devices(t, nil)
		l, err := cm.Listen(b, 7600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(context.Background()); err == nil {
				<-c.Done()
				c.Close()
			}
		}()
		c, err := cm.Dial(context.Background(), nil, netip.AddrPortFrom(addrB, 7600), nil)
		if err != nil {
			t.Fatalf("Dial with no device: %v", err)
		}
		if c.QP().PD().Device() != b || c.LocalAddr().Addr() != addrB {
			t.Errorf("dialed from %v on %s, want b's own address", c.LocalAddr(), c.QP().PD().Device().Name())
		}
		c.Close()
	})
	if _, err := cm.Dial(context.Background(), nil, netip.MustParseAddrPort("127.0.0.99:1"), nil); !errors.Is(err, cm.ErrNoDevice) {
		t.Errorf("Dial to an address no device serves: %v, want ErrNoDevice", err)
	}
}
