package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// The protocol's timing: what Linux's rdma_cm sets over RoCE (Linux 6.1,
// cma.c), so that a peer running Linux sees the values it would from
// another Linux host (testdata/cm). Times on the wire are exponents: t
// stands for 4.096 µs × 2^t, which the kernel's CM rounds to 2^(t-8) ms
// when it arms a timer; convertMS does the same, so both time out alike.
const (
	// CMResponseTimeout is how long a CM may take to answer a message
	// (CMA_CM_RESPONSE_TIMEOUT: 20, 4 s); REQs carry it as both the
	// local and the remote CM response timeout.
	CMResponseTimeout = 20
	// MaxCMRetries is how many times a REQ, REP, DREQ or SIDR_REQ is
	// sent again when its answer does not come (CMA_MAX_CM_RETRIES).
	MaxCMRetries = 15
	// PacketLifeTime is the path's packet lifetime over RoCE
	// (CMA_IBOE_PACKET_LIFETIME: 18, 1 s).
	PacketLifeTime = 18
	// AckTimeout is the QPs' local ACK timeout, the packet lifetime
	// plus the target ACK delay rounded as cm_ack_timeout does (19,
	// 2.1 s): the REQ's path carries it, and it is the time wait.
	AckTimeout = 19
	// mraServiceTimeout is the service timeout an MRA asks for
	// (CMA_CM_MRA_SETTING: 24, 68.7 s): how long the consumer may take to
	// answer a REQ.
	mraServiceTimeout = 24
	// TargetACKDelay is the REP's target ACK delay (rxe's local_ca_ack_delay).
	TargetACKDelay = 15
	// MinRNRTimer is the RNR NAK timer code a connected QP's RTR gets:
	// 0, the longest (655.36 ms, IBTA Table 45), as the kernel CM's
	// cm_init_qp_rtr_attr sets it. A shorter one makes a peer that sends
	// before the receive is posted (rdma-core's test_rdmacm external-QP
	// test does: its reply can beat the other side's post_recv) run out
	// of RNR retries within milliseconds when a process is slow to post.
	MinRNRTimer = 0
	// UDPQKey is the Q_Key of rdma_cm's UD QPs (RDMA_UDP_QKEY), which a
	// SIDR_REP names.
	UDPQKey = 0x01234567
)

// convertMS is the kernel CM's timer for an IBA time exponent: 2^(t-8) ms.
func convertMS(t uint8) time.Duration {
	if t < 8 {
		return time.Millisecond
	}
	return time.Millisecond << min(t-8, 31)
}

// reqTimeout is how long a REQ waits for its answer: the round trip
// (twice the path's packet lifetime) plus the time the peer's CM takes
// to answer (IBTA §12.7.27; 6.1 s with rdma_cm's values).
func reqTimeout(pktLife, remoteResponse uint8) time.Duration {
	return 2*convertMS(pktLife) + convertMS(remoteResponse)
}

// cmAckTimeout is the local ACK timeout of a path of packet lifetime
// pktLife to a CA that takes caAckDelay to acknowledge (the kernel CM's
// cm_ack_timeout: the larger of the two, one more when the other is
// within half of it): what a REQ carries for the delay of our CA
// (TargetACKDelay), what the active QP takes for the REP's.
func cmAckTimeout(caAckDelay, pktLife uint8) uint8 {
	t := pktLife + 1
	if t >= caAckDelay {
		if caAckDelay >= t-1 {
			t++
		}
	} else {
		up := t >= caAckDelay-1
		t = caAckDelay
		if up {
			t++
		}
	}
	return min(31, t)
}

// ErrState is returned when a connection's state does not take a call
// (accepting twice, disconnecting before the connection is up).
var ErrState = errors.New("cm: the connection's state does not allow this")

// consumer is what a connection tells its owner (a Conn or a UD endpoint
// of the Go API, or a host interface's id): it readies the QP when a REP
// comes, and takes the connection's events.
type consumer interface {
	// repReceived moves the active side's QP to RTR and RTS from the REP
	// (the peer's QPN and starting PSN), or keeps the REP for a consumer
	// that readies its QP itself (rtuDeferrer). An error rejects the REP.
	repReceived(rep *mad.REP) error
	// event reports an event; the machine's lock is held, so it must not
	// call back into the machine.
	event(ev Event)
}

