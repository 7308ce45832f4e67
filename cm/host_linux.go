package cm

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// The CM of a NIC process for the host's programs (internal/hostif/cm.go
// is the protocol): rdma_cm ids of rnic's librdmacm, each a connection of
// the machine whose consumer is the id, its events pushed to the
// program's event channel. The program readies its QPs itself with the
// attributes CMInitQPAttr gives, as librdmacm does with the kernel's.

// maxHostEvents bounds the events waiting for a program to read its
// channel; past it the channel is closed (the program sees its channel
// end, rather than the NIC growing without bound).
const maxHostEvents = 4096

// ServeHost serves rdma_cm ids of the host's programs on dev through ln
// (the NIC's CM socket). Only programs of this process's user are
// served. It returns when ln fails or is closed, after closing every
// program's connection (destroying their ids).
func ServeHost(dev *rnic.Device, ln net.Listener) error {
	a, err := agentOf(dev)
	if err != nil {
		return err
	}
	h := newHostCM(a)
	if err := hostif.Serve(ln, h.serve); !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

type portKey struct {
	ps   mad.PortSpace
	port uint16
}

// hostCM is one NIC's CM service: its channels, and the ports its ids
// hold. Its state is guarded by the agent's lock (a.mu), so that the
// machine's events and the commands see one state.
type hostCM struct {
	a        *agent
	channels map[uint32]*hostChannel
	nextTok  uint32
	// ports: each port's holders in the order they bound (the kernel's
	// bind list, ports.go).
	ports  map[portKey][]*hostID
	nextID uint32
}

func newHostCM(a *agent) *hostCM {
	return &hostCM{a: a, channels: map[uint32]*hostChannel{}, ports: map[portKey][]*hostID{}}
}

// hostChannel is an event channel's connection: events queue here and a
// writer sends them, so that the machine never waits for a program.
type hostChannel struct {
	token uint32
	pid   int32
	c     *net.UnixConn
	mu    sync.Mutex
	cond  *sync.Cond
	q     [][]byte
	dead  bool
}

func (ch *hostChannel) push(b []byte) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.dead {
		return
	}
	if len(ch.q) >= maxHostEvents {
		ch.dead = true
		ch.c.Close()
		ch.cond.Broadcast()
		return
	}
	ch.q = append(ch.q, b)
	ch.cond.Signal()
}

func (ch *hostChannel) writer() {
	for {
		ch.mu.Lock()
		for len(ch.q) == 0 && !ch.dead {
			ch.cond.Wait()
		}
		if ch.dead {
			ch.mu.Unlock()
			return
		}
		b := ch.q[0]
		ch.q = ch.q[1:]
		ch.mu.Unlock()
		if _, err := ch.c.Write(b); err != nil {
			ch.close()
			return
		}
	}
}

func (ch *hostChannel) close() {
	ch.mu.Lock()
	ch.dead = true
	ch.cond.Broadcast()
	ch.mu.Unlock()
	ch.c.Close()
}

// hostID is an rdma_cm id of a program.
type hostID struct {
	h       *hostCM
	handle  uint32
	uid     uint64
	ch      *hostChannel
	owner   map[uint32]*hostID // its command connection's ids
	ps      mad.PortSpace
	qpType  uint8          // IBV_QPT_RC or IBV_QPT_UD
	local   netip.AddrPort // bound: the NIC's address, or the wildcard of the id's family
	remote  netip.AddrPort
	bound   bool
	c       *conn // the machine's connection, once connecting or requested
	listens bool
	backlog int
	pending int // a listener's requests not yet answered
	parent  *hostID

	// rdma_set_option's AFONLY (afonlySet: the program chose it, else
	// bind takes the default) and REUSEADDR (ports.go); TOS and
	// ACK_TIMEOUT, which the route takes.
	afonly, afonlySet, reuse bool
	tos, ackTimeout          uint8
	tosSet, ackTimeoutSet    bool

	// The route (rdma_cm's path over RoCE): what an active id's REQ
	// carries as its primary path and its QP takes (init_qp_attr's RTR
	// address vector; the RTS timeout follows from the packet lifetime).
	// ResolveRoute makes it as the kernel's cma_resolve_iboe_route,
	// SetPath takes the program's (RDMA_OPTION_IB_PATH); a passive id's
	// is the REQ's, as the kernel's CM makes it.
	routed    bool
	peerGID   wire.GID
	hopLimit  uint8
	tclass    uint8
	flowLabel uint32
	pktLife   uint8 // the path's packet lifetime (active)
	timeout   uint8 // the QP's local ACK timeout (RTS)

	// What init_qp_attr needs: our receive PSN (the one we announced),
	// the peer's QPN and PSN, and the READ/atomic depths agreed.
	psn                  uint32
	peerQPN, peerPSN     uint32
	responder, initiator uint8
	retry, rnrRetry      uint8
	pathMTU              uint8
	dead                 bool
}

