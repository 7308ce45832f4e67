package cm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// The machine alone, sans IO: MADs in, MADs out, a hand-driven clock.

var (
	gidA = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))
	gidB = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))
	gidX = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.66")) // a third host
)

type sent struct {
	dst wire.GID
	m   mad.MAD
}

// user is a consumer that records its events.
type user struct{ events []Event }

func (u *user) repReceived(*mad.REP) error { return nil }
func (u *user) event(ev Event)             { u.events = append(u.events, ev) }

// acceptAll is a listener that takes every REQ, giving it a user.
type acceptAll struct{ got []*conn }

func (l *acceptAll) request(c *conn, _ mad.Message) bool {
	c.user = &user{}
	l.got = append(l.got, c)
	return true
}

type rig struct {
	m   *machine
	out []sent
	now time.Time
}

func newRig(guid uint64) *rig {
	r := &rig{now: time.Unix(1e9, 0)}
	r.m = newMachine(guid, guid, func(dst wire.GID, m mad.MAD) {
		r.out = append(r.out, sent{dst, append(mad.MAD(nil), m...)})
	})
	r.m.now = r.now
	return r
}

func (r *rig) advance(d time.Duration) {
	r.now = r.now.Add(d)
	r.m.now = r.now
	r.m.tick()
}

// deliver hands every MAD r sent to dst's machine, as from r's address.
func (r *rig) deliver(from wire.GID, to *rig) {
	out := r.out
	r.out = nil
	for _, s := range out {
		to.m.now = to.now
		to.m.receive(from, mad.GSIQPN, s.m)
	}
}

// established connects an active connection of a (at gidA) to a
// listener of b (at gidB) through REQ, REP and RTU.
func established(t testing.TB) (a, b *rig, ca *conn, cb *conn) {
	a, b = newRig(0xA), newRig(0xB)
	l := &acceptAll{}
	sid := mad.ServiceID(mad.PortSpaceTCP, 7471)
	b.m.listeners[sid] = l
	ca = a.m.newConn(&user{})
	a.m.connect(ca, gidB, &mad.REQ{ServiceID: sid, LocalQPN: 0x11, StartingPSN: 1, RemoteCMResponseTimeout: 20,
		LocalCMResponseTimeout: 20, MaxCMRetries: 15}, PacketLifeTime)
	a.deliver(gidA, b)
	if len(l.got) != 1 {
		t.Fatal("the listener got no request")
	}
	cb = l.got[0]
	if err := b.m.step(cb, &event{in: inAccept, rep: &mad.REP{LocalQPN: 0x12, StartingPSN: 2}}); err != nil {
		t.Fatal(err)
	}
	b.deliver(gidB, a)
	a.deliver(gidA, b)
	if ca.state != Established || cb.state != Established {
		t.Fatalf("states %v %v", ca.state, cb.state)
	}
	return a, b, ca, cb
}

// TestTransitions walks the table: every state it names reaches Idle,
// and each state's inputs are the ones the spec gives it.
func TestTransitions(t *testing.T) {
	for s := range numStates {
		if s == Idle {
			continue
		}
		any := false
		for in := range numInputs {
			any = any || transitions[s][in] != nil
		}
		if !any {
			t.Errorf("%v takes no input: a connection in it could never leave", s)
		}
	}
	// States that wait for an answer have a timer; the others have none.
	for s, want := range map[State]bool{ReqSent: true, MRAReqRcvd: true, RepSent: true, DREQSent: true,
		TimeWait: true, SIDRReqSent: true, RepRcvd: false, ReqRcvd: false, MRAReqSent: false, Established: false, DREQRcvd: false} {
		if got := transitions[s][inTimeout] != nil; got != want {
			t.Errorf("%v: timer %v, want %v", s, got, want)
		}
	}
}