// rtuDeferrer is a consumer that readies its QP itself after the REP (a
// program of the host interface, as librdmacm does with the kernel's
// CONNECT_RESPONSE): the REP is reported as EventConnectResponse and the
// RTU waits in RepRcvd for the consumer's accept.
type rtuDeferrer interface{ defersRTU() bool }

// listener takes connection requests for one service ID.
type listener interface {
	// request offers a new passive connection for a REQ or SIDR_REQ (in
	// ReqRcvd or SIDRReqRcvd); it returns false if the listener cannot
	// take it (its backlog is full): the request is then dropped, as
	// Linux drops it, and the peer's retries may find room.
	request(c *conn, req mad.Message) bool
}

// conn is one connection (a cm_id): its IDs, state, the message to send
// again and its timer.
type conn struct {
	state      State
	active     bool   // we sent the REQ (or SIDR_REQ)
	localID    uint32 // our communication ID (a SIDR_REQ's request ID)
	remoteID   uint32 // the peer's, from its REQ or REP (0 until then)
	remoteGUID uint64 // the peer's CA GUID
	peer       wire.GID
	serviceID  uint64
	tid        uint64 // the transaction of the exchange in progress
	localQPN   uint32
	remoteQPN  uint32
	// autoDREP answers a DREQ at once (the Go API); without it the DREP
	// waits in DREQRcvd for the consumer's disconnect, as rdma_cm's does.
	autoDREP bool

	// The message to send again on a timeout (or to answer a duplicate
	// with), and the timer.
	resendMAD [mad.Size]byte
	resendOn  bool
	retries   int           // sends left
	timeout   time.Duration // per send
	deadline  time.Time     // zero: no timer
	// What the peer's REQ asked of our REP: its answer timeout and
	// retries.
	repTimeout time.Duration
	repRetries int

	user consumer
}

// remoteKey identifies a peer's connection: its communication ID (or
// QPN) on its CA (how a duplicate or stale REQ is told from a new one,
// §12.9.8.3).
type remoteKey struct {
	id   uint32
	guid uint64
}

// sidrKey identifies a peer's pending SIDR_REQ.
type sidrKey struct {
	id  uint32
	src wire.GID
}

// machine is the connection manager of one device: every connection and
// listener, driven by received MADs, the clock and consumer calls, its
// output the MADs it hands to send. It is sans-IO: the agent (agent.go)
// owns QP1 and the timer, and serializes every call with one lock.
type machine struct {
	guid uint64 // our CA GUID (the port's link-local GID's interface ID)
	rng  *rand.Rand
	tid  uint64 // the last transaction ID: a random high half, a counter below
	now  time.Time

	conns     map[uint32]*conn    // by local communication ID
	remote    map[remoteKey]*conn // by the peer's communication ID and CA GUID
	remoteQPs map[remoteKey]*conn // by the peer's QPN and CA GUID
	sidr      map[sidrKey]*conn   // passive SIDR requests not answered yet
	listeners map[uint64]listener // by service ID

	send     func(dst wire.GID, m mad.MAD) // the MAD is the machine's: copy it
	counters Counters
	buf      [mad.Size]byte
}

func newMachine(guid uint64, seed uint64, send func(wire.GID, mad.MAD)) *machine {
	m := &machine{
		guid: guid, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns: map[uint32]*conn{}, remote: map[remoteKey]*conn{}, remoteQPs: map[remoteKey]*conn{},
		sidr: map[sidrKey]*conn{}, listeners: map[uint64]listener{},
		send: send,
	}
	m.tid = uint64(m.rng.Uint32()) << 32
	return m
}

// newTID returns a new transaction ID.
func (m *machine) newTID() uint64 {
	m.tid = m.tid&^0xFFFFFFFF | uint64(uint32(m.tid)+1)
	return m.tid
}

// newConn makes a connection with a fresh, unused, non-zero local ID.
func (m *machine) newConn(user consumer) *conn {
	c := &conn{user: user}
	for c.localID == 0 || m.conns[c.localID] != nil {
		c.localID = m.rng.Uint32()
	}
	m.conns[c.localID] = c
	return c
}

