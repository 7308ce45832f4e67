package cm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// QP1's queues: receive buffers of a GRH and a MAD each, send buffers of
// a MAD each. A MAD that finds every send buffer in flight waits in a
// bounded backlog.
const (
	recvDepth   = 256
	sendDepth   = 64
	grhSize     = 40
	maxBacklog  = 4096
	maxAHs      = 4096
	recvSlot    = grhSize + mad.Size
	sendWRIDBit = 1 << 32 // WRIDs of sends; receives' are their slot
)

// agent is the connection manager's presence on one device, as the
// kernel's MAD agent for the CM class: it owns QP1 (its PD, CQ, MAD
// buffers and address handles), runs the receive loop and the one timer,
// and serializes the machine with its lock.
type agent struct {
	dev *rnic.Device
	gid wire.GID // the port's address GID: our address on the wire
	pd  *rnic.PD
	cq  *rnic.CQ
	qp  *rnic.QP
	mr  *rnic.MR
	buf []byte // recvDepth receive slots, then sendDepth send slots

	mu       sync.Mutex
	m        *machine
	free     []int    // send slots not in flight
	backlog  []backed // MADs waiting for a send slot
	ahs      map[wire.GID]*rnic.AH
	timer    *time.Timer
	deadline time.Time
	err      error // why the agent stopped (the device closed)
	done     chan struct{}
}

type backed struct {
	dst wire.GID
	mad [mad.Size]byte
}

var agents struct {
	sync.Mutex
	m map[*rnic.Device]*agent
}

// Start runs the connection manager on dev (QP1 and its agent) until the
// device closes, as the kernel's CM serves every RDMA device: from then
// on dev answers every CM message, a REQ for a port nobody listens on
// with a REJ (reason 8). Dial and Listen start it themselves; a device
// on which it never started does not answer MADs at all (they find no
// QP1). Starting it again is a no-op.
func Start(dev *rnic.Device) error {
	_, err := agentOf(dev)
	return err
}

// agentOf returns the device's agent, starting it (and QP1) on first use.
// It runs until the device closes.
func agentOf(dev *rnic.Device) (*agent, error) {
	agents.Lock()
	defer agents.Unlock()
	if a := agents.m[dev]; a != nil {
		select {
		case <-a.done:
		default:
			return a, nil
		}
	}
	a, err := startAgent(dev)
	if err != nil {
		return nil, err
	}
	if agents.m == nil {
		agents.m = map[*rnic.Device]*agent{}
	}
	agents.m[dev] = a
	return a, nil
}

func startAgent(dev *rnic.Device) (a *agent, err error) {
	g, err := dev.GID(rnic.AddrGIDIndex)
	if err != nil {
		return nil, err
	}
	ll, err := dev.GID(0)
	if err != nil {
		return nil, err
	}
	a = &agent{dev: dev, gid: wire.GID(g), ahs: map[wire.GID]*rnic.AH{}, done: make(chan struct{})}
	fail := func(e error) (*agent, error) {
		a.release()
		return nil, fmt.Errorf("cm: QP1 on %s: %w", dev.Name(), e)
	}
	if a.pd, err = dev.AllocPD(); err != nil {
		return fail(err)
	}
	if a.cq, err = dev.CreateCQ(recvDepth + sendDepth); err != nil {
		return fail(err)
	}
	a.buf = make([]byte, recvDepth*recvSlot+sendDepth*mad.Size)
	if a.mr, err = a.pd.RegMR(a.buf, rnic.AccessLocalWrite); err != nil {
		return fail(err)
	}
	if a.qp, err = a.pd.CreateQP(rnic.QPInitAttr{Type: rnic.GSI, SendCQ: a.cq, RecvCQ: a.cq,
		Cap: rnic.QPCap{MaxSendWR: sendDepth, MaxRecvWR: recvDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return fail(err)
	}
	if err = a.qp.Connect(rnic.Endpoint{}, rnic.ConnParams{}); err != nil {
		return fail(err)
	}
	for i := range recvDepth {
		if err = a.postRecv(i); err != nil {
			return fail(err)
		}
	}
	for i := range sendDepth {
		a.free = append(a.free, i)
	}
	// The CA GUID is the link-local GID's interface ID, as the
	// library's node GUID (ibv_get_device_guid) is.
	guid := binary.BigEndian.Uint64(ll[8:])
	seed := uint64(time.Now().UnixNano()) ^ guid
	a.m = newMachine(guid, seed, a.sendLocked)
	a.timer = time.AfterFunc(time.Hour, a.fire)
	a.timer.Stop()
	go a.run()
	return a, nil
}

// release frees QP1 and its resources.
func (a *agent) release() {
	if a.qp != nil {
		_ = a.qp.Destroy()
	}
	for _, ah := range a.ahs {
		_ = ah.Destroy()
	}
	if a.mr != nil {
		_ = a.mr.Dereg()
	}
	if a.cq != nil {
		_ = a.cq.Destroy()
	}
	if a.pd != nil {
		_ = a.pd.Dealloc()
	}
}

func (a *agent) postRecv(slot int) error {
	return a.qp.PostRecv(rnic.RecvWR{WRID: uint64(slot), SGL: []rnic.SGE{a.mr.SGE(slot*recvSlot, recvSlot)}})
}

func (a *agent) sendOff(slot int) int { return recvDepth*recvSlot + slot*mad.Size }

// run is the receive loop: QP1's completions until the device closes.
func (a *agent) run() {
	wcs := make([]rnic.WC, 32)
	for {
		n, err := a.cq.Wait(context.Background(), wcs)
		if err != nil {
			a.stop(err)
			return
		}
		a.mu.Lock()
		a.m.now = time.Now()
		for _, wc := range wcs[:n] {
			if wc.WRID&sendWRIDBit != 0 {
				a.sent(int(wc.WRID &^ sendWRIDBit))
				continue
			}
			slot := int(wc.WRID)
			if slot >= recvDepth {
				continue
			}
			if wc.Status == rnic.WCSuccess && wc.ByteLen >= grhSize {
				b := a.buf[slot*recvSlot : slot*recvSlot+int(min(wc.ByteLen, recvSlot))]
				a.m.receive(sourceGID(b[:grhSize]), wc.SrcQP, b[grhSize:])
			}
			if wc.Status != rnic.WCWRFlushErr {
				_ = a.postRecv(slot)
			}
		}
		a.rearm()
		a.mu.Unlock()
	}
}

// sourceGID reads the sender's GID from a UD receive's GRH area: the
// IPv6 header's source, or for RoCEv2 over IPv4 the IPv4 header's
// source address in the area's last 20 bytes.
func sourceGID(grh []byte) wire.GID {
	if grh[0]>>4 == 6 {
		return wire.GID(grh[8:24])
	}
	var g wire.GID
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], grh[20+12:20+16])
	return g
}

