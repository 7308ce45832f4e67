package cm

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// Listener takes the connection requests for one rdma_cm port (port space
// TCP) on a device, as rdma_listen on an RDMA_PS_TCP id does.
type Listener struct {
	q   backlog[*Request]
	cfg Config
}

// Request is a connection request a Listener received (rdma_cm's
// CONNECT_REQUEST): Accept or Reject it.
type Request struct {
	l      *Listener
	c      *conn
	req    mad.REQ
	local  netip.AddrPort
	remote netip.AddrPort
	events chan Event
}

// Listen listens for connections to port on dev (its address; the
// device's CM answers every REQ that reaches it for the port's service
// ID). cfg is what Accept sets up each connection with.
func Listen(dev *rnic.Device, port uint16, cfg *Config) (*Listener, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	a, err := agentOf(dev)
	if err != nil {
		return nil, err
	}
	l := &Listener{q: newBacklog[*Request](a, mad.ServiceID(mad.PortSpaceTCP, port), port, cfg.Backlog), cfg: *cfg}
	if err := l.q.listen(l); err != nil {
		return nil, err
	}
	return l, nil
}

// Addr returns the address and port the listener serves.
func (l *Listener) Addr() netip.AddrPort { return netip.AddrPortFrom(l.q.a.gid.Addr(), l.q.port) }

// request is the machine's: a REQ for the listener's service.
func (l *Listener) request(c *conn, msg mad.Message) bool {
	req, ok := msg.(*mad.REQ)
	if !ok {
		return false // a SIDR_REQ for a TCP port: the service is not a UD one
	}
	h, err := mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
	if err != nil || h.Dst.Addr().Unmap() != l.q.a.gid.Addr() {
		// Not rdma_cm's, or for another address than ours.
		return false
	}
	r := &Request{l: l, c: c, req: *req, local: netip.AddrPortFrom(h.Dst.Addr().Unmap(), l.q.port),
		remote: netip.AddrPortFrom(h.Src.Addr().Unmap(), h.Src.Port()), events: make(chan Event, 4)}
	c.user = r
	c.autoDREP = true
	return l.q.offer(r)
}

// Next waits for the next request.
func (l *Listener) Next(ctx context.Context) (*Request, error) { return l.q.next(ctx) }

// Accept waits for the next connection request and accepts it with the
// listener's Config.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	for {
		r, err := l.Next(ctx)
		if err != nil {
			return nil, err
		}
		c, err := r.Accept(ctx, nil)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// That peer went away: wait for the next.
	}
}

// Close stops listening; requests not taken yet are rejected.
func (l *Listener) Close() error { return l.q.close(l) }

// RemoteAddr and LocalAddr are the request's addresses and ports, from
// rdma_cm's header.
func (r *Request) RemoteAddr() netip.AddrPort { return r.remote }
func (r *Request) LocalAddr() netip.AddrPort  { return r.local }

// PrivateData returns the application's private data of the REQ (after
// rdma_cm's header).
func (r *Request) PrivateData() []byte { return clone(r.req.PrivateData[mad.CMAHeaderSize:]) }

func (r *Request) repReceived(*mad.REP) error { return fmt.Errorf("cm: REP for a passive connection") }

// event is the machine's, until Accept hands the connection to a Conn.
func (r *Request) event(ev Event) {
	select {
	case r.events <- ev:
	default:
	}
}

// Reject refuses the request (a REJ, reason 28, consumer defined, with
// up to 148 bytes of private data).
func (r *Request) Reject(private []byte) error {
	if len(private) > mad.REJPrivateLen {
		return fmt.Errorf("cm: Reject: %d bytes of private data, a REJ carries %d", len(private), mad.REJPrivateLen)
	}
	return r.l.q.a.do(func(m *machine) error {
		return m.step(r.c, &event{in: inReject, reason: mad.RejConsumerDefined, private: private})
	})
}

// Accept accepts the request: it makes the QP (cfg, or the listener's
// Config if nil), moves it to RTS with the REQ's values, sends the REP
// and waits for the RTU. The peer may send as soon as it has the REP.
func (r *Request) Accept(ctx context.Context, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &r.l.cfg
	}
	if len(cfg.PrivateData) > mad.REPPrivateLen {
		return nil, fmt.Errorf("cm: Accept: %d bytes of private data, a REP carries %d", len(cfg.PrivateData), mad.REPPrivateLen)
	}
	a := r.l.q.a
	c, err := newConnQP(a, cfg)
	if err != nil {
		_ = r.l.q.a.do(func(m *machine) error {
			return m.step(r.c, &event{in: inReject, reason: mad.RejNoResources})
		})
		return nil, fmt.Errorf("cm: Accept: %w", err)
	}
	c.c, c.local, c.remote = r.c, r.local, r.remote
	c.peer = r.PrivateData()
	at := a.dev.Attr()
	req := &r.req
	mtu := min(rnic.MTU(req.PathMTU), at.ActiveMTU) // the path's: the smaller
	if mtu < rnic.MTU256 {
		_ = a.do(func(m *machine) error { return m.step(r.c, &event{in: inReject, reason: mad.RejInvalidMTU}) })
		c.free()
		return nil, fmt.Errorf("cm: Accept: the REQ's path MTU code %d is invalid", req.PathMTU)
	}
	err = c.readyQP(mtu, req.LocalQPN, wire.PSN(req.StartingPSN), req.InitiatorDepth, req.ResponderResources,
		rnrRetry(int(req.RetryCount)), rnrRetry(int(req.RNRRetryCount)))
	if err == nil {
		rep := &mad.REP{LocalQPN: c.qp.QPN(), StartingPSN: uint32(c.psn),
			ResponderResources: cfg.responder(at), InitiatorDepth: cfg.initiator(at),
			TargetACKDelay: TargetACKDelay, RNRRetryCount: uint8(cfg.rnrRetry()), SRQ: cfg.SRQ != nil}
		copy(rep.PrivateData[:], cfg.PrivateData)
		err = a.do(func(m *machine) error {
			r.c.user = c
			return m.step(r.c, &event{in: inAccept, rep: rep})
		})
	}
	if err != nil {
		_ = a.do(func(m *machine) error { return m.step(r.c, &event{in: inReject, reason: mad.RejNoResources}) })
		c.free()
		return nil, fmt.Errorf("cm: Accept: %w", err)
	}
	// Events that came to the request before the Conn took over.
	select {
	case ev := <-r.events:
		c.event(ev)
	default:
	}
	select {
	case ev := <-c.events:
		if ev.Type == EventEstablished {
			return c, nil
		}
		c.free()
		return nil, fmt.Errorf("cm: Accept from %v: %w", r.remote, eventErr(ev))
	case <-ctx.Done():
		_ = a.do(func(m *machine) error { return m.step(r.c, &event{in: inReject}) })
		c.free()
		return nil, fmt.Errorf("cm: Accept from %v: %w", r.remote, ctx.Err())
	case <-a.done:
		c.free()
		return nil, fmt.Errorf("cm: Accept: %w", a.err)
	}
}
