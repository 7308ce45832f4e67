package cm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// Config is what Dial, Listen and Request.Accept set up a connection's
// QP with (rdma_cm's struct rdma_conn_param and the QP's init
// attributes). The zero Config makes a QP of 16 WRs each way with one
// SGE, on a PD and a CQ of its own that Close frees, granting the peer
// no remote rights.
type Config struct {
	// PD is the QP's protection domain (nil: a PD of the connection's own).
	PD *rnic.PD
	// SendCQ and RecvCQ take the QP's completions (nil: one CQ of the
	// connection's own, of Cap.MaxSendWR+Cap.MaxRecvWR entries, for both).
	SendCQ, RecvCQ *rnic.CQ
	// SRQ, if set, supplies the QP's receive WQEs.
	SRQ *rnic.SRQ
	// Cap are the QP's queue sizes (zero: 16 WRs each way, 1 SGE each).
	Cap rnic.QPCap
	// Access are the remote rights the QP grants its peer
	// (AccessRemoteWrite, ...; 0: none).
	Access rnic.Access
	// ResponderResources is how many READs and atomics the QP takes
	// outstanding from the peer, and InitiatorDepth how many it may have
	// outstanding at the peer (responder_resources, initiator_depth; 0:
	// 1, rping's; at most the device's limits). The connection uses the
	// smaller of each side's offer and the other's matching value.
	ResponderResources, InitiatorDepth uint8
	// RetryCount and RNRRetryCount are the QP's retry counts, 0..7 (0:
	// 7; negative: none), sent to the peer as rdma_cm does: the passive
	// QP uses the REQ's, the active QP the REP's RNR retry count.
	RetryCount, RNRRetryCount int
	// Timeout is the QP's local ACK timeout exponent (0: 14, 67 ms; Linux's
	// rdma_cm uses 19, 2.1 s).
	Timeout uint8
	// PrivateData is sent to the peer: at most 56 bytes in a REQ (after
	// rdma_cm's header), 196 in a REP.
	PrivateData []byte
	// Backlog bounds the requests a Listener holds for Accept (0: 64).
	Backlog int
	// OnQP, if set, is called with the connection's QP (in INIT; a UD
	// endpoint's in RTS) before the REQ, REP or SIDR_REP goes: the place
	// to post receives, as an rdma_cm program posts them before
	// rdma_connect or rdma_accept, so that a peer sending as soon as it
	// is connected finds them (a UD datagram without one is lost). An
	// error abandons the connection.
	OnQP func(qp *rnic.QP) error
}

// Errors.
var (
	// ErrRejected is wrapped by the error of a connection the peer
	// rejected; errors.As finds the *RejectError.
	ErrRejected = errors.New("cm: connection rejected")
	// ErrUnreachable is wrapped when the peer did not answer after every
	// retry (rdma_cm's UNREACHABLE, -ETIMEDOUT).
	ErrUnreachable = errors.New("cm: peer unreachable")
	// ErrDisconnected is a connection's Err after a disconnection.
	ErrDisconnected = errors.New("cm: disconnected")
)

// RejectError is a REJ (or a SIDR_REP's refusal): its reason and the
// peer's private data.
type RejectError struct {
	Reason      mad.RejReason
	SIDRStatus  mad.SIDRStatus
	PrivateData []byte
}

func (e *RejectError) Error() string {
	if e.SIDRStatus != 0 {
		return fmt.Sprintf("cm: service resolution refused (SIDR status %d)", e.SIDRStatus)
	}
	return fmt.Sprintf("cm: connection rejected: reason %d (%v)", uint16(e.Reason), e.Reason)
}

func (e *RejectError) Unwrap() error { return ErrRejected }

// Conn is a connection: an RC QP in RTS, connected to the peer's through
// the connection manager (rdma_cm's connected rdma_cm_id).
type Conn struct {
	a      *agent
	c      *conn
	qp     *rnic.QP
	own    resources
	cfg    Config
	local  netip.AddrPort
	remote netip.AddrPort
	peer   []byte // the peer's private data (REP or REQ)
	psn    wire.PSN

	mu      sync.Mutex
	events  chan Event // the machine's events, never blocking it
	done    chan struct{}
	doneErr error
	closed  bool
}