// sent retires a send slot and sends a MAD of the backlog in it.
func (a *agent) sent(slot int) {
	a.free = append(a.free, slot)
	if len(a.backlog) > 0 {
		b := a.backlog[0]
		a.backlog = a.backlog[1:]
		a.sendLocked(b.dst, mad.MAD(b.mad[:]))
	}
}

// sendLocked sends a MAD to QP1 of dst (the machine's send).
func (a *agent) sendLocked(dst wire.GID, m mad.MAD) {
	if a.err != nil {
		a.m.counters.TxDropped++
		return
	}
	if len(a.free) == 0 {
		if len(a.backlog) >= maxBacklog {
			a.m.counters.TxDropped++
			return
		}
		var b backed
		b.dst = dst
		copy(b.mad[:], m)
		a.backlog = append(a.backlog, b)
		return
	}
	ah, err := a.ah(dst)
	if err != nil {
		a.m.counters.TxDropped++
		return
	}
	slot := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	off := a.sendOff(slot)
	copy(a.buf[off:off+mad.Size], m)
	if err := a.qp.PostSend(rnic.SendWR{WRID: sendWRIDBit | uint64(slot), Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{a.mr.SGE(off, mad.Size)}, AH: ah, RemoteQPN: mad.GSIQPN, RemoteQKey: mad.GSIQKey}); err != nil {
		a.free = append(a.free, slot)
		a.m.counters.TxDropped++
	}
}

// ah returns an address handle to dst, from a cache.
func (a *agent) ah(dst wire.GID) (*rnic.AH, error) {
	if ah := a.ahs[dst]; ah != nil {
		return ah, nil
	}
	if len(a.ahs) >= maxAHs {
		for g, ah := range a.ahs {
			_ = ah.Destroy()
			delete(a.ahs, g)
		}
	}
	ah, err := a.pd.CreateAH(rnic.AHAttr{DGID: rnic.GID(dst), SGIDIndex: rnic.AddrGIDIndex, HopLimit: 64})
	if err != nil {
		return nil, err
	}
	a.ahs[dst] = ah
	return ah, nil
}

// drain waits, at most d, until every MAD handed to QP1 has left it (a
// DREQ sent just before the program closes its device still reaches
// the peer).
func (a *agent) drain(d time.Duration) {
	for end := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		idle := a.err != nil || len(a.free) == sendDepth && len(a.backlog) == 0
		a.mu.Unlock()
		if idle || time.Now().After(end) {
			return
		}
	}
}

// fire is the timer.
func (a *agent) fire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deadline = time.Time{}
	a.m.now = time.Now()
	a.m.tick()
	a.rearm()
}

// rearm sets the timer to the machine's next deadline. The caller holds
// the lock.
func (a *agent) rearm() {
	d := a.m.nextDeadline()
	if d.IsZero() || a.err != nil {
		if !a.deadline.IsZero() {
			a.timer.Stop()
			a.deadline = time.Time{}
		}
		return
	}
	if d.Equal(a.deadline) {
		return
	}
	a.deadline = d
	a.timer.Reset(max(time.Until(d), 0))
}

// stop ends the agent when its device closes: every connection's
// consumer hears of it.
func (a *agent) stop(err error) {
	a.mu.Lock()
	if errors.Is(err, rnic.ErrClosed) {
		err = fmt.Errorf("cm: device %s: %w", a.dev.Name(), err)
	}
	a.err = err
	a.timer.Stop()
	for _, c := range a.m.conns {
		if c.user != nil && c.state != TimeWait {
			c.user.event(Event{Type: EventDisconnected})
		}
		a.m.forget(c)
	}
	close(a.done)
	a.mu.Unlock()
	agents.Lock()
	if agents.m[a.dev] == a {
		delete(agents.m, a.dev)
	}
	agents.Unlock()
}

// do runs f on the machine under the lock, the clock read, and rearms
// the timer after it.
func (a *agent) do(f func(m *machine) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.m.now = time.Now()
	err := f(a.m)
	a.rearm()
	return err
}

// Counters returns dev's CM counters (zero if the CM never ran on it).
func CountersOf(dev *rnic.Device) Counters {
	agents.Lock()
	a := agents.m[dev]
	agents.Unlock()
	if a == nil {
		return Counters{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m.counters
}