// unmatch removes c from the tables that find a connection by the peer's
// IDs: in TimeWait and Idle a REQ of the peer's is a new one (Linux's
// cm_remove_remote).
func (m *machine) unmatch(c *conn) {
	for _, t := range []struct {
		tab map[remoteKey]*conn
		k   remoteKey
	}{{m.remote, remoteKey{c.remoteID, c.remoteGUID}}, {m.remoteQPs, remoteKey{c.remoteQPN, c.remoteGUID}}} {
		if t.tab[t.k] == c {
			delete(t.tab, t.k)
		}
	}
	k := sidrKey{c.remoteID, c.peer}
	if m.sidr[k] == c {
		delete(m.sidr, k)
	}
}

// forget removes a connection that reached Idle.
func (m *machine) forget(c *conn) {
	if m.conns[c.localID] == c {
		delete(m.conns, c.localID)
	}
	m.unmatch(c)
	c.deadline, c.resendOn = time.Time{}, false
}

// event is one input to a connection's state machine.
type event struct {
	in  input
	tid uint64
	msg mad.Message
	// The consumer's answer (inAccept, inReject, inDisconnect).
	rep     *mad.REP
	sidrRep *mad.SIDRREP
	reason  mad.RejReason
	private []byte
}

// step runs one input through the transition table.
func (m *machine) step(c *conn, ev *event) error {
	h := transitions[c.state][ev.in]
	if h == nil {
		if ev.in < inTimeout {
			m.counters.RxDropped++
		}
		return fmt.Errorf("%w: %v in %v", ErrState, ev.in, c.state)
	}
	prev := c.state
	c.state = h(m, c, ev)
	switch {
	case c.state == Idle && prev != Idle:
		m.forget(c)
	case c.state == TimeWait && prev != TimeWait:
		m.unmatch(c)
	}
	return nil
}

// encode writes msg of transaction tid into the machine's buffer.
func (m *machine) encode(tid uint64, msg mad.Message) mad.MAD {
	b := mad.MAD(m.buf[:])
	clear(b)
	h := mad.CMHeader(msg.Attr(), tid)
	b.SetHeader(&h)
	b.SetMessage(msg)
	m.counters.Tx[attrIndex(msg.Attr())]++
	return b
}

// transmit sends message msg of transaction tid to c's peer and keeps it
// to send again: on the timer when resend is set (which arms it), else
// only in answer to a duplicate.
func (m *machine) transmit(c *conn, tid uint64, msg mad.Message, resend bool) {
	b := m.encode(tid, msg)
	m.send(c.peer, b)
	copy(c.resendMAD[:], b)
	c.resendOn = true
	c.deadline = time.Time{}
	if resend {
		c.deadline = m.now.Add(c.timeout)
	}
}

// reply sends msg to dst outside any connection (a REJ for a service
// nobody listens on, a DREP for an unknown connection).
func (m *machine) reply(dst wire.GID, tid uint64, msg mad.Message) {
	m.send(dst, m.encode(tid, msg))
}

// again sends the kept message again.
func (m *machine) again(c *conn) {
	m.counters.TxRetries[attrIndex(mad.MAD(c.resendMAD[:]).Attr())]++
	m.send(c.peer, mad.MAD(c.resendMAD[:]))
}

// duplicate drops a message the state has answered already or needs no
// answer to (Linux drops a REQ that finds a REP on its way, for one).
func (m *machine) duplicate(c *conn, ev *event) State {
	m.counters.RxDuplicates[attrIndex(ev.msg.Attr())]++
	return c.state
}

// stay keeps the state (a second disconnect while one is under way).
func (m *machine) stay(c *conn, _ *event) State { return c.state }

// resendOrFail is the timer of a message that waits for an answer: sent
// again while retries are left, else the connection fails unreachable
// (REQ, REP, SIDR_REQ: rdma_cm's UNREACHABLE, -ETIMEDOUT). Nothing is
// sent to the peer then, as Linux sends nothing.
func (m *machine) resendOrFail(c *conn, ev *event) State {
	if c.retries > 0 {
		c.retries--
		m.again(c)
		c.deadline = m.now.Add(c.timeout)
		return c.state
	}
	m.counters.Timeouts++
	c.user.event(Event{Type: EventUnreachable})
	return Idle
}

