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
	h := &hostCM{a: a, channels: map[uint32]*hostChannel{}, ports: map[portKey]*hostID{}}
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
	ports    map[portKey]*hostID
	nextID   uint32
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
	qpType  uint8 // IBV_QPT_RC or IBV_QPT_UD
	local   netip.AddrPort
	remote  netip.AddrPort
	bound   bool
	c       *conn // the machine's connection, once connecting or requested
	listens bool
	backlog int
	pending int // a listener's requests not yet answered
	parent  *hostID

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
		if a.Addr().Unmap() != gid {
			return unix.EADDRNOTAVAIL, nil
		}
		if e := h.bind(id, a.Port()); e != 0 {
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
		if !id.bound {
			if e := h.bind(id, src.Port()); e != 0 {
				return e, nil
			}
		}
		id.remote = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
		h.push(id, hostif.CMEventAddrResolved)
		return 0, nil
	case hostif.OpCMResolveRoute:
		if r.End() != nil || !id.remote.IsValid() {
			return unix.EINVAL, nil
		}
		h.push(id, hostif.CMEventRouteResolved)
		return 0, nil
	case hostif.OpCMListen:
		backlog := int(r.U32())
		if r.End() != nil || id.c != nil || id.listens {
			return unix.EINVAL, nil
		}
		if !id.bound {
			if e := h.bind(id, 0); e != 0 {
				return e, nil
			}
		}
		sid := mad.ServiceID(id.ps, id.local.Port())
		if h.a.m.listeners[sid] != nil {
			return unix.EADDRINUSE, nil
		}
		h.a.m.listeners[sid] = id
		id.listens, id.backlog = true, max(backlog, 1)
		return 0, nil
	case hostif.OpCMConnect:
		p := getConnParam(r)
		if r.End() != nil || id.c != nil || id.listens || !id.remote.IsValid() {
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

// bind takes port (0: an ephemeral one) of the id's port space.
func (h *hostCM) bind(id *hostID, port uint16) unix.Errno {
	if id.bound {
		return unix.EINVAL
	}
	if port == 0 {
		for range 1000 {
			p := ephemeralPort()
			if h.ports[portKey{id.ps, p}] == nil {
				port = p
				break
			}
		}
		if port == 0 {
			return unix.EADDRINUSE
		}
	} else if h.ports[portKey{id.ps, port}] != nil {
		return unix.EADDRINUSE
	}
	h.ports[portKey{id.ps, port}] = id
	id.local, id.bound = netip.AddrPortFrom(h.a.gid.Addr(), port), true
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
	if id.listens {
		sid := mad.ServiceID(id.ps, id.local.Port())
		if h.a.m.listeners[sid] == id {
			delete(h.a.m.listeners, sid)
		}
	}
	if id.bound && h.ports[portKey{id.ps, id.local.Port()}] == id {
		delete(h.ports, portKey{id.ps, id.local.Port()})
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
	peer := wire.GIDFromAddr(dst.Addr())
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
	id.retry, id.rnrRetry, id.pathMTU = min(p.retry, 7), min(p.rnrRetry, 7), uint8(at.ActiveMTU)
	req := rdmacmREQ(id.ps, src, dst, &reqParams{qpn: p.qpn, psn: id.psn, responder: id.responder, initiator: id.initiator,
		retry: id.retry, rnrRetry: id.rnrRetry, mtu: id.pathMTU, flowCtl: p.flowCtl != 0, srq: p.srq != 0, private: p.private})
	id.c = h.a.m.newConn(id)
	h.a.m.connect(id.c, peer, req)
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
			dgid = wire.GIDFromAddr(id.remote.Addr())
		}
	case rnic.QPSRTS:
		mask = ibvQPState | ibvQPSQPSN
		if id.qpType == ibvQPTRC {
			if id.c == nil || id.peerQPN == 0 {
				return unix.EINVAL, nil
			}
			mask |= ibvQPTimeout | ibvQPRetryCnt | ibvQPRNRRetry | ibvQPMaxQPRdAtomic
			sqPSN, timeout, retry, rnr, maxRd = id.peerPSN, AckTimeout, id.retry, id.rnrRetry, max(id.initiator, 1)
		}
	default:
		return unix.EINVAL, nil
	}
	return 0, func(m *hostif.Msg) {
		m.U32(mask).U8(state).U8(mtu).U32(destQPN).U32(rqPSN).U32(sqPSN).U8(maxDest).U8(maxRd).U8(minRNR).
			U8(timeout).U8(retry).U8(rnr).U32(qkey).U16(0).U8(1).U32(access).Fixed(dgid[:]).U8(rnic.AddrGIDIndex).
			U8(64).U32(0).U8(0)
	}
}

// --- the machine's side: the id as consumer and listener ---

func (id *hostID) repReceived(rep *mad.REP) error {
	id.peerQPN, id.peerPSN = rep.LocalQPN, rep.StartingPSN
	// The REP's depths are the passive side's: ours are the other way.
	id.responder, id.initiator = min(id.responder, rep.InitiatorDepth), min(id.initiator, rep.ResponderResources)
	id.rnrRetry = rep.RNRRetryCount
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

// request is the machine's: a REQ or SIDR_REQ for a listening id. A new
// id takes the connection and the listener's channel reports it.
func (id *hostID) request(c *conn, msg mad.Message) bool {
	if id.dead || id.pending >= id.backlog {
		return false
	}
	h := id.h
	var data []byte
	var hdr mad.CMAHeader
	var err error
	child := h.newID(id.ch, id.owner, id.ps, id.qpType, 0)
	p := &connParam{}
	switch req := msg.(type) {
	case *mad.REQ:
		if id.qpType != ibvQPTRC {
			delete(id.owner, child.handle)
			return false
		}
		hdr, err = mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
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
		*p = connParam{qpn: req.LocalQPN, responder: child.responder, initiator: child.initiator,
			retry: req.RetryCount, rnrRetry: req.RNRRetryCount}
		if req.SRQ {
			p.srq = 1
		}
	case *mad.SIDRREQ:
		if id.qpType != ibvQPTUD {
			delete(id.owner, child.handle)
			return false
		}
		hdr, err = mad.DecodeCMAHeader(req.PrivateData[:], req.ServiceID)
		data = clone(req.PrivateData[mad.CMAHeaderSize:])
	}
	if err != nil || hdr.Dst.Addr().Unmap() != h.a.gid.Addr() {
		delete(id.owner, child.handle)
		return false
	}
	child.c, child.parent = c, id
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
