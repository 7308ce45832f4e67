package cm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire/mad"
)

// udaddy's exchange (rdma-core's librdmacm/examples/udaddy.c): once the
// SIDR_REP named the server's QP, the client sends count datagrams of
// size bytes, each a SEND with immediate data naming its QP; the server
// answers with as many, to that QP at the address they came from.

type udPeer struct {
	qp  *rnic.QP
	cq  *rnic.CQ
	mr  *rnic.MR
	buf []byte
}

// newUDPeer registers buffers on qp's PD and posts count receives.
func newUDPeer(t *testing.T, qp *rnic.QP, count, size int) *udPeer {
	t.Helper()
	_, init, err := qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	p := &udPeer{qp: qp, cq: init.SendCQ, buf: make([]byte, count*(40+size)+size)}
	if p.mr, err = qp.PD().RegMR(p.buf, rnic.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	for i := range count {
		if err := qp.PostRecv(rnic.RecvWR{WRID: uint64(100 + i), SGL: []rnic.SGE{p.mr.SGE(i*(40+size), 40+size)}}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// send sends count datagrams to qpn through ah and waits for their
// completions.
func (p *udPeer) send(ctx context.Context, ah *rnic.AH, qpn, qkey uint32, count, size int) error {
	off := len(p.buf) - size
	for i := range count {
		copy(p.buf[off:], fmt.Sprintf("datagram %d", i))
		// udaddy names the sending QP in the immediate data, and
		// answers the QP it names.
		if err := p.qp.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRSendWithImm, ImmData: p.qp.QPN(), Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{p.mr.SGE(off, size)}, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey}); err != nil {
			return err
		}
		if _, err := p.wait(ctx, false); err != nil {
			return err
		}
	}
	return nil
}

// wait returns the next completion of a send (recv false) or a receive.
func (p *udPeer) wait(ctx context.Context, recv bool) (rnic.WC, error) {
	wcs := make([]rnic.WC, 1)
	for {
		if _, err := p.cq.Wait(ctx, wcs); err != nil {
			return rnic.WC{}, err
		}
		if wcs[0].Status != rnic.WCSuccess {
			return wcs[0], fmt.Errorf("completion %+v", wcs[0])
		}
		if (wcs[0].Opcode == rnic.WCRecv) == recv {
			return wcs[0], nil
		}
	}
}

// udClient sends count datagrams to the resolved service and receives as
// many answers.
func udClient(ctx context.Context, t *testing.T, u *cm.UD, count, size int) error {
	p := newUDPeer(t, u.QP(), count, size)
	if err := p.send(ctx, u.AH(), u.RemoteQPN(), u.RemoteQKey(), count, size); err != nil {
		return err
	}
	for i := range count {
		if _, err := p.wait(ctx, true); err != nil {
			return fmt.Errorf("answer %d: %w", i, err)
		}
	}
	return nil
}

// udServerConfig is a UD listener's Config whose endpoint posts its
// receives before the SIDR_REP goes (the client sends at once); *peer
// is the endpoint's once accepted.
func udServerConfig(t *testing.T, peer **udPeer, count, size int) *cm.Config {
	return &cm.Config{PrivateData: []byte("udaddy"), OnQP: func(qp *rnic.QP) error {
		*peer = newUDPeer(t, qp, count, size)
		return nil
	}}
}

// udServer receives count datagrams on p and answers their sender with
// as many (the address from the receive's GRH, the QP from its SrcQP).
func udServer(ctx context.Context, p *udPeer, count, size int) error {
	var wc rnic.WC
	for i := range count {
		var err error
		if wc, err = p.wait(ctx, true); err != nil {
			return fmt.Errorf("datagram %d: %w", i, err)
		}
	}
	slot := int(wc.WRID-100) * (40 + size)
	src := netip.AddrFrom4([4]byte(p.buf[slot+32 : slot+36])) // the IPv4 header's source, in the GRH area's last 20 bytes
	ah, err := p.qp.PD().CreateAH(rnic.AHAttr{DGID: rnic.GIDFromAddr(src), SGIDIndex: rnic.AddrGIDIndex})
	if err != nil {
		return err
	}
	defer ah.Destroy()
	qpn := wc.SrcQP
	if wc.Flags&rnic.WCWithImm != 0 {
		qpn = wc.ImmData
	}
	return p.send(ctx, ah, qpn, cm.UDPQKey, count, size)
}

// TestUD: a UD endpoint resolves a UDP-space port with SIDR_REQ and
// SIDR_REP (IBTA §12.11): the reply names the server's QP and Q_Key
// 0x01234567, with which datagrams flow both ways; a port nobody listens
// on gets SIDR status 1, a listener's Reject status 2; a lost SIDR_REQ
// is sent again.
func TestUD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFilter(map[mad.Attr]int{mad.AttrSIDRREQ: 1})
		a, b := devices(t, f)
		var peer *udPeer
		l, err := cm.ListenUD(b, 7174, udServerConfig(t, &peer, 10, 100))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		served := make(chan error, 1)
		go func() {
			u, err := l.Accept(context.Background())
			if err == nil {
				err = udServer(context.Background(), peer, 10, 100)
				u.Close()
			}
			served <- err
		}()
		u, err := cm.DialUD(context.Background(), a, netip.AddrPortFrom(addrB, 7174), nil)
		if err != nil {
			t.Fatal(err)
		}
		if u.RemoteQKey() != cm.UDPQKey || u.RemoteQPN() < 0x11 || string(u.PrivateData()[:6]) != "udaddy" {
			t.Errorf("resolved QPN %#x Q_Key %#x private %q", u.RemoteQPN(), u.RemoteQKey(), u.PrivateData()[:6])
		}
		if err := udClient(context.Background(), t, u, 10, 100); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		u.Close()
		if n := f.count(mad.AttrSIDRREQ); n != 2 {
			t.Errorf("SIDR_REQ sent %d times, want 2 (one lost)", n)
		}

		var rej *cm.RejectError
		if _, err := cm.DialUD(context.Background(), a, netip.AddrPortFrom(addrB, 9), nil); !errors.As(err, &rej) || rej.SIDRStatus != mad.SIDRServiceIDUnknown {
			t.Errorf("DialUD to no listener: %v, want SIDR status 1", err)
		}
		go func() {
			if r, err := l.Next(context.Background()); err == nil {
				r.Reject(nil)
			}
		}()
		if _, err := cm.DialUD(context.Background(), a, netip.AddrPortFrom(addrB, 7174), nil); !errors.As(err, &rej) || rej.SIDRStatus != mad.SIDRRejected {
			t.Errorf("DialUD to a rejecting listener: %v, want SIDR status 2", err)
		}
	})
}