// resendOrTimeWait is the DREQ's timer: sent again while retries are
// left, then the connection goes to TimeWait all the same.
func (m *machine) resendOrTimeWait(c *conn, ev *event) State {
	if c.retries > 0 {
		return m.resendOrFail(c, ev)
	}
	m.counters.Timeouts++
	c.user.event(Event{Type: EventDisconnected})
	return m.enterTimeWait(c)
}

// enterTimeWait arms the time wait: the local ACK timeout, after which
// no packet of the connection can still be in the fabric (§12.9.7).
func (m *machine) enterTimeWait(c *conn) State {
	c.deadline = m.now.Add(convertMS(AckTimeout))
	return TimeWait
}

func (m *machine) timeWaitExit(c *conn, _ *event) State {
	c.user.event(Event{Type: EventTimeWaitExit})
	return Idle
}

// abandon ends an active connection its consumer gives up before the
// answer (it closes it while the REQ is out). A REJ with reason timeout
// tells the peer, which may have made a connection already; it names us
// by our CA GUID, since the peer's ID for us may be unknown (Linux's
// cm_destroy_id does the same).
func (m *machine) abandon(c *conn, _ *event) State {
	if c.state == SIDRReqSent {
		return Idle
	}
	rej := &mad.REJ{LocalCommID: c.localID, MessageRejected: 2, Reason: uint16(mad.RejTimeout), RejectedInfoLength: 8}
	binary.BigEndian.PutUint64(rej.ARI[:], m.guid)
	m.transmit(c, c.tid, rej, false)
	return Idle
}

// --- the active side ---

// connect sends a REQ for a new active connection (its fields but the
// communication ID and CA GUID are the caller's) on a path of packet
// lifetime pktLife.
func (m *machine) connect(c *conn, peer wire.GID, req *mad.REQ, pktLife uint8) {
	c.active = true
	c.peer, c.serviceID, c.localQPN = peer, req.ServiceID, req.LocalQPN
	req.LocalCommID, req.LocalCAGUID = c.localID, m.guid
	c.tid = m.newTID()
	c.timeout = reqTimeout(pktLife, req.RemoteCMResponseTimeout)
	c.retries = int(req.MaxCMRetries)
	c.state = ReqSent
	m.transmit(c, c.tid, req, true)
}

func (m *machine) mraReceived(c *conn, ev *event) State {
	mra := ev.msg.(*mad.MRA)
	if mra.MessageMRAed != 0 {
		m.counters.RxDropped++
		return c.state
	}
	// The peer's consumer needs time: wait for the service timeout it
	// names (and a packet's time) before sending the REQ again.
	c.deadline = m.now.Add(convertMS(mra.ServiceTimeout) + convertMS(AckTimeout))
	return MRAReqRcvd
}

func (m *machine) repReceived(c *conn, ev *event) State {
	rep := ev.msg.(*mad.REP)
	c.remoteID, c.remoteGUID, c.remoteQPN = rep.LocalCommID, rep.LocalCAGUID, rep.LocalQPN
	c.tid = ev.tid
	if old := m.remoteQPs[remoteKey{c.remoteQPN, c.remoteGUID}]; old != nil && old != c {
		// The peer's QP still serves a connection we think is up: it
		// went away without a DREQ. Both end (§12.9.8.3.1).
		m.stale(old)
		m.transmit(c, c.tid, &mad.REJ{LocalCommID: c.localID, RemoteCommID: c.remoteID, MessageRejected: 1,
			Reason: uint16(mad.RejStaleConn)}, false)
		c.user.event(Event{Type: EventRejected, Reason: mad.RejStaleConn})
		return Idle
	}
	m.remote[remoteKey{c.remoteID, c.remoteGUID}] = c
	m.remoteQPs[remoteKey{c.remoteQPN, c.remoteGUID}] = c
	if err := c.user.repReceived(rep); err != nil {
		m.transmit(c, c.tid, &mad.REJ{LocalCommID: c.localID, RemoteCommID: c.remoteID, MessageRejected: 1,
			Reason: uint16(mad.RejConsumerDefined)}, false)
		c.user.event(Event{Type: EventConnectError})
		return Idle
	}
	if d, ok := c.user.(rtuDeferrer); ok && d.defersRTU() {
		c.user.event(Event{Type: EventConnectResponse, PrivateData: clone(rep.PrivateData[:])})
		return RepRcvd
	}
	m.transmit(c, c.tid, &mad.RTU{LocalCommID: c.localID, RemoteCommID: c.remoteID}, false)
	c.user.event(Event{Type: EventEstablished, PrivateData: clone(rep.PrivateData[:])})
	return Established
}