// IBV_QPT_* and IBV_QP_* values the protocol carries (libibverbs').
const (
	ibvQPTRC = 2
	ibvQPTUD = 4

	ibvQPState          = 1 << 0
	ibvQPAccessFlags    = 1 << 3
	ibvQPPKeyIndex      = 1 << 4
	ibvQPPort           = 1 << 5
	ibvQPQKey           = 1 << 6
	ibvQPAV             = 1 << 7
	ibvQPPathMTU        = 1 << 8
	ibvQPTimeout        = 1 << 9
	ibvQPRetryCnt       = 1 << 10
	ibvQPRNRRetry       = 1 << 11
	ibvQPRQPSN          = 1 << 12
	ibvQPMaxQPRdAtomic  = 1 << 13
	ibvQPMinRNRTimer    = 1 << 15
	ibvQPSQPSN          = 1 << 16
	ibvQPMaxDestRdAtom  = 1 << 17
	ibvQPDestQPN        = 1 << 20
	ibvAccessRemoteWr   = 1 << 1
	ibvAccessRemoteRd   = 1 << 2
	ibvAccessRemoteAtom = 1 << 3
	ibvAccessLocalWrite = 1 << 0
	ibvEventCommEst     = 3 // IBV_EVENT_COMM_EST
)

// serve runs one connection of a program.
func (h *hostCM) serve(c *net.UnixConn) {
	cred, err := hostif.PeerCred(c)
	if err != nil || int(cred.Uid) != os.Getuid() {
		c.Close()
		return
	}
	buf := make([]byte, hostif.MaxMsg+1)
	n, err := c.Read(buf)
	if err != nil {
		c.Close()
		return
	}
	hd, r, err := hostif.Parse(buf[:n])
	if err != nil || hd.Op != hostif.OpCMHello {
		c.Close()
		return
	}
	version, kind := r.U32(), r.U8()
	if r.End() != nil || version != hostif.CMVersion {
		reply(c, hd, unix.EPROTO, nil)
		c.Close()
		return
	}
	if kind == hostif.CMEvents {
		ch := &hostChannel{pid: cred.Pid, c: c}
		ch.cond = sync.NewCond(&ch.mu)
		h.a.mu.Lock()
		h.nextTok++
		ch.token = h.nextTok
		h.channels[ch.token] = ch
		h.a.mu.Unlock()
		reply(c, hd, 0, func(m *hostif.Msg) { m.U32(ch.token) })
		go ch.writer()
		// The program never writes again: a read ends when it closes.
		_, _ = c.Read(buf)
		ch.close()
		h.a.mu.Lock()
		delete(h.channels, ch.token)
		h.a.mu.Unlock()
		return
	}
	defer c.Close()
	reply(c, hd, 0, func(m *hostif.Msg) { m.U32(0) })
	ids := map[uint32]*hostID{}
	defer func() {
		h.a.mu.Lock()
		for _, id := range ids {
			h.destroy(id)
		}
		h.a.rearm()
		h.a.mu.Unlock()
	}()
	for {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			return
		}
		hd, r, err := hostif.Parse(buf[:n])
		if err != nil {
			return // a malformed message ends this program's connection only
		}
		h.a.mu.Lock()
		var errno unix.Errno
		var fill func(*hostif.Msg)
		if h.a.err != nil {
			errno = unix.ENODEV
		} else {
			h.a.m.now = time.Now()
			errno, fill = h.handle(hd, r, ids, cred.Pid)
			h.a.rearm()
		}
		h.a.mu.Unlock()
		if !reply(c, hd, errno, fill) {
			return
		}
	}
}

// reply sends the reply to hd: errno, then what fill appends.
func reply(c *net.UnixConn, hd hostif.Header, errno unix.Errno, fill func(*hostif.Msg)) bool {
	m := hostif.NewMsg(nil, hostif.Header{Op: hd.Op, Seq: hd.Seq, Errno: int32(errno)})
	if errno == 0 && fill != nil {
		fill(m)
	}
	b, err := m.Done()
	if err != nil {
		return false
	}
	_, err = c.Write(b)
	return err == nil
}

// getAddr reads a CM address.
func getAddr(r *hostif.Reader) netip.AddrPort {
	fam := r.U8()
	b := r.Fixed(16)
	port := r.U16()
	if r.Err != nil {
		return netip.AddrPort{}
	}
	switch fam {
	case 4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), port)
	case 6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b)), port)
	}
	return netip.AddrPort{}
}

func putAddr(m *hostif.Msg, a netip.AddrPort) {
	var b [16]byte
	fam := uint8(0)
	switch {
	case a.Addr().Is4():
		fam = 4
		v := a.Addr().As4()
		copy(b[12:], v[:])
	case a.Addr().Is6():
		fam = 6
		b = a.Addr().As16()
	}
	m.U8(fam).Fixed(b[:]).U16(a.Port())
}