// TestForgedMADs: MADs that name a connection but come from another host,
// or carry the wrong peer ID or QPN, end nothing (IBTA §12.9.8); a DREQ
// for an unknown connection is answered with a DREP, as Linux does.
func TestForgedMADs(t *testing.T) {
	a, b, ca, cb := established(t)
	forge := func(to *rig, from wire.GID, msg mad.Message) {
		buf := make(mad.MAD, mad.Size)
		h := mad.CMHeader(msg.Attr(), 7)
		buf.SetHeader(&h)
		buf.SetMessage(msg)
		to.m.receive(from, mad.GSIQPN, buf)
	}
	forge(a, gidX, &mad.DREQ{LocalCommID: cb.localID, RemoteCommID: ca.localID, RemoteQPN: 0x11})     // another host
	forge(a, gidB, &mad.DREQ{LocalCommID: cb.localID + 1, RemoteCommID: ca.localID, RemoteQPN: 0x11}) // wrong peer ID
	forge(a, gidB, &mad.DREQ{LocalCommID: cb.localID, RemoteCommID: ca.localID, RemoteQPN: 0x99})     // not our QP
	forge(a, gidX, &mad.REJ{LocalCommID: cb.localID, RemoteCommID: ca.localID, Reason: 28})
	forge(b, gidX, &mad.RTU{LocalCommID: ca.localID, RemoteCommID: cb.localID})
	if ca.state != Established || cb.state != Established {
		t.Fatalf("forged MADs moved the connection: %v %v", ca.state, cb.state)
	}
	if got := a.m.counters.RxBadSource; got != 4 {
		t.Errorf("a: cm_rx_bad_source %d, want 4", got)
	}
	a.out = nil
	forge(a, gidX, &mad.DREQ{LocalCommID: 5, RemoteCommID: 12345, RemoteQPN: 0x11})
	if len(a.out) != 1 || a.out[0].dst != gidX || a.out[0].m.Attr() != mad.AttrDREP {
		t.Errorf("a DREQ for no connection: sent %v, want a DREP back", a.out)
	}
	// The real DREQ ends it.
	_ = a.m.step(ca, &event{in: inDisconnect})
	a.deliver(gidA, b)
	if cb.state != DREQRcvd {
		t.Fatalf("b after the DREQ: %v, want DREQ_RCVD (the DREP waits for its consumer)", cb.state)
	}
	_ = b.m.step(cb, &event{in: inDisconnect})
	b.deliver(gidB, a)
	if ca.state != TimeWait || cb.state != TimeWait {
		t.Fatalf("after DREQ/DREP: %v %v, want TIMEWAIT", ca.state, cb.state)
	}
	a.advance(3 * time.Second)
	b.advance(3 * time.Second)
	if len(a.m.conns) != 0 || len(b.m.conns) != 0 {
		t.Errorf("connections left after the time wait: %d %d", len(a.m.conns), len(b.m.conns))
	}
}

// TestDuplicateREQ: a REQ sent again before the consumer answers is
// answered with MRA (service timeout 24), and the active side then waits
// the longer time before sending the REQ again; a REQ that finds the REP
// sent is dropped (Linux's choice: the REP's own timer resends it).
func TestDuplicateREQ(t *testing.T) {
	a, b := newRig(0xA), newRig(0xB)
	l := &acceptAll{}
	sid := mad.ServiceID(mad.PortSpaceTCP, 1)
	b.m.listeners[sid] = l
	ca := a.m.newConn(&user{})
	a.m.connect(ca, gidB, &mad.REQ{ServiceID: sid, LocalQPN: 0x11, RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, MaxCMRetries: 3}, PacketLifeTime)
	req := a.out[0]
	a.deliver(gidA, b)
	b.m.receive(gidA, mad.GSIQPN, req.m) // the duplicate
	if len(l.got) != 1 || l.got[0].state != MRAReqSent || len(b.out) != 1 || b.out[0].m.Attr() != mad.AttrMRA {
		t.Fatalf("duplicate REQ: %d requests, sent %d MADs", len(l.got), len(b.out))
	}
	b.deliver(gidB, a)
	if ca.state != MRAReqRcvd {
		t.Fatalf("after MRA: %v", ca.state)
	}
	a.advance(60 * time.Second) // less than the MRA's 67.1 s + 2 s
	if len(a.out) != 0 {
		t.Errorf("REQ sent again %v after an MRA of 68 s", 60*time.Second)
	}
	a.advance(10 * time.Second)
	if len(a.out) != 1 {
		t.Errorf("REQ not sent again after the MRA's time")
	}
	cb := l.got[0]
	_ = b.m.step(cb, &event{in: inAccept, rep: &mad.REP{LocalQPN: 0x12}})
	b.out = nil
	a.deliver(gidA, b) // the REQ sent again, after the REP
	if len(b.out) != 0 || cb.state != RepSent {
		t.Errorf("a REQ after the REP: sent %d, state %v", len(b.out), cb.state)
	}
}