// commEst: a packet reached the passive QP before the RTU (IBTA's
// communication established event, which the consumer reports with
// rdma_notify): the connection is up, the REP's timer stops.
func (m *machine) commEst(c *conn, ev *event) State {
	c.resendOn, c.deadline = false, time.Time{}
	c.user.event(Event{Type: EventEstablished})
	return Established
}

// sendRTU: the consumer readied its QP after the REP (RepRcvd). It
// knows the connection is up when its accept returns (librdmacm reports
// ESTABLISHED itself then), so no event comes.
func (m *machine) sendRTU(c *conn, ev *event) State {
	m.transmit(c, c.tid, &mad.RTU{LocalCommID: c.localID, RemoteCommID: c.remoteID}, false)
	return Established
}

// stale ends a connection whose peer QP has moved on: a DREQ to it, in
// case the peer still knows it.
func (m *machine) stale(old *conn) {
	if old.state == Established {
		old.state = m.sendDREQ(old, &event{})
	}
}

// resendRTU answers a duplicate REP: our RTU was lost.
func (m *machine) resendRTU(c *conn, ev *event) State {
	if !c.active {
		return m.duplicate(c, ev)
	}
	m.counters.RxDuplicates[attrIndex(mad.AttrREP)]++
	m.again(c)
	return c.state
}

func (m *machine) rejected(c *conn, ev *event) State {
	rej := ev.msg.(*mad.REJ)
	ev2 := Event{Type: EventRejected, Reason: mad.RejReason(rej.Reason), PrivateData: clone(rej.PrivateData[:])}
	if !c.active {
		// The active side gave up (REJ timeout) or refused our REP:
		// rdma_cm tells the passive consumer it is unreachable.
		ev2 = Event{Type: EventUnreachable, Reason: mad.RejReason(rej.Reason)}
	}
	c.user.event(ev2)
	if rej.Reason == uint16(mad.RejStaleConn) {
		return m.enterTimeWait(c)
	}
	return Idle
}

// rejectedLate is a REJ for a connection that was up: it ends it.
func (m *machine) rejectedLate(c *conn, ev *event) State {
	if c.state == Established {
		c.user.event(Event{Type: EventDisconnected})
	}
	return m.enterTimeWait(c)
}

// --- the passive side ---

// sendMRA answers a duplicate REQ that came before the consumer answered
// the first: MRA asks the peer to wait (the kernel's delayed MRA).
func (m *machine) sendMRA(c *conn, ev *event) State {
	m.counters.RxDuplicates[attrIndex(mad.AttrREQ)]++
	m.transmit(c, c.tid, &mad.MRA{LocalCommID: c.localID, RemoteCommID: c.remoteID, MessageMRAed: 0,
		ServiceTimeout: mraServiceTimeout}, false)
	return MRAReqSent
}

// resendMRA answers a further duplicate REQ with the MRA again.
func (m *machine) resendMRA(c *conn, ev *event) State {
	m.counters.RxDuplicates[attrIndex(mad.AttrREQ)]++
	m.again(c)
	return c.state
}

func (m *machine) sendREP(c *conn, ev *event) State {
	rep := ev.rep
	rep.LocalCommID, rep.RemoteCommID, rep.LocalCAGUID = c.localID, c.remoteID, m.guid
	c.localQPN = rep.LocalQPN
	c.timeout, c.retries = c.repTimeout, c.repRetries
	m.transmit(c, c.tid, rep, true)
	return RepSent
}

func (m *machine) sendREJ(c *conn, ev *event) State {
	reason := ev.reason
	if reason == 0 {
		reason = mad.RejConsumerDefined
	}
	rej := &mad.REJ{LocalCommID: c.localID, RemoteCommID: c.remoteID, Reason: uint16(reason)}
	switch c.state {
	case RepSent, RepRcvd:
		rej.MessageRejected = 1
	}
	copy(rej.PrivateData[:], ev.private)
	m.transmit(c, c.tid, rej, false)
	return Idle
}