// connParam is rdma_conn_param on the wire.
type connParam struct {
	qpn                           uint32
	responder, initiator, flowCtl uint8
	retry, rnrRetry, srq          uint8
	private                       []byte
}

func getConnParam(r *hostif.Reader) connParam {
	p := connParam{qpn: r.U32(), responder: r.U8(), initiator: r.U8(), flowCtl: r.U8(), retry: r.U8(), rnrRetry: r.U8(), srq: r.U8()}
	p.private = r.Bytes()
	return p
}

func (p *connParam) put(m *hostif.Msg) {
	m.U32(p.qpn).U8(p.responder).U8(p.initiator).U8(p.flowCtl).U8(p.retry).U8(p.rnrRetry).U8(p.srq).Bytes(p.private)
}

// handle runs one command, under the agent's lock.
func (h *hostCM) handle(hd hostif.Header, r *hostif.Reader, ids map[uint32]*hostID, pid int32) (unix.Errno, func(*hostif.Msg)) {
	if hd.Op == hostif.OpCMCreateID {
		tok, ps, typ, uid := r.U32(), mad.PortSpace(r.U16()), r.U8(), r.U64()
		ch := h.channels[tok]
		if r.End() != nil || ch == nil || ch.pid != pid || (ps != mad.PortSpaceTCP && ps != mad.PortSpaceUDP) ||
			(typ != ibvQPTRC && typ != ibvQPTUD) || (ps == mad.PortSpaceUDP) != (typ == ibvQPTUD) {
			return unix.EINVAL, nil
		}
		id := h.newID(ch, ids, ps, typ, uid)
		return 0, func(m *hostif.Msg) { m.U32(id.handle) }
	}
	id := ids[r.U32()]
	if id == nil {
		return unix.EINVAL, nil
	}
	gid := h.a.gid.Addr()
	switch hd.Op {
	case hostif.OpCMDestroyID:
		if r.End() != nil {
			return unix.EINVAL, nil
		}
		h.destroy(id)
		return 0, nil
	case hostif.OpCMBind:
		a := getAddr(r)
		if r.End() != nil || !a.IsValid() {
			return unix.EINVAL, nil
		}
		// The NIC's address, or the wildcard: a wildcard id's part on
		// this NIC, which holds the port here as the kernel's wildcard
		// id holds it on the host.
		addr := a.Addr().Unmap()
		if addr != gid && !addr.IsUnspecified() {
			return unix.EADDRNOTAVAIL, nil
		}
		if e := h.bind(id, addr, a.Port()); e != 0 {
			return e, nil
		}
		return 0, func(m *hostif.Msg) { m.U16(id.local.Port()) }
	case hostif.OpCMResolveAddr:
		src, dst := getAddr(r), getAddr(r)
		if r.End() != nil || !dst.IsValid() || id.c != nil {
			return unix.EINVAL, nil
		}
		if src.IsValid() && src.Addr().Unmap() != gid {
			return unix.EADDRNOTAVAIL, nil
		}
		if dst.Addr().Unmap().Is4() != gid.Is4() {
			return unix.EAFNOSUPPORT, nil
		}
		switch {
		case !id.bound:
			if e := h.bind(id, gid, src.Port()); e != 0 {
				return e, nil
			}
		case id.listens:
			return unix.EINVAL, nil
		case id.local.Addr().IsUnspecified():
			// A wildcard id resolving: as the kernel's, it keeps its
			// port, and its address becomes the one it sends from (of
			// its own family only: the kernel refuses another).
			if id.local.Addr().Is4() != gid.Is4() {
				return unix.EINVAL, nil
			}
			id.local = netip.AddrPortFrom(gid, id.local.Port())
		}
		id.remote = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
		id.routed = false
		h.push(id, hostif.CMEventAddrResolved)
		return 0, nil
	case hostif.OpCMResolveRoute:
		// As the kernel's: an id whose address is resolved and its
		// route not yet.
		if r.End() != nil || !id.remote.IsValid() || id.routed || id.c != nil {
			return unix.EINVAL, nil
		}
		h.route(id)
		h.push(id, hostif.CMEventRouteResolved)
		return 0, nil
	case hostif.OpCMSetPath:
		var p pathRec
		copy(p.dgid[:], r.Fixed(16))
		p.mtu, p.hopLimit, p.tclass, p.flowLabel, p.pktLife = r.U8(), r.U8(), r.U8(), r.U32(), r.U8()
		if r.End() != nil || !id.remote.IsValid() || id.routed || id.c != nil {
			return unix.EINVAL, nil
		}
		id.routed, id.peerGID, id.pathMTU = true, p.dgid, p.mtu
		id.hopLimit, id.tclass, id.flowLabel, id.pktLife = p.hopLimit, p.tclass, p.flowLabel&0xFFFFF, p.pktLife&0x3F
		h.push(id, hostif.CMEventRouteResolved)
		return 0, nil
	case hostif.OpCMListen:
		backlog := int(r.U32())
		if r.End() != nil || id.c != nil || id.listens || id.remote.IsValid() {
			return unix.EINVAL, nil
		}
		if !id.bound {
			if e := h.bind(id, gid, 0); e != 0 {
				return e, nil
			}
		}
		if e := h.listen(id); e != 0 {
			return e, nil
		}
		id.backlog = max(backlog, 1)
		return 0, nil
	case hostif.OpCMConnect:
		p := getConnParam(r)
		// As the kernel's rdma_connect: the route first.
		if r.End() != nil || id.c != nil || id.listens || !id.routed {
			return unix.EINVAL, nil
		}
		return h.connect(id, &p), nil
	case hostif.OpCMAccept:
		p := getConnParam(r)
		if r.End() != nil || id.c == nil {
			return unix.EINVAL, nil
		}
		return h.accept(id, &p), nil
	case hostif.OpCMReject:
		reason, private := r.U8(), r.Bytes()
		if r.End() != nil || id.c == nil || len(private) > mad.REJPrivateLen {
			return unix.EINVAL, nil
		}
		if reason == 0 {
			reason = uint8(mad.RejConsumerDefined)
		}
		if err := h.a.m.step(id.c, &event{in: inReject, reason: mad.RejReason(reason), private: private}); err != nil {
			return unix.EINVAL, nil
		}
		h.answered(id)
		return 0, nil
	case hostif.OpCMDisconnect:
		if r.End() != nil || id.c == nil {
			return unix.EINVAL, nil
		}
		if err := h.a.m.step(id.c, &event{in: inDisconnect}); err != nil {
			return unix.EINVAL, nil
		}
		return 0, nil
	case hostif.OpCMInitQPAttr:
		state := r.U8()
		if r.End() != nil {
			return unix.EINVAL, nil
		}
		return h.initQPAttr(id, state)
	case hostif.OpCMMigrate:
		// rdma_migrate_id: the id's later events go to another of the
		// program's channels (events already queued stay where they are,
		// as the program has taken them or will from the old channel).
		ch := h.channels[r.U32()]
		if r.End() != nil || ch == nil || ch.pid != pid {
			return unix.EINVAL, nil
		}
		id.ch = ch
		return 0, nil
	case hostif.OpCMSetOption:
		opt, v := r.U32(), r.U32()
		if r.End() != nil {
			return unix.EINVAL, nil
		}
		return h.setOption(id, opt, v), nil
	case hostif.OpCMNotify:
		ev := r.U32()
		if r.End() != nil || id.c == nil {
			return unix.EINVAL, nil
		}
		if ev == ibvEventCommEst && id.c.state == RepSent {
			_ = h.a.m.step(id.c, &event{in: inCommEst})
		}
		return 0, nil
	}
	return unix.EOPNOTSUPP, nil
}