// resources are the CQ and PD a connection or UD endpoint made for its
// QP (nil: the Config's), freed with the QP.
type resources struct {
	pd *rnic.PD
	cq *rnic.CQ
}

// free destroys qp (if any) and what was made for it.
func (r *resources) free(qp *rnic.QP) {
	if qp != nil {
		_ = qp.Destroy()
	}
	if r.cq != nil {
		_ = r.cq.Destroy()
	}
	if r.pd != nil {
		_ = r.pd.Dealloc()
	}
}

// QP returns the connection's QP.
func (c *Conn) QP() *rnic.QP { return c.qp }

// LocalAddr and RemoteAddr return the connection's IP addresses and
// rdma_cm ports.
func (c *Conn) LocalAddr() netip.AddrPort  { return c.local }
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// PrivateData returns what the peer sent with its REP (Dial) or REQ
// (after rdma_cm's header; Accept).
func (c *Conn) PrivateData() []byte { return c.peer }

// Done is closed when the connection ends: the peer disconnected, the
// device closed, or Close.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why Done was closed (nil before).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doneErr
}

// State returns the connection's CM state.
func (c *Conn) State() State {
	var s State
	_ = c.a.do(func(*machine) error { s = c.c.state; return nil })
	return s
}

// event is the machine's: it must not block.
func (c *Conn) event(ev Event) {
	select {
	case c.events <- ev:
	default: // the consumer has one outcome to wait for; later events only end the connection
	}
	switch ev.Type {
	case EventDisconnected, EventUnreachable, EventRejected, EventConnectError:
		c.end(ErrDisconnected)
	}
}

// end closes Done once.
func (c *Conn) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.doneErr == nil {
		c.doneErr = err
		close(c.done)
	}
}

// repReceived readies the active QP from the REP: RTR with the peer's
// QPN and PSN, then RTS.
func (c *Conn) repReceived(rep *mad.REP) error {
	return c.readyQP(c.qp.PD().Device().Attr().ActiveMTU, rep.LocalQPN, wire.PSN(rep.StartingPSN), rep.InitiatorDepth, rep.ResponderResources,
		c.cfg.retry(), rnrRetry(int(rep.RNRRetryCount)))
}

// readyQP moves the QP to RTR and RTS (its INIT was done at creation).
// The starting PSN a side sends in its REQ or REP is the PSN it expects
// to receive: each QP sends from the peer's (Linux's CM does so; rping's
// capture, testdata/roce/rdmacm_rping.pcap, shows the client's first
// SEND with the REP's starting PSN and the server's READ with the REQ's).
func (c *Conn) readyQP(mtu rnic.MTU, peerQPN uint32, peerPSN wire.PSN, peerInitiator, peerResponder uint8, retry, rnr int) error {
	at := c.qp.PD().Device().Attr()
	g := rnic.GIDFromAddr(c.remote.Addr())
	rtr := rnic.QPAttr{State: rnic.QPSRTR, PathMTU: mtu, DestQPN: peerQPN, RQPSN: rnic.PSN(c.psn),
		AH:              rnic.AHAttr{DGID: g, SGIDIndex: rnic.AddrGIDIndex, HopLimit: 64},
		MaxDestRdAtomic: min(c.cfg.responder(at), max(peerInitiator, 1)), MinRNRTimer: MinRNRTimer}
	if err := c.qp.Modify(&rtr, rnic.QPAttrState|rnic.QPAttrAV|rnic.QPAttrPathMTU|rnic.QPAttrDestQPN|
		rnic.QPAttrRQPSN|rnic.QPAttrMaxDestRdAtomic|rnic.QPAttrMinRNRTimer); err != nil {
		return err
	}
	timeout := c.cfg.Timeout
	if timeout == 0 {
		timeout = 14
	}
	rts := rnic.QPAttr{State: rnic.QPSRTS, SQPSN: rnic.PSN(peerPSN), Timeout: timeout, RetryCnt: uint8(retry),
		RNRRetry: uint8(rnr), MaxRdAtomic: min(c.cfg.initiator(at), max(peerResponder, 1))}
	return c.qp.Modify(&rts, rnic.QPAttrState|rnic.QPAttrSQPSN|rnic.QPAttrTimeout|rnic.QPAttrRetryCnt|
		rnic.QPAttrRNRRetry|rnic.QPAttrMaxQPRdAtomic)
}

