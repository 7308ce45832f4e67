package cm_test

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/wire/mad"
)

// A program's side of the CM socket, as rnic's librdmacm speaks it: a
// command connection and an events connection (one event channel).
type cmClient struct {
	t      *testing.T
	cmd    *net.UnixConn
	events *net.UnixConn
	token  uint32
	seq    uint32
	path   string
}

func dialCM(t *testing.T, path string) *cmClient {
	t.Helper()
	c := &cmClient{t: t, path: path}
	c.events, c.token = c.open(hostif.CMEvents)
	c.cmd, _ = c.open(hostif.CMCommand)
	t.Cleanup(func() { c.cmd.Close(); c.events.Close() })
	return c
}

// open connects to the CM socket as a command or events connection (and
// its token).
func (c *cmClient) open(kind uint8) (*net.UnixConn, uint32) {
	c.t.Helper()
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: c.path, Net: "unixpacket"})
	if err != nil {
		c.t.Fatal(err)
	}
	r := c.call(conn, hostif.OpCMHello, 0, func(m *hostif.Msg) { m.U32(hostif.CMVersion).U8(kind) })
	return conn, r.U32()
}

// call sends a command and returns the reply's fields; the reply must
// carry errno want.
func (c *cmClient) call(conn *net.UnixConn, op hostif.Op, want int32, fill func(*hostif.Msg)) *hostif.Reader {
	c.t.Helper()
	c.seq++
	m := hostif.NewMsg(nil, hostif.Header{Op: op, Seq: c.seq})
	fill(m)
	b, _ := m.Done()
	if _, err := conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
	buf := make([]byte, hostif.MaxMsg)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		c.t.Fatalf("%v: %v", op, err)
	}
	h, r, err := hostif.Parse(buf[:n])
	if err != nil || h.Seq != c.seq || h.Errno != want {
		c.t.Fatalf("%v: reply %+v %v, want errno %d", op, h, err, want)
	}
	return r
}

func (c *cmClient) do(op hostif.Op, fill func(*hostif.Msg)) *hostif.Reader {
	c.t.Helper()
	return c.call(c.cmd, op, 0, fill)
}

type cmEvent struct {
	uid             uint64
	id, listen, typ uint32
	status          int32
	qpn             uint32
	private         []byte
}

// next reads the next event of the channel.
func (c *cmClient) next() cmEvent {
	c.t.Helper()
	buf := make([]byte, hostif.MaxMsg)
	c.events.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := c.events.Read(buf)
	if err != nil {
		c.t.Fatal(err)
	}
	h, r, err := hostif.Parse(buf[:n])
	if err != nil || h.Op != hostif.OpCMEvent {
		c.t.Fatalf("event %+v %v", h, err)
	}
	e := cmEvent{uid: r.U64(), id: r.U32(), listen: r.U32()}
	r.U64()
	e.typ, e.status = r.U32(), int32(r.U32())
	r.Fixed(2 * hostif.CMAddrLen)
	e.qpn = r.U32()
	r.Fixed(6)
	e.private = r.Bytes()
	r.U32()
	r.U32()
	if r.End() != nil {
		c.t.Fatalf("event fields: %v", r.End())
	}
	return e
}

func (c *cmClient) expect(typ uint32) cmEvent {
	c.t.Helper()
	e := c.next()
	if e.typ != typ {
		c.t.Fatalf("event %d (status %d), want %d", e.typ, e.status, typ)
	}
	return e
}

func putAddr(m *hostif.Msg, a netip.AddrPort) {
	var b [16]byte
	v := a.Addr().As4()
	copy(b[12:], v[:])
	m.U8(4).Fixed(b[:]).U16(a.Port())
}