func (h *hostCM) newID(ch *hostChannel, ids map[uint32]*hostID, ps mad.PortSpace, typ uint8, uid uint64) *hostID {
	for h.nextID++; h.nextID == 0 || ids[h.nextID] != nil; h.nextID++ {
	}
	id := &hostID{h: h, handle: h.nextID, uid: uid, ch: ch, owner: ids, ps: ps, qpType: typ}
	ids[id.handle] = id
	return id
}

// pathRec is what a path record (RDMA_OPTION_IB_PATH) gives the route.
type pathRec struct {
	dgid                  wire.GID
	mtu, hopLimit, tclass uint8
	flowLabel             uint32
	pktLife               uint8
}

// route resolves the id's route as the kernel's cma_resolve_iboe_route
// does over RoCE: to the peer's address, the port's MTU, hop limit 64,
// the TOS set by then as traffic class (0 else, the kernel's default
// RoCE TOS), the flow label rdma_cm hashes from the two ports, and the
// packet lifetime one less than an ACK_TIMEOUT set by then (the kernel
// takes it so), else rdma_cm's (PacketLifeTime).
func (h *hostCM) route(id *hostID) {
	id.routed, id.peerGID = true, wire.GIDFromAddr(id.remote.Addr())
	id.pathMTU, id.hopLimit, id.tclass = uint8(h.a.dev.Attr().ActiveMTU), 64, 0
	if id.tosSet {
		id.tclass = id.tos
	}
	id.flowLabel = (uint32(id.local.Port())*31 + uint32(id.remote.Port())) & 0xFFFFF
	id.pktLife = PacketLifeTime
	if id.ackTimeoutSet && id.ackTimeout != 0 {
		id.pktLife = id.ackTimeout - 1
	}
}