// TestInteropUdaddy: the Go side of udaddy against Linux's udaddy on rxe
// (scripts/interop.sh --cm). RNIC_UDADDY_SERVER=addr:port makes it the
// client of `udaddy`; RNIC_UDADDY_LISTEN=port serves `udaddy -s ADDR`;
// RNIC_CM_ADDR is this side's address. Skipped unless set.
func TestInteropUdaddy(t *testing.T) {
	addr, server, port := os.Getenv("RNIC_CM_ADDR"), os.Getenv("RNIC_UDADDY_SERVER"), os.Getenv("RNIC_UDADDY_LISTEN")
	if addr == "" || server == "" && port == "" {
		t.Skip("skipped: an interop check against udaddy on another machine (scripts/interop.sh --cm)")
	}
	l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr(addr)})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rnic.Open(rnic.Options{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if server != "" {
		u, err := cm.DialUD(ctx, dev, netip.MustParseAddrPort(server), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if err := udClient(ctx, t, u, 10, 100); err != nil {
			t.Fatal(err)
		}
		t.Logf("udaddy client: 10 datagrams each way with %s (QPN %#x, Q_Key %#x)", server, u.RemoteQPN(), u.RemoteQKey())
		return
	}
	var p uint16
	fmt.Sscan(port, &p)
	var peer *udPeer
	ln, err := cm.ListenUD(dev, p, udServerConfig(t, &peer, 10, 100))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	u, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := udServer(ctx, peer, 10, 100); err != nil {
		t.Fatal(err)
	}
	t.Logf("udaddy server: 10 datagrams each way with %v", u.RemoteAddr())
}
