package cm

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// UD is an unreliable datagram endpoint of rdma_cm's UDP port space: a
// UD QP (Q_Key UDPQKey) and, on the side that resolved the service, an
// address handle to the peer and the QPN and Q_Key its SIDR_REP named
// (rdma_cm's ESTABLISHED event of an RDMA_PS_UDP id).
type UD struct {
	a         *agent
	qp        *rnic.QP
	own       resources
	ah        *rnic.AH
	remoteQPN uint32
	qkey      uint32
	local     netip.AddrPort
	remote    netip.AddrPort
	private   []byte
	events    chan Event

	mu     sync.Mutex
	closed bool
}

// QP returns the endpoint's UD QP, in RTS.
func (u *UD) QP() *rnic.QP { return u.qp }

// AH returns the address handle to the peer (nil on the passive side,
// which answers the peer's datagrams: rnic.WC's SrcQP and the GRH name
// the sender).
func (u *UD) AH() *rnic.AH { return u.ah }

// RemoteQPN and RemoteQKey are the peer's QP and Q_Key, as its SIDR_REP
// named them (zero on the passive side).
func (u *UD) RemoteQPN() uint32  { return u.remoteQPN }
func (u *UD) RemoteQKey() uint32 { return u.qkey }

// LocalAddr and RemoteAddr are the endpoint's and the peer's addresses
// and ports.
func (u *UD) LocalAddr() netip.AddrPort  { return u.local }
func (u *UD) RemoteAddr() netip.AddrPort { return u.remote }

// PrivateData returns the peer's private data (its SIDR_REP's; on the
// passive side its SIDR_REQ's after rdma_cm's header).
func (u *UD) PrivateData() []byte { return u.private }

func (u *UD) repReceived(*mad.REP) error { return fmt.Errorf("cm: REP for a UD endpoint") }

func (u *UD) event(ev Event) {
	select {
	case u.events <- ev:
	default:
	}
}

// Close destroys the endpoint's QP and what it made for it.
func (u *UD) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return fmt.Errorf("cm: Close: %w", rnic.ErrClosed)
	}
	u.closed = true
	u.free()
	return nil
}

func (u *UD) free() {
	if u.ah != nil {
		_ = u.ah.Destroy()
	}
	u.own.free(u.qp)
}

// newUD makes a UD QP in RTS with rdma_cm's Q_Key.
func newUD(a *agent, cfg *Config) (*UD, error) {
	c, err := newQP(a, cfg, rnic.UD)
	if err != nil {
		return nil, err
	}
	u := &UD{a: a, qp: c.qp, own: c.own, events: make(chan Event, 4)}
	if err := u.qp.Connect(rnic.Endpoint{}, rnic.ConnParams{QKey: UDPQKey}); err != nil {
		u.free()
		return nil, err
	}
	if cfg.OnQP != nil {
		if err := cfg.OnQP(u.qp); err != nil {
			u.free()
			return nil, err
		}
	}
	return u, nil
}

// DialUD resolves the UD service at raddr (SIDR_REQ, rdma_cm's port space
// UDP) from dev, and returns an endpoint whose QP and address handle
// reach the QP the peer named. It fails with a *RejectError carrying the
// SIDR status if the peer refuses (status 1: nobody listens on the
// port), ErrUnreachable if it never answers (16 SIDR_REQs, 4 s apart).
// With dev nil, the device is the one that sends to raddr, as for Dial.
func DialUD(ctx context.Context, dev *rnic.Device, raddr netip.AddrPort, cfg *Config) (*UD, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if dev == nil { // as Dial
		var err error
		if dev, err = RouteDevice(raddr.Addr()); err != nil {
			return nil, fmt.Errorf("cm: DialUD %v: %w", raddr, err)
		}
	}
	if len(cfg.PrivateData) > mad.SIDRREQPrivateLen-mad.CMAHeaderSize {
		return nil, fmt.Errorf("cm: DialUD: %d bytes of private data, a SIDR_REQ carries %d", len(cfg.PrivateData), mad.SIDRREQPrivateLen-mad.CMAHeaderSize)
	}
	a, err := agentOf(dev)
	if err != nil {
		return nil, err
	}
	src, dst := a.gid.Addr(), raddr.Addr().Unmap()
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("cm: DialUD %v from %v: the address families differ", raddr, src)
	}
	u, err := newUD(a, cfg)
	if err != nil {
		return nil, fmt.Errorf("cm: DialUD: %w", err)
	}
	u.local, u.remote = netip.AddrPortFrom(src, ephemeralPort()), netip.AddrPortFrom(dst, raddr.Port())
	req := rdmacmSIDRREQ(mad.PortSpaceUDP, u.local, u.remote, cfg.PrivateData)
	var c *conn
	err = a.do(func(m *machine) error {
		c = m.newConn(u)
		m.resolve(c, wire.GIDFromAddr(dst), req)
		return nil
	})
	if err != nil {
		u.free()
		return nil, fmt.Errorf("cm: DialUD: %w", err)
	}
	select {
	case ev := <-u.events:
		if ev.Type != EventEstablished {
			u.free()
			return nil, fmt.Errorf("cm: DialUD %v: %w", raddr, eventErr(ev))
		}
		u.remoteQPN, u.qkey, u.private = ev.QPN, ev.QKey, ev.PrivateData
		if u.ah, err = u.qp.PD().CreateAH(rnic.AHAttr{DGID: rnic.GIDFromAddr(dst), SGIDIndex: rnic.AddrGIDIndex, HopLimit: 64}); err != nil {
			u.free()
			return nil, fmt.Errorf("cm: DialUD: %w", err)
		}
		return u, nil
	case <-ctx.Done():
		_ = a.do(func(m *machine) error { return m.step(c, &event{in: inDisconnect}) })
		u.free()
		return nil, fmt.Errorf("cm: DialUD %v: %w", raddr, ctx.Err())
	case <-a.done:
		u.free()
		return nil, fmt.Errorf("cm: DialUD %v: %w", raddr, a.err)
	}
}