// binding is the id's hold on its port.
func (id *hostID) binding() binding {
	return binding{addr: id.local.Addr(), afonly: id.afonly, reuse: id.reuse}
}

// bind takes port (0: an ephemeral one) of the id's port space for addr
// (the NIC's address or a wildcard), if the port's holders let it
// (binding.conflict).
func (h *hostCM) bind(id *hostID, addr netip.Addr, port uint16) unix.Errno {
	if id.bound {
		return unix.EINVAL
	}
	if !id.afonlySet {
		id.afonly = defaultAFOnly(addr)
	}
	b := binding{addr: addr, afonly: id.afonly, reuse: id.reuse}
	if port == 0 {
		// A port nobody holds (the kernel may share one among active
		// ids with distinct peers; a free one is as good).
		for range 1000 {
			if p := ephemeralPort(); len(h.ports[portKey{id.ps, p}]) == 0 {
				port = p
				break
			}
		}
		if port == 0 {
			return unix.EADDRNOTAVAIL
		}
	} else {
		for _, o := range h.ports[portKey{id.ps, port}] {
			if e := b.conflict(o.binding(), id.reuse); e != 0 {
				return e
			}
		}
	}
	k := portKey{id.ps, port}
	h.ports[k] = append(h.ports[k], id)
	id.local, id.bound = netip.AddrPortFrom(addr, port), true
	return 0
}

// listen makes a bound id a listener. As the kernel's rdma_listen, a
// listener may not share its port by REUSEADDR: it checks again without
// it, and from then on has it no more. The port's requests reach the
// machine through one hostPort, whatever ids listen on it.
func (h *hostCM) listen(id *hostID) unix.Errno {
	k := portKey{id.ps, id.local.Port()}
	if id.reuse {
		for _, o := range h.ports[k] {
			if o == id {
				continue
			}
			if e := id.binding().conflict(o.binding(), false); e != 0 {
				return e
			}
		}
	}
	sid := mad.ServiceID(id.ps, id.local.Port())
	switch l := h.a.m.listeners[sid].(type) {
	case nil:
		h.a.m.listeners[sid] = &hostPort{h: h, key: k}
	case *hostPort:
		if l.h != h {
			return unix.EADDRINUSE
		}
	default:
		return unix.EADDRINUSE // a listener of this process's Go API
	}
	id.listens, id.reuse = true, false
	return 0
}

// setOption is rdma_set_option's, with the states the kernel takes each
// in: REUSEADDR and AFONLY on an id not bound, or bound and not yet
// listening or resolving (REUSEADDR may be turned on later, not off);
// TOS and ACK_TIMEOUT (RC ids only) in any, a route resolved from then
// on has them. EINVAL otherwise.
func (h *hostCM) setOption(id *hostID, opt, v uint32) unix.Errno {
	idle := !id.bound && id.c == nil && !id.remote.IsValid()
	switch opt {
	case hostif.CMOptAFOnly:
		if id.listens || id.c != nil || id.remote.IsValid() {
			return unix.EINVAL
		}
		id.afonly, id.afonlySet = v != 0, true
	case hostif.CMOptReuseAddr:
		if v != 0 && id.listens || v == 0 && !idle {
			return unix.EINVAL
		}
		id.reuse = v != 0
	case hostif.CMOptTOS:
		id.tos, id.tosSet = uint8(v), true
	case hostif.CMOptAckTimeout:
		if id.qpType != ibvQPTRC {
			return unix.EINVAL
		}
		id.ackTimeout, id.ackTimeoutSet = uint8(v), true
	default:
		return unix.ENOSYS // as the kernel answers an option it does not know
	}
	return 0
}

// destroy ends an id as rdma_destroy_id does: what its state owes the
// peer (REJ, DREQ, DREP) is sent, its listen and port are released, and
// no event of it is reported from then on.
func (h *hostCM) destroy(id *hostID) {
	if id.dead {
		return
	}
	id.dead = true
	delete(id.owner, id.handle)
	if id.bound {
		k := portKey{id.ps, id.local.Port()}
		holders, listening := h.ports[k][:0], false
		for _, o := range h.ports[k] {
			if o != id {
				holders = append(holders, o)
				listening = listening || o.listens
			}
		}
		if len(holders) == 0 {
			delete(h.ports, k)
		} else {
			h.ports[k] = holders
		}
		sid := mad.ServiceID(id.ps, id.local.Port())
		if l, ok := h.a.m.listeners[sid].(*hostPort); ok && l.h == h && !listening {
			delete(h.a.m.listeners, sid)
		}
	}
	if id.c != nil && id.c.state != Idle {
		_ = h.a.m.step(id.c, &event{in: inDisconnect})
	}
	h.answered(id)
}