// ready moves qp through the states the CM's init_qp_attr gives, as
// librdmacm does before it accepts or confirms.
func (c *cmClient) ready(id uint32, qp *rnic.QP, states ...rnic.QPState) {
	c.t.Helper()
	for _, s := range states {
		r := c.do(hostif.OpCMInitQPAttr, func(m *hostif.Msg) { m.U32(id).U8(uint8(s)) })
		mask := rnic.QPAttrMask(r.U32())
		a := rnic.QPAttr{State: rnic.QPState(r.U8()), PathMTU: rnic.MTU(r.U8()), DestQPN: r.U32(), RQPSN: rnic.PSN(r.U32()),
			SQPSN: rnic.PSN(r.U32()), MaxDestRdAtomic: r.U8(), MaxRdAtomic: r.U8(), MinRNRTimer: r.U8(), Timeout: r.U8(),
			RetryCnt: r.U8(), RNRRetry: r.U8(), QKey: r.U32(), PKeyIndex: r.U16(), Port: r.U8(), AccessFlags: rnic.Access(r.U32())}
		copy(a.AH.DGID[:], r.Fixed(16))
		a.AH.SGIDIndex, a.AH.HopLimit, a.AH.FlowLabel, a.AH.TrafficClass = r.U8(), r.U8(), r.U32(), r.U8()
		if r.End() != nil {
			c.t.Fatal(r.End())
		}
		// The kernel CM's RTR: the longest RNR NAK timer (code 0, 655.36 ms).
		if s == rnic.QPSRTR && (mask&rnic.QPAttrMinRNRTimer == 0 || a.MinRNRTimer != 0) {
			c.t.Fatalf("RTR: min_rnr_timer %d (in the mask: %v), want 0 as Linux's CM", a.MinRNRTimer, mask&rnic.QPAttrMinRNRTimer != 0)
		}
		if err := qp.Modify(&a, mask); err != nil {
			c.t.Fatalf("modify to %v with the CM's attributes: %v", s, err)
		}
	}
}