func (cfg *Config) responder(at rnic.DeviceAttr) uint8 {
	return uint8(min(int(max(cfg.ResponderResources, 1)), at.MaxQPRdAtom))
}

func (cfg *Config) initiator(at rnic.DeviceAttr) uint8 {
	return uint8(min(int(max(cfg.InitiatorDepth, 1)), at.MaxQPInitRdAtom))
}

func (cfg *Config) retry() int    { return rnrRetry(cfg.RetryCount) }
func (cfg *Config) rnrRetry() int { return rnrRetry(cfg.RNRRetryCount) }

// rnrRetry resolves a retry count: 0 is 7, negative 0, at most 7.
func rnrRetry(v int) int {
	switch {
	case v == 0:
		return 7
	case v < 0:
		return 0
	}
	return min(v, 7)
}

// newConnQP makes a connection's RC QP, in INIT, and what it needs.
func newConnQP(a *agent, cfg *Config) (*Conn, error) {
	c, err := newQP(a, cfg, rnic.RC)
	if err != nil {
		return nil, err
	}
	if err := c.qp.Modify(&rnic.QPAttr{State: rnic.QPSInit, Port: 1, AccessFlags: cfg.Access},
		rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags); err != nil {
		c.free()
		return nil, err
	}
	if cfg.OnQP != nil {
		if err := cfg.OnQP(c.qp); err != nil {
			c.free()
			return nil, err
		}
	}
	return c, nil
}

// ephemeralPort is an rdma_cm port for an active id (Linux takes one of
// the local port range).
func ephemeralPort() uint16 { return uint16(rand.IntN(61000-32768) + 32768) }

// newQP makes a QP of type typ in RESET, with the PD and CQ cfg names or
// its own.
func newQP(a *agent, cfg *Config, typ rnic.QPType) (*Conn, error) {
	c := &Conn{a: a, cfg: *cfg, events: make(chan Event, 4), done: make(chan struct{}),
		psn: wire.PSN(rand.Uint32() & 0xFFFFFF)}
	pd := cfg.PD
	if pd == nil {
		var err error
		if pd, err = a.dev.AllocPD(); err != nil {
			return nil, err
		}
		c.own.pd = pd
	}
	cp := cfg.Cap
	if cp == (rnic.QPCap{}) {
		cp = rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	}
	scq, rcq := cfg.SendCQ, cfg.RecvCQ
	if scq == nil || rcq == nil {
		cq, err := a.dev.CreateCQ(int(cp.MaxSendWR + cp.MaxRecvWR))
		if err != nil {
			c.free()
			return nil, err
		}
		c.own.cq = cq
		scq, rcq = or(scq, cq), or(rcq, cq)
	}
	qp, err := pd.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: scq, RecvCQ: rcq, SRQ: cfg.SRQ, Cap: cp})
	if err != nil {
		c.free()
		return nil, err
	}
	c.qp = qp
	return c, nil
}

func or[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// free destroys the QP and what the connection made for it.
func (c *Conn) free() { c.own.free(c.qp) }

// Close disconnects (a DREQ, which the peer answers) and destroys the QP
// and what the connection made for it. It waits until the DREQ has left
// the NIC (at most a second), not for the peer: the connection manager
// goes on through the DREP and the time wait on its own while the device
// is open.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("cm: Close: %w", rnic.ErrClosed)
	}
	c.closed = true
	c.mu.Unlock()
	_ = c.a.do(func(m *machine) error { return m.step(c.c, &event{in: inDisconnect}) })
	c.a.drain(time.Second)
	c.end(ErrDisconnected)
	if c.qp != nil {
		_ = c.qp.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState)
	}
	c.free()
	return nil
}