// answered: a passive id's request is no longer pending at its listener.
func (h *hostCM) answered(id *hostID) {
	if id.parent != nil {
		id.parent.pending--
		id.parent = nil
	}
}

// connect sends the REQ (RC) or SIDR_REQ (UD) of an active id.
func (h *hostCM) connect(id *hostID, p *connParam) unix.Errno {
	src, dst := id.local, id.remote
	peer := id.peerGID
	if id.qpType == ibvQPTUD {
		if len(p.private) > mad.SIDRREQPrivateLen-mad.CMAHeaderSize {
			return unix.EINVAL
		}
		id.c = h.a.m.newConn(id)
		h.a.m.resolve(id.c, peer, rdmacmSIDRREQ(id.ps, src, dst, p.private))
		return 0
	}
	if len(p.private) > mad.REQPrivateLen-mad.CMAHeaderSize || p.qpn == 0 || p.qpn > 0xFFFFFF {
		return unix.EINVAL
	}
	at := h.a.dev.Attr()
	id.psn = rand.Uint32() & 0xFFFFFF
	id.responder, id.initiator = min(p.responder, uint8(min(at.MaxQPRdAtom, 255))), min(p.initiator, uint8(min(at.MaxQPInitRdAtom, 255)))
	id.retry, id.rnrRetry = min(p.retry, 7), min(p.rnrRetry, 7)
	req := rdmacmREQ(id.ps, src, dst, &reqParams{qpn: p.qpn, psn: id.psn, responder: id.responder, initiator: id.initiator,
		retry: id.retry, rnrRetry: id.rnrRetry, mtu: id.pathMTU, flowCtl: p.flowCtl != 0, srq: p.srq != 0, private: p.private})
	// The primary path is the route's (the kernel's cm_format_req); its
	// local ACK timeout is the path's for our CA's ACK delay.
	pp := &req.Primary
	pp.RemoteGID, pp.HopLimit, pp.TrafficClass, pp.FlowLabel = peer, id.hopLimit, id.tclass, id.flowLabel
	pp.LocalAckTimeout = cmAckTimeout(TargetACKDelay, id.pktLife)
	id.c = h.a.m.newConn(id)
	h.a.m.connect(id.c, peer, req, id.pktLife)
	return 0
}

// accept answers a passive id's REQ (REP) or SIDR_REQ (SIDR_REP), or
// confirms an active id's CONNECT_RESPONSE (RTU).
func (h *hostCM) accept(id *hostID, p *connParam) unix.Errno {
	switch id.c.state {
	case RepRcvd:
		if err := h.a.m.step(id.c, &event{in: inAccept}); err != nil {
			return unix.EINVAL
		}
		return 0
	case SIDRReqRcvd:
		if len(p.private) > mad.SIDRREPPrivateLen || p.qpn == 0 || p.qpn > 0xFFFFFF {
			return unix.EINVAL
		}
		rep := &mad.SIDRREP{Status: uint8(mad.SIDRQPValid), QPN: p.qpn, QKey: UDPQKey}
		copy(rep.PrivateData[:], p.private)
		if err := h.a.m.step(id.c, &event{in: inAccept, sidrRep: rep}); err != nil {
			return unix.EINVAL
		}
		h.answered(id)
		return 0
	case ReqRcvd, MRAReqSent:
	default:
		return unix.EINVAL
	}
	if len(p.private) > mad.REPPrivateLen || p.qpn == 0 || p.qpn > 0xFFFFFF {
		return unix.EINVAL
	}
	// The depths: at most what the peer's REQ offered the other way
	// (id.responder/initiator hold the REQ's, swapped).
	id.responder, id.initiator = min(p.responder, id.responder), min(p.initiator, id.initiator)
	rep := &mad.REP{LocalQPN: p.qpn, StartingPSN: id.psn, ResponderResources: id.responder, InitiatorDepth: id.initiator,
		TargetACKDelay: TargetACKDelay, RNRRetryCount: min(p.rnrRetry, 7), SRQ: p.srq != 0, EndToEndFlowControl: p.flowCtl != 0}
	copy(rep.PrivateData[:], p.private)
	if err := h.a.m.step(id.c, &event{in: inAccept, rep: rep}); err != nil {
		return unix.EINVAL
	}
	h.answered(id)
	return 0
}