func (m *machine) rtuReceived(c *conn, ev *event) State {
	c.resendOn, c.deadline = false, time.Time{}
	c.user.event(Event{Type: EventEstablished, PrivateData: clone(ev.msg.(*mad.RTU).PrivateData[:])})
	return Established
}

// dreqBeforeRTU: the RTU was lost and the peer, established, already
// disconnects. The connection was up: established, then disconnected.
func (m *machine) dreqBeforeRTU(c *conn, ev *event) State {
	c.user.event(Event{Type: EventEstablished})
	return m.dreqReceived(c, ev)
}

// --- release ---

func (m *machine) sendDREQ(c *conn, ev *event) State {
	c.tid = m.newTID()
	c.timeout = reqTimeout(PacketLifeTime, CMResponseTimeout)
	c.retries = MaxCMRetries
	dreq := &mad.DREQ{LocalCommID: c.localID, RemoteCommID: c.remoteID, RemoteQPN: c.remoteQPN}
	copy(dreq.PrivateData[:], ev.private)
	m.transmit(c, c.tid, dreq, true)
	return DREQSent
}

// dreqReceived: the peer disconnects. The DREP goes at once in DREQSent
// (the DREQs crossed) and for an autoDREP consumer, else when the
// consumer disconnects (DREQRcvd).
func (m *machine) dreqReceived(c *conn, ev *event) State {
	dreq := ev.msg.(*mad.DREQ)
	c.tid = ev.tid
	if c.state != DREQSent {
		c.user.event(Event{Type: EventDisconnected, PrivateData: clone(dreq.PrivateData[:])})
	} else {
		c.user.event(Event{Type: EventDisconnected})
	}
	if c.state == DREQSent || c.autoDREP {
		return m.sendDREP(c, ev)
	}
	c.deadline, c.resendOn = time.Time{}, false
	return DREQRcvd
}

func (m *machine) sendDREP(c *conn, ev *event) State {
	drep := &mad.DREP{LocalCommID: c.localID, RemoteCommID: c.remoteID}
	copy(drep.PrivateData[:], ev.private)
	m.transmit(c, c.tid, drep, false)
	return m.enterTimeWait(c)
}

func (m *machine) drepReceived(c *conn, _ *event) State {
	c.user.event(Event{Type: EventDisconnected})
	return m.enterTimeWait(c)
}

// resendDREP answers a duplicate DREQ in TimeWait: our DREP was lost.
func (m *machine) resendDREP(c *conn, ev *event) State {
	m.counters.RxDuplicates[attrIndex(mad.AttrDREQ)]++
	m.reply(c.peer, ev.tid, &mad.DREP{LocalCommID: c.localID, RemoteCommID: c.remoteID})
	return c.state
}

// --- SIDR (UD) ---

// resolve sends a SIDR_REQ for a new UD endpoint.
func (m *machine) resolve(c *conn, peer wire.GID, req *mad.SIDRREQ) {
	c.active = true
	c.peer, c.serviceID = peer, req.ServiceID
	req.RequestID = c.localID
	c.tid = m.newTID()
	c.timeout, c.retries = convertMS(CMResponseTimeout), MaxCMRetries
	c.state = SIDRReqSent
	m.transmit(c, c.tid, req, true)
}

func (m *machine) sidrRepReceived(c *conn, ev *event) State {
	rep := ev.msg.(*mad.SIDRREP)
	if st := mad.SIDRStatus(rep.Status); st != mad.SIDRQPValid {
		c.user.event(Event{Type: EventUnreachable, SIDRStatus: st, PrivateData: clone(rep.PrivateData[:])})
		return Idle
	}
	c.user.event(Event{Type: EventEstablished, QPN: rep.QPN, QKey: rep.QKey, PrivateData: clone(rep.PrivateData[:])})
	return Idle
}

// sendSIDRREP answers a SIDR_REQ: the consumer's QP (inAccept) or a
// rejection (inReject, inDisconnect).
func (m *machine) sendSIDRREP(c *conn, ev *event) State {
	rep := ev.sidrRep
	if rep == nil {
		rep = &mad.SIDRREP{Status: uint8(mad.SIDRRejected)}
		copy(rep.PrivateData[:], ev.private)
	}
	rep.RequestID, rep.ServiceID = c.remoteID, c.serviceID
	m.transmit(c, c.tid, rep, false)
	return Idle
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