// Dial connects to the rdma_cm service at raddr (an RC connection, port
// space TCP, as rdma_connect to an RDMA_PS_TCP id) from dev, and returns
// the connection with its QP in RTS. It fails with a *RejectError if the
// peer rejects (reason 8: nobody listens on the port), ErrUnreachable if
// it never answers (the REQ is sent 16 times, 6 s apart, as Linux's
// rdma_cm does), or ctx's error, after which the peer is told with a REJ.
//
// With dev nil, the device is the one of this process (rnic.Devices)
// that sends to raddr, as rdma_resolve_addr picks a device: the one with
// raddr's address (a connection to itself), else the one with the
// source address the host's routing picks for raddr.
func Dial(ctx context.Context, dev *rnic.Device, raddr netip.AddrPort, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if dev == nil {
		var err error
		if dev, err = RouteDevice(raddr.Addr()); err != nil {
			return nil, fmt.Errorf("cm: Dial %v: %w", raddr, err)
		}
	}
	if len(cfg.PrivateData) > mad.REQPrivateLen-mad.CMAHeaderSize {
		return nil, fmt.Errorf("cm: Dial: %d bytes of private data, a REQ carries %d", len(cfg.PrivateData), mad.REQPrivateLen-mad.CMAHeaderSize)
	}
	a, err := agentOf(dev)
	if err != nil {
		return nil, err
	}
	src := a.gid.Addr()
	dst := raddr.Addr().Unmap()
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("cm: Dial %v from %v: the address families differ", raddr, src)
	}
	c, err := newConnQP(a, cfg)
	if err != nil {
		return nil, fmt.Errorf("cm: Dial: %w", err)
	}
	c.local, c.remote = netip.AddrPortFrom(src, ephemeralPort()), netip.AddrPortFrom(dst, raddr.Port())
	at := dev.Attr()
	peer := wire.GIDFromAddr(dst)
	req := rdmacmREQ(mad.PortSpaceTCP, c.local, c.remote, &reqParams{qpn: c.qp.QPN(), psn: uint32(c.psn),
		responder: cfg.responder(at), initiator: cfg.initiator(at), retry: uint8(cfg.retry()), rnrRetry: uint8(cfg.rnrRetry()),
		mtu: uint8(at.ActiveMTU), private: cfg.PrivateData})
	err = a.do(func(m *machine) error {
		c.c = m.newConn(c)
		c.c.autoDREP = true
		m.connect(c.c, peer, req, PacketLifeTime)
		return nil
	})
	if err != nil {
		c.free()
		return nil, fmt.Errorf("cm: Dial: %w", err)
	}
	select {
	case ev := <-c.events:
		if ev.Type == EventEstablished {
			c.peer = ev.PrivateData
			return c, nil
		}
		c.free()
		return nil, fmt.Errorf("cm: Dial %v: %w", raddr, eventErr(ev))
	case <-ctx.Done():
		_ = a.do(func(m *machine) error { return m.step(c.c, &event{in: inDisconnect}) })
		c.free()
		return nil, fmt.Errorf("cm: Dial %v: %w", raddr, ctx.Err())
	case <-a.done:
		c.free()
		return nil, fmt.Errorf("cm: Dial %v: %w", raddr, a.err)
	}
}

// eventErr is the error of an event that ends a connection attempt.
func eventErr(ev Event) error {
	switch ev.Type {
	case EventRejected:
		return &RejectError{Reason: ev.Reason, PrivateData: ev.PrivateData}
	case EventUnreachable:
		if ev.SIDRStatus != 0 {
			return &RejectError{SIDRStatus: ev.SIDRStatus, PrivateData: ev.PrivateData}
		}
		return ErrUnreachable
	}
	return fmt.Errorf("cm: %v", ev)
}

// ErrNoDevice is wrapped when no open device serves an address.
var ErrNoDevice = errors.New("no open rnic device serves the address")

// RouteDevice returns the device of this process that sends to dst (see
// Dial).
func RouteDevice(dst netip.Addr) (*rnic.Device, error) {
	dst = dst.Unmap()
	find := func(a netip.Addr) *rnic.Device {
		for _, d := range rnic.Devices() {
			if g, err := d.GID(rnic.AddrGIDIndex); err == nil && g.Addr() == a {
				return d
			}
		}
		return nil
	}
	if d := find(dst); d != nil {
		return d, nil
	}
	// The source address the host's routing picks (a connected UDP
	// socket's: nothing is sent).
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 4791)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %v", ErrNoDevice, dst, err)
	}
	src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	c.Close()
	if d := find(src); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %v (the route's source is %v)", ErrNoDevice, dst, src)
}