// initQPAttr gives the attributes of a move of the id's QP to state, as
// the kernel's rdma_init_qp_attr does.
func (h *hostCM) initQPAttr(id *hostID, state uint8) (unix.Errno, func(*hostif.Msg)) {
	var (
		mask                                 uint32
		mtu, maxDest, maxRd, minRNR, timeout uint8
		retry, rnr                           uint8
		destQPN, rqPSN, sqPSN, qkey, access  uint32
		dgid                                 [16]byte
		hop, tclass                          uint8
		flow                                 uint32
	)
	switch rnic.QPState(state) {
	case rnic.QPSInit:
		mask = ibvQPState | ibvQPPKeyIndex | ibvQPPort
		if id.qpType == ibvQPTUD {
			mask |= ibvQPQKey
			qkey = UDPQKey
		} else {
			mask |= ibvQPAccessFlags
			access = ibvAccessRemoteWr | ibvAccessLocalWrite
			if id.responder > 0 {
				access |= ibvAccessRemoteRd | ibvAccessRemoteAtom
			}
		}
	case rnic.QPSRTR:
		mask = ibvQPState
		if id.qpType == ibvQPTRC {
			if id.c == nil || id.peerQPN == 0 {
				return unix.EINVAL, nil
			}
			mask |= ibvQPAV | ibvQPPathMTU | ibvQPDestQPN | ibvQPRQPSN | ibvQPMaxDestRdAtom | ibvQPMinRNRTimer
			mtu, destQPN, rqPSN, maxDest, minRNR = id.pathMTU, id.peerQPN, id.psn, max(id.responder, 1), MinRNRTimer
			dgid, hop, flow, tclass = id.peerGID, id.hopLimit, id.flowLabel, id.tclass
		}
	case rnic.QPSRTS:
		mask = ibvQPState | ibvQPSQPSN
		if id.qpType == ibvQPTRC {
			if id.c == nil || id.peerQPN == 0 {
				return unix.EINVAL, nil
			}
			mask |= ibvQPTimeout | ibvQPRetryCnt | ibvQPRNRRetry | ibvQPMaxQPRdAtomic
			sqPSN, timeout, retry, rnr, maxRd = id.peerPSN, id.timeout, id.retry, id.rnrRetry, max(id.initiator, 1)
		}
	default:
		return unix.EINVAL, nil
	}
	return 0, func(m *hostif.Msg) {
		m.U32(mask).U8(state).U8(mtu).U32(destQPN).U32(rqPSN).U32(sqPSN).U8(maxDest).U8(maxRd).U8(minRNR).
			U8(timeout).U8(retry).U8(rnr).U32(qkey).U16(0).U8(1).U32(access).Fixed(dgid[:]).U8(rnic.AddrGIDIndex).
			U8(hop).U32(flow).U8(tclass)
	}
}

// --- the machine's side: the id as consumer and listener ---

func (id *hostID) repReceived(rep *mad.REP) error {
	id.peerQPN, id.peerPSN = rep.LocalQPN, rep.StartingPSN
	// The REP's depths are the passive side's: ours are the other way.
	id.responder, id.initiator = min(id.responder, rep.InitiatorDepth), min(id.initiator, rep.ResponderResources)
	id.rnrRetry = rep.RNRRetryCount
	// The QP's ACK timeout: the path's for the peer's ACK delay (the
	// kernel CM's, on a REP).
	id.timeout = cmAckTimeout(rep.TargetACKDelay, id.pktLife)
	return nil
}

func (id *hostID) defersRTU() bool { return true }

func (id *hostID) event(ev Event) {
	if id.dead {
		return
	}
	var p *connParam
	t, status := 0, int32(0)
	switch ev.Type {
	case EventEstablished:
		t = hostif.CMEventEstablished
	case EventConnectResponse:
		t = hostif.CMEventConnectResponse
		p = &connParam{qpn: id.peerQPN, responder: id.responder, initiator: id.initiator, retry: id.retry, rnrRetry: id.rnrRetry}
	case EventRejected:
		t, status = hostif.CMEventRejected, int32(ev.Reason)
	case EventUnreachable:
		t, status = hostif.CMEventUnreachable, -int32(syscall.ETIMEDOUT)
		if ev.SIDRStatus != 0 {
			status = int32(ev.SIDRStatus)
		}
	case EventConnectError:
		t, status = hostif.CMEventConnectError, -int32(syscall.ECONNREFUSED)
	case EventDisconnected:
		t = hostif.CMEventDisconnected
	case EventTimeWaitExit:
		t = hostif.CMEventTimewaitExit
	default:
		return
	}
	if p == nil {
		p = &connParam{}
	}
	p.private = ev.PrivateData
	id.h.pushUD(id, t, status, p, ev.QPN, ev.QKey, nil)
}

// hostPort is the machine's listener for one port of the NIC's ids: it
// gives a request to the id listening on the port that takes it, as the
// kernel's cma_find_listener walks the port's bind list. Two listeners
// of a port never take the same request (binding.conflict keeps them
// apart), so the first that does is the one.
type hostPort struct {
	h   *hostCM
	key portKey
}