// FuzzMachine: any sequence of MADs from any of three hosts, with time
// passing between them, to a machine with an established active and
// passive connection and a listener: nothing panics, everything sent is
// a MAD that parses, and the connections to b end only by a MAD from b
// that names them.
func FuzzMachine(f *testing.F) {
	_, _, ca, cb := established(f)
	seed := func(msg mad.Message) []byte {
		buf := make([]byte, 2+mad.Size)
		buf[0], buf[1] = 1, 3
		m := mad.MAD(buf[2:])
		h := mad.CMHeader(msg.Attr(), 1)
		m.SetHeader(&h)
		m.SetMessage(msg)
		return buf
	}
	sid := mad.ServiceID(mad.PortSpaceTCP, 7471)
	for _, msg := range []mad.Message{
		&mad.REQ{LocalCommID: 9, ServiceID: sid, LocalQPN: 0x20, LocalCAGUID: 0xB, MaxCMRetries: 2},
		&mad.REP{LocalCommID: cb.localID, RemoteCommID: ca.localID, LocalQPN: 0x12},
		&mad.RTU{LocalCommID: ca.localID, RemoteCommID: cb.localID},
		&mad.DREQ{LocalCommID: cb.localID, RemoteCommID: ca.localID, RemoteQPN: 0x11},
		&mad.DREP{LocalCommID: cb.localID, RemoteCommID: ca.localID},
		&mad.REJ{LocalCommID: cb.localID, RemoteCommID: ca.localID, Reason: 10},
		&mad.MRA{LocalCommID: cb.localID, RemoteCommID: ca.localID},
		&mad.SIDRREQ{RequestID: 3, ServiceID: sid},
		&mad.SIDRREP{RequestID: ca.localID},
	} {
		f.Add(seed(msg))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _, ca, _ := established(t)
		// Deterministic IDs: a's connection is the one the seeds name.
		for len(data) >= 2 {
			src := []wire.GID{gidA, gidB, gidX}[int(data[0])%3]
			a.advance(time.Duration(data[1]) * 100 * time.Millisecond)
			data = data[2:]
			n := min(len(data), mad.Size)
			b := make([]byte, mad.Size)
			copy(b, data[:n])
			data = data[n:]
			before := ca.state
			a.m.receive(src, mad.GSIQPN, b)
			if before == Established && ca.state != Established && src != gidB {
				t.Fatalf("a MAD from %v moved the connection to b from ESTABLISHED to %v", src.Addr(), ca.state)
			}
			if ca.state != Established && ca.state != TimeWait && ca.state != Idle && ca.state != DREQRcvd && ca.state != DREQSent {
				t.Fatalf("the active connection went back to %v", ca.state)
			}
		}
		for _, s := range a.out {
			if _, err := mad.Parse(s.m); err != nil {
				t.Fatalf("sent a MAD that does not parse: %v", err)
			}
			if _, err := s.m.Message(); err != nil {
				t.Fatalf("sent a MAD that is no CM message: %v", err)
			}
		}
		for k, c := range a.m.remote {
			if a.m.conns[c.localID] != c {
				t.Fatalf("remote %v names a forgotten connection", k)
			}
		}
	})
}

// deferUser readies its QP itself: the RTU waits for its accept.
type deferUser struct{ user }

func (*deferUser) defersRTU() bool { return true }

// TestDeferredRTU: a consumer that readies its QP after the REP (a
// librdmacm program) gets CONNECT_RESPONSE; the RTU goes when it accepts,
// and only then is the connection established on both sides.
func TestDeferredRTU(t *testing.T) {
	a, b := newRig(0xA), newRig(0xB)
	l := &acceptAll{}
	sid := mad.ServiceID(mad.PortSpaceTCP, 2)
	b.m.listeners[sid] = l
	u := &deferUser{}
	ca := a.m.newConn(u)
	a.m.connect(ca, gidB, &mad.REQ{ServiceID: sid, LocalQPN: 0x11, RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, MaxCMRetries: 3}, PacketLifeTime)
	a.deliver(gidA, b)
	cb := l.got[0]
	_ = b.m.step(cb, &event{in: inAccept, rep: &mad.REP{LocalQPN: 0x12}})
	b.deliver(gidB, a)
	if ca.state != RepRcvd || len(a.out) != 0 || len(u.events) != 1 || u.events[0].Type != EventConnectResponse {
		t.Fatalf("after the REP: %v, %d MADs sent, events %v", ca.state, len(a.out), u.events)
	}
	if err := a.m.step(ca, &event{in: inAccept}); err != nil {
		t.Fatal(err)
	}
	a.deliver(gidA, b)
	if ca.state != Established || cb.state != Established || len(u.events) != 1 {
		t.Fatalf("after accept: %v %v %v (the consumer knows it is up: no event)", ca.state, cb.state, u.events)
	}
}