// TestServeHost: a program's rdma_cm ids on a NIC process's CM socket
// (the protocol rnic's librdmacm speaks), against the Go API on another
// NIC: an active id resolves, connects (CONNECT_RESPONSE, the program
// readies its QP, accepts: RTU), carries a SEND and disconnects
// (DISCONNECTED, TIMEWAIT_EXIT); a listening id gets CONNECT_REQUEST
// with the peer's private data, accepts with a QP readied the same way;
// closing the command connection destroys its ids (the peer's
// connection ends).
func TestServeHost(t *testing.T) {
	a, b := devices(t, nil)
	path := filepath.Join(t.TempDir(), "a.rdmacm")
	ln, err := net.Listen("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- cm.ServeHost(a, ln) }()
	defer func() { ln.Close(); <-served }()
	c := dialCM(t, path)
	ctx := context.Background()

	pda, _ := a.AllocPD()
	cqa, _ := a.CreateCQ(64)
	newQP := func() *rnic.QP {
		qp, err := pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}

	// Active: the program connects to a Go listener on b.
	l, err := cm.Listen(b, 7471, &cm.Config{PrivateData: []byte("from b")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *cm.Conn, 1)
	go func() {
		sc, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- sc
	}()
	id := c.do(hostif.OpCMCreateID, func(m *hostif.Msg) { m.U32(c.token).U16(uint16(mad.PortSpaceTCP)).U8(2).U64(42) }).U32()
	c.do(hostif.OpCMResolveAddr, func(m *hostif.Msg) {
		m.U32(id)
		putAddr(m, netip.AddrPortFrom(addrA, 0))
		putAddr(m, netip.AddrPortFrom(addrB, 7471))
	})
	if e := c.expect(hostif.CMEventAddrResolved); e.uid != 42 || e.id != id {
		t.Fatalf("ADDR_RESOLVED of uid %d id %d", e.uid, e.id)
	}
	// rdma_migrate_id: the id's events go to another channel of the
	// program from then on; a token that is not the program's is refused.
	other, tok := c.open(hostif.CMEvents)
	defer other.Close()
	c.call(c.cmd, hostif.OpCMMigrate, int32(unix.EINVAL), func(m *hostif.Msg) { m.U32(id).U32(tok + 100) })
	c.do(hostif.OpCMMigrate, func(m *hostif.Msg) { m.U32(id).U32(tok) })
	c.do(hostif.OpCMResolveRoute, func(m *hostif.Msg) { m.U32(id) })
	first := c.events
	c.events = other
	c.expect(hostif.CMEventRouteResolved)
	c.events = first
	c.do(hostif.OpCMMigrate, func(m *hostif.Msg) { m.U32(id).U32(c.token) })
	qp := newQP()
	c.ready(id, qp, rnic.QPSInit)
	c.do(hostif.OpCMConnect, func(m *hostif.Msg) {
		m.U32(id).U32(qp.QPN()).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes([]byte("from a"))
	})
	c.expect(hostif.CMEventConnectResponse)
	c.ready(id, qp, rnic.QPSInit, rnic.QPSRTR, rnic.QPSRTS)
	// The RTU goes; the library reports ESTABLISHED itself, as librdmacm.
	c.do(hostif.OpCMAccept, func(m *hostif.Msg) { m.U32(id).U32(qp.QPN()).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes(nil) })
	sc := <-accepted
	if got := string(sc.PrivateData()[:6]); got != "from a" {
		t.Errorf("the listener got %q", got)
	}
	// The QP the program readied carries a SEND from the Go side.
	buf := make([]byte, 64)
	mr, _ := pda.RegMR(buf, rnic.AccessLocalWrite)
	if err := qp.PostRecv(rnic.RecvWR{WRID: 9, SGL: []rnic.SGE{mr.SGE(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	smr, _ := sc.QP().PD().RegMR([]byte("hello program"), rnic.AccessLocalWrite)
	if err := sc.QP().PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{smr.SGE(0, smr.Len())}}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]rnic.WC, 1)
	if _, err := cqa.Wait(ctx, wcs); err != nil || wcs[0].Status != rnic.WCSuccess || string(buf[:wcs[0].ByteLen]) != "hello program" {
		t.Fatalf("receive on the program's QP: %v %+v %q", err, wcs[0], buf)
	}
	c.do(hostif.OpCMDisconnect, func(m *hostif.Msg) { m.U32(id) })
	c.expect(hostif.CMEventDisconnected)
	<-sc.Done()
	c.expect(hostif.CMEventTimewaitExit)
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(id) })
	sc.Close()

	// Passive: the program listens, the Go side dials.
	lid := c.do(hostif.OpCMCreateID, func(m *hostif.Msg) { m.U32(c.token).U16(uint16(mad.PortSpaceTCP)).U8(2).U64(7) }).U32()
	c.do(hostif.OpCMBind, func(m *hostif.Msg) { m.U32(lid); putAddr(m, netip.AddrPortFrom(addrA, 7000)) })
	c.do(hostif.OpCMListen, func(m *hostif.Msg) { m.U32(lid).U32(8) })
	dialed := make(chan error, 1)
	var cc *cm.Conn
	go func() {
		var err error
		cc, err = cm.Dial(ctx, b, netip.AddrPortFrom(addrA, 7000), &cm.Config{PrivateData: []byte("dialer")})
		dialed <- err
	}()
	e := c.expect(hostif.CMEventConnectRequest)
	if e.listen != lid || string(e.private[:6]) != "dialer" {
		t.Fatalf("CONNECT_REQUEST for listener %d with %q", e.listen, e.private[:6])
	}
	qp2 := newQP()
	c.ready(e.id, qp2, rnic.QPSInit, rnic.QPSRTR, rnic.QPSRTS)
	c.do(hostif.OpCMAccept, func(m *hostif.Msg) {
		m.U32(e.id).U32(qp2.QPN()).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes([]byte("ok"))
	})
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	c.expect(hostif.CMEventEstablished)
	// A second listener on the port is refused; a command for no id too.
	lid2 := c.do(hostif.OpCMCreateID, func(m *hostif.Msg) { m.U32(c.token).U16(uint16(mad.PortSpaceTCP)).U8(2).U64(8) }).U32()
	c.call(c.cmd, hostif.OpCMBind, int32(11+87), func(m *hostif.Msg) { m.U32(lid2); putAddr(m, netip.AddrPortFrom(addrA, 7000)) }) // EADDRINUSE
	c.call(c.cmd, hostif.OpCMListen, 22, func(m *hostif.Msg) { m.U32(999).U32(1) })                                                // EINVAL

	// The program goes away: its ids are destroyed, the peer disconnected.
	c.cmd.Close()
	select {
	case <-cc.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the Go side's connection did not end when the program's went")
	}
	cc.Close()
}