// request is the machine's: a REQ or SIDR_REQ for the port. One no
// listener takes (for another address or IP version than the
// listeners', of the wrong QP type, not rdma_cm's) is refused, as the
// kernel's CM refuses a request rdma_cm finds no listener for: REJ
// reason 28 (consumer defined), or a SIDR_REP saying rejected. A
// listener whose backlog is full drops it (false), as Linux's does.
func (p *hostPort) request(c *conn, msg mad.Message) bool {
	h := p.h
	var hdr mad.CMAHeader
	err := errNotRDMACM
	ud := false
	switch req := msg.(type) {
	case *mad.REQ:
		hdr, err = mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
	case *mad.SIDRREQ:
		hdr, err = mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
		ud = true
	}
	// A request reaches the NIC of its destination address: one for
	// another is for no listener here.
	if err == nil && hdr.Dst.Addr().Unmap() == h.a.gid.Addr() {
		for _, id := range h.ports[p.key] {
			if id.listens && !id.dead && id.binding().takes(hdr.Dst.Addr()) {
				if (id.qpType == ibvQPTUD) != ud {
					break
				}
				return id.take(c, msg, hdr)
			}
		}
	}
	h.a.m.counters.Rejects++
	_ = h.a.m.step(c, &event{in: inReject, reason: mad.RejConsumerDefined})
	return true
}

var errNotRDMACM = errors.New("cm: not an rdma_cm request")

// take makes a new id of the listener the owner of a request for it: the
// listener's channel reports CONNECT_REQUEST. False if its backlog is
// full.
func (id *hostID) take(c *conn, msg mad.Message, hdr mad.CMAHeader) bool {
	if id.pending >= id.backlog {
		return false
	}
	h := id.h
	child := h.newID(id.ch, id.owner, id.ps, id.qpType, 0)
	p := &connParam{}
	var data []byte
	switch req := msg.(type) {
	case *mad.REQ:
		data = clone(req.PrivateData[mad.CMAHeaderSize:])
		at := h.a.dev.Attr()
		child.peerQPN, child.peerPSN = req.LocalQPN, req.StartingPSN
		// Our receive PSN is chosen now: the program readies its QP
		// (init_qp_attr) before it accepts, and the REP names it.
		child.psn = rand.Uint32() & 0xFFFFFF
		// The REQ's depths are the active side's: ours are the other way.
		child.responder = min(req.InitiatorDepth, uint8(min(at.MaxQPRdAtom, 255)))
		child.initiator = min(req.ResponderResources, uint8(min(at.MaxQPInitRdAtom, 255)))
		child.retry, child.rnrRetry = req.RetryCount, req.RNRRetryCount
		child.pathMTU = min(req.PathMTU, uint8(at.ActiveMTU))
		// The route is the REQ's primary path, as the kernel's CM takes
		// it (cm_format_paths_from_req): the QP's timeout is its local
		// ACK timeout.
		pp := &req.Primary
		child.peerGID, child.hopLimit, child.tclass, child.flowLabel = pp.LocalGID, pp.HopLimit, pp.TrafficClass, pp.FlowLabel
		child.timeout = max(pp.LocalAckTimeout, 1)
		*p = connParam{qpn: req.LocalQPN, responder: child.responder, initiator: child.initiator,
			retry: req.RetryCount, rnrRetry: req.RNRRetryCount}
		if req.SRQ {
			p.srq = 1
		}
	case *mad.SIDRREQ:
		data = clone(req.PrivateData[mad.CMAHeaderSize:])
	}
	child.c, child.parent = c, id
	// The new id's addresses are the request's, of its IP version (an
	// IPv6 listener's id for an IPv4 request is an IPv4 one, as the
	// kernel's cma_save_ip_info makes it).
	child.local = netip.AddrPortFrom(hdr.Dst.Addr().Unmap(), id.local.Port())
	child.remote = netip.AddrPortFrom(hdr.Src.Addr().Unmap(), hdr.Src.Port())
	c.user = child
	id.pending++
	p.private = data
	h.pushUD(child, hostif.CMEventConnectRequest, 0, p, 0, 0, id)
	return true
}

// push reports a bare event of id (status 0, no parameters).
func (h *hostCM) push(id *hostID, t int) {
	h.pushUD(id, t, 0, &connParam{}, 0, 0, nil)
}

// pushUD reports an event of id (for a CONNECT_REQUEST, listener is the
// listening id) on its channel.
func (h *hostCM) pushUD(id *hostID, t int, status int32, p *connParam, qpn, qkey uint32, listener *hostID) {
	lh, luid := uint32(0), uint64(0)
	if listener != nil {
		lh, luid = listener.handle, listener.uid
	}
	m := hostif.NewMsg(nil, hostif.Header{Op: hostif.OpCMEvent})
	m.U64(id.uid).U32(id.handle).U32(lh).U64(luid).U32(uint32(t)).U32(uint32(status))
	putAddr(m, id.local)
	putAddr(m, id.remote)
	p.put(m)
	m.U32(qpn).U32(qkey)
	b, err := m.Done()
	if err != nil {
		return
	}
	id.ch.push(b)
}
