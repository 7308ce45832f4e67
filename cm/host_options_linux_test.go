package cm_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// putAny6 writes the IPv6 wildcard address [::]:port.
func putAny6(m *hostif.Msg, port uint16) { m.U8(6).Fixed(make([]byte, 16)).U16(port) }

// TestServeHostOptions: rdma_set_option's AFONLY and REUSEADDR on the
// NIC's side of the CM socket, as the kernel's rdma_cm applies them (the
// library binds a wildcard id on every NIC through such parts): [::]:P
// with AFONLY and 0.0.0.0:P both listen and an IPv4 request reaches the
// latter; with only the former listening it is rejected at once (REJ 28,
// not dropped); without AFONLY [::]:P keeps 0.0.0.0:P and the NIC's
// address off its port; the options are refused in the states the kernel
// refuses them in. TOS and ACK_TIMEOUT set before the route, and a path
// set instead of one, reach the REQ: the passive side's QP attributes are
// the REQ's.
func TestServeHostOptions(t *testing.T) {
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
	newID := func(uid uint64) uint32 {
		return c.do(hostif.OpCMCreateID, func(m *hostif.Msg) { m.U32(c.token).U16(uint16(mad.PortSpaceTCP)).U8(2).U64(uid) }).U32()
	}
	opt := func(id, o, v uint32, want unix.Errno) {
		t.Helper()
		c.call(c.cmd, hostif.OpCMSetOption, int32(want), func(m *hostif.Msg) { m.U32(id).U32(o).U32(v) })
	}
	bind := func(id uint32, want unix.Errno, addr func(*hostif.Msg)) {
		t.Helper()
		c.call(c.cmd, hostif.OpCMBind, int32(want), func(m *hostif.Msg) { m.U32(id); addr(m) })
	}
	any4 := func(port uint16) func(*hostif.Msg) {
		return func(m *hostif.Msg) { putAddr(m, netip.AddrPortFrom(netip.IPv4Unspecified(), port)) }
	}
	listen := func(id uint32) { c.do(hostif.OpCMListen, func(m *hostif.Msg) { m.U32(id).U32(4) }) }
	dial := func(port uint16) (chan error, func() *cm.Conn) {
		done := make(chan error, 1)
		var conn *cm.Conn
		go func() {
			var err error
			conn, err = cm.Dial(ctx, b, netip.AddrPortFrom(addrA, port), nil)
			done <- err
		}()
		return done, func() *cm.Conn { return conn }
	}

	// The dual-stack server.
	l6, l4 := newID(1), newID(2)
	opt(l6, hostif.CMOptAFOnly, 1, 0)
	bind(l6, 0, func(m *hostif.Msg) { putAny6(m, 7600) })
	listen(l6)
	bind(l4, 0, any4(7600))
	listen(l4)
	dialed, _ := dial(7600)
	if e := c.expect(hostif.CMEventConnectRequest); e.listen != l4 {
		t.Fatalf("the IPv4 request reached listener %d, want 0.0.0.0's %d", e.listen, l4)
	} else {
		c.do(hostif.OpCMReject, func(m *hostif.Msg) { m.U32(e.id).U8(28).Bytes(nil) })
	}
	var rej *cm.RejectError
	if err := <-dialed; !errors.As(err, &rej) || rej.Reason != mad.RejConsumerDefined {
		t.Fatalf("Dial of a request the program rejected: %v", err)
	}
	opt(l6, hostif.CMOptAFOnly, 0, unix.EINVAL) // listening
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(l4) })
	// Only [::] with AFONLY listens: no listener takes the request, which
	// is rejected at once as the kernel's CM rejects it.
	start := time.Now()
	dialed, _ = dial(7600)
	if err := <-dialed; !errors.As(err, &rej) || rej.Reason != mad.RejConsumerDefined || time.Since(start) > 5*time.Second {
		t.Fatalf("Dial of a port only [::] with AFONLY listens on: %v after %v, want REJ 28 at once", err, time.Since(start))
	}
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(l6) })

	// Without AFONLY [::] covers IPv4: 0.0.0.0 and the NIC's address may
	// not bind its port (a wildcard is involved: EADDRNOTAVAIL).
	w6, w4 := newID(3), newID(4)
	opt(w6, hostif.CMOptAFOnly, 0, 0)
	bind(w6, 0, func(m *hostif.Msg) { putAny6(m, 7601) })
	bind(w4, unix.EADDRNOTAVAIL, any4(7601))
	bind(w4, unix.EADDRNOTAVAIL, func(m *hostif.Msg) { putAddr(m, netip.AddrPortFrom(addrA, 7601)) })
	// AFONLY taken while bound: 0.0.0.0 may then share the port.
	opt(w6, hostif.CMOptAFOnly, 1, 0)
	bind(w4, 0, any4(7601))
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(w6) })
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(w4) })

	// REUSEADDR: shared until one listens; not off once bound.
	r1, r2, r3 := newID(5), newID(6), newID(7)
	opt(r1, hostif.CMOptReuseAddr, 1, 0)
	opt(r2, hostif.CMOptReuseAddr, 1, 0)
	at := func(port uint16) func(*hostif.Msg) {
		return func(m *hostif.Msg) { putAddr(m, netip.AddrPortFrom(addrA, port)) }
	}
	bind(r1, 0, at(7602))
	bind(r2, 0, at(7602))
	bind(r3, unix.EADDRINUSE, at(7602))
	opt(r1, hostif.CMOptReuseAddr, 0, unix.EINVAL)
	c.call(c.cmd, hostif.OpCMListen, int32(unix.EADDRINUSE), func(m *hostif.Msg) { m.U32(r1).U32(4) })
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(r2) })
	listen(r1)
	opt(r1, hostif.CMOptReuseAddr, 1, unix.EINVAL)
	opt(r1, 99, 1, unix.ENOSYS)
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(r1) })
	c.do(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(r3) })

	// The route reaches the REQ: the program dials its own listener on
	// the NIC, and the listener's new id has the REQ's attributes.
	l := newID(8)
	bind(l, 0, at(7603))
	listen(l)
	qpa, _ := a.AllocPD()
	cq, _ := a.CreateCQ(8)
	qp, err := qpa.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	connect := func(uid uint64, route func(id uint32)) cmEvent {
		t.Helper()
		id := newID(uid)
		c.do(hostif.OpCMResolveAddr, func(m *hostif.Msg) {
			m.U32(id)
			putAddr(m, netip.AddrPortFrom(addrA, 0))
			putAddr(m, netip.AddrPortFrom(addrA, 7603))
		})
		c.expect(hostif.CMEventAddrResolved)
		c.call(c.cmd, hostif.OpCMConnect, int32(unix.EINVAL), func(m *hostif.Msg) { // no route yet
			m.U32(id).U32(qp.QPN()).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes(nil)
		})
		route(id)
		c.expect(hostif.CMEventRouteResolved)
		c.call(c.cmd, hostif.OpCMResolveRoute, int32(unix.EINVAL), func(m *hostif.Msg) { m.U32(id) }) // routed already
		c.do(hostif.OpCMConnect, func(m *hostif.Msg) {
			m.U32(id).U32(qp.QPN()).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes(nil)
		})
		e := c.expect(hostif.CMEventConnectRequest)
		c.do(hostif.OpCMReject, func(m *hostif.Msg) { m.U32(e.id).U8(28).Bytes(nil) })
		c.expect(hostif.CMEventRejected)
		return e
	}
	attrs := func(id uint32, s rnic.QPState) (tclass, hop uint8, flow uint32, mtu, timeout uint8) {
		t.Helper()
		r := c.do(hostif.OpCMInitQPAttr, func(m *hostif.Msg) { m.U32(id).U8(uint8(s)) })
		r.U32()
		r.U8()
		mtu = r.U8()
		r.Fixed(4 + 4 + 4 + 1 + 1 + 1)
		timeout = r.U8()
		r.Fixed(1 + 1 + 4 + 2 + 1 + 4 + 16 + 1)
		hop, flow, tclass = r.U8(), r.U32(), r.U8()
		return
	}
	e := connect(9, func(id uint32) {
		opt(id, hostif.CMOptTOS, 0x48, 0)
		opt(id, hostif.CMOptAckTimeout, 12, 0)
		c.do(hostif.OpCMResolveRoute, func(m *hostif.Msg) { m.U32(id) })
	})
	if tc, hop, _, _, _ := attrs(e.id, rnic.QPSRTR); tc != 0x48 || hop != 64 {
		t.Errorf("the passive side's RTR: traffic class %#x hop limit %d, want the TOS 0x48 and 64", tc, hop)
	}
	if _, _, _, _, to := attrs(e.id, rnic.QPSRTS); to != 15 { // cm_ack_timeout(15, 12-1)
		t.Errorf("the passive side's RTS timeout %d, want the REQ's 15", to)
	}
	peer := wire.GIDFromAddr(addrA)
	e = connect(10, func(id uint32) {
		c.do(hostif.OpCMSetPath, func(m *hostif.Msg) {
			m.U32(id).Fixed(peer[:]).U8(uint8(rnic.MTU512)).U8(9).U8(0x28).U32(0x1234).U8(16)
		})
	})
	if tc, hop, flow, mtu, _ := attrs(e.id, rnic.QPSRTR); tc != 0x28 || hop != 9 || flow != 0x1234 || mtu != uint8(rnic.MTU512) {
		t.Errorf("the passive side's RTR after a path: tc %#x hop %d flow %#x mtu %d, want the path's", tc, hop, flow, mtu)
	}
	if _, _, _, _, to := attrs(e.id, rnic.QPSRTS); to != 17 { // cm_ack_timeout(15, 16)
		t.Errorf("the passive side's RTS timeout %d after a path, want 17", to)
	}
}