// UDListener takes the service resolution requests (SIDR_REQs) for one
// rdma_cm port of port space UDP on a device.
type UDListener struct {
	q   backlog[*UDRequest]
	cfg Config
}

// UDRequest is a SIDR_REQ for a UDListener: Accept or Reject it.
type UDRequest struct {
	l      *UDListener
	c      *conn
	local  netip.AddrPort
	remote netip.AddrPort
	data   []byte
}

// ListenUD listens for SIDR_REQs to UDP-space port on dev.
func ListenUD(dev *rnic.Device, port uint16, cfg *Config) (*UDListener, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	a, err := agentOf(dev)
	if err != nil {
		return nil, err
	}
	l := &UDListener{q: newBacklog[*UDRequest](a, mad.ServiceID(mad.PortSpaceUDP, port), port, cfg.Backlog), cfg: *cfg}
	if err := l.q.listen(l); err != nil {
		return nil, err
	}
	return l, nil
}

// request is the machine's: a SIDR_REQ for the listener's service.
func (l *UDListener) request(c *conn, msg mad.Message) bool {
	req, ok := msg.(*mad.SIDRREQ)
	if !ok {
		return false
	}
	h, err := mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
	if err != nil || h.Dst.Addr().Unmap() != l.q.a.gid.Addr() {
		return false
	}
	r := &UDRequest{l: l, c: c, local: netip.AddrPortFrom(h.Dst.Addr().Unmap(), l.q.port),
		remote: netip.AddrPortFrom(h.Src.Addr().Unmap(), h.Src.Port()), data: clone(req.PrivateData[mad.CMAHeaderSize:])}
	c.user = r
	return l.q.offer(r)
}

// Next waits for the next request.
func (l *UDListener) Next(ctx context.Context) (*UDRequest, error) { return l.q.next(ctx) }

// Accept waits for the next request and accepts it with the listener's
// Config.
func (l *UDListener) Accept(ctx context.Context) (*UD, error) {
	r, err := l.Next(ctx)
	if err != nil {
		return nil, err
	}
	return r.Accept(nil)
}

// Close stops listening; requests not taken yet are refused.
func (l *UDListener) Close() error { return l.q.close(l) }

func (r *UDRequest) repReceived(*mad.REP) error { return fmt.Errorf("cm: REP for a UD request") }
func (r *UDRequest) event(Event)                {}

// RemoteAddr and LocalAddr are the request's addresses and ports.
func (r *UDRequest) RemoteAddr() netip.AddrPort { return r.remote }
func (r *UDRequest) LocalAddr() netip.AddrPort  { return r.local }

// PrivateData is the SIDR_REQ's private data after rdma_cm's header.
func (r *UDRequest) PrivateData() []byte { return r.data }

// Accept makes a UD QP (cfg, or the listener's Config if nil) and names
// it in the SIDR_REP (status 0, Q_Key UDPQKey), as rdma_accept on a UD
// id does.
func (r *UDRequest) Accept(cfg *Config) (*UD, error) {
	if cfg == nil {
		cfg = &r.l.cfg
	}
	if len(cfg.PrivateData) > mad.SIDRREPPrivateLen {
		return nil, fmt.Errorf("cm: Accept: %d bytes of private data, a SIDR_REP carries %d", len(cfg.PrivateData), mad.SIDRREPPrivateLen)
	}
	u, err := newUD(r.l.q.a, cfg)
	if err != nil {
		_ = r.Reject(nil)
		return nil, fmt.Errorf("cm: Accept: %w", err)
	}
	u.local, u.remote, u.private = r.local, r.remote, r.data
	rep := &mad.SIDRREP{Status: uint8(mad.SIDRQPValid), QPN: u.qp.QPN(), QKey: UDPQKey}
	copy(rep.PrivateData[:], cfg.PrivateData)
	if err := r.l.q.a.do(func(m *machine) error { return m.step(r.c, &event{in: inAccept, sidrRep: rep}) }); err != nil {
		u.free()
		return nil, fmt.Errorf("cm: Accept: %w", err)
	}
	return u, nil
}

// Reject refuses the request (SIDR_REP status 2, rejected).
func (r *UDRequest) Reject(private []byte) error {
	if len(private) > mad.SIDRREPPrivateLen {
		return fmt.Errorf("cm: Reject: %d bytes of private data, a SIDR_REP carries %d", len(private), mad.SIDRREPPrivateLen)
	}
	return r.l.q.a.do(func(m *machine) error { return m.step(r.c, &event{in: inReject, private: private}) })
}
