package cm

import (
	"encoding/binary"
	"time"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/mad"
)

// receive takes one MAD that QP1 received from src (its GRH's source
// GID) and source QP srcQP. Every MAD is data: a malformed one, one not
// from a QP1, one for no connection or from another source than the
// connection's peer, one the state does not take, is counted and
// dropped, or answered where the spec says (a REJ for a service nobody
// listens on, a DREP for a connection we do not know).
func (m *machine) receive(src wire.GID, srcQP uint32, b []byte) {
	if srcQP != mad.GSIQPN {
		m.counters.RxBadSource++
		return
	}
	md, err := mad.Parse(b)
	if err != nil {
		m.counters.RxMalformed++
		return
	}
	if md.Class() != mad.ClassCM || md.Method() != mad.MethodSend {
		m.counters.RxNotCM++
		return
	}
	msg, err := md.Message()
	if err != nil {
		m.counters.RxNotCM++ // LAP, APR, ClassPortInfo: not over RoCE
		return
	}
	m.counters.Rx[attrIndex(msg.Attr())]++
	tid := md.TID()
	var c *conn
	in := inREQ
	switch msg := msg.(type) {
	case *mad.REQ:
		m.reqReceived(src, tid, msg)
		return
	case *mad.SIDRREQ:
		m.sidrReqReceived(src, tid, msg)
		return
	case *mad.SIDRREP:
		c, in = m.conns[msg.RequestID], inSIDRREP
		if c == nil || c.peer != src || !c.active {
			m.counters.RxUnknown++
			return
		}
	case *mad.MRA:
		c, in = m.match(src, msg.RemoteCommID, msg.LocalCommID), inMRA
	case *mad.REP:
		c, in = m.match(src, msg.RemoteCommID, msg.LocalCommID), inREP
	case *mad.RTU:
		c, in = m.match(src, msg.RemoteCommID, msg.LocalCommID), inRTU
	case *mad.REJ:
		in = inREJ
		if msg.Reason == uint16(mad.RejTimeout) && msg.MessageRejected == 2 && msg.RemoteCommID == 0 {
			// The peer gave up its REQ: it names itself by its CA GUID.
			c = m.remote[remoteKey{msg.LocalCommID, binary.BigEndian.Uint64(msg.ARI[:8])}]
			if c == nil || c.peer != src {
				m.counters.RxUnknown++
				return
			}
		} else {
			c = m.match(src, msg.RemoteCommID, msg.LocalCommID)
		}
	case *mad.DREQ:
		in = inDREQ
		if m.conns[msg.RemoteCommID] == nil {
			// Linux answers a DREQ for a connection it does not know
			// (the peer's DREP was lost after ours went to Idle).
			m.counters.RxUnknown++
			m.reply(src, tid, &mad.DREP{LocalCommID: msg.RemoteCommID, RemoteCommID: msg.LocalCommID})
			return
		}
		if c = m.match(src, msg.RemoteCommID, msg.LocalCommID); c != nil && msg.RemoteQPN != c.localQPN {
			m.counters.RxBadSource++ // not our QP: not ours to end
			return
		}
	case *mad.DREP:
		c, in = m.match(src, msg.RemoteCommID, msg.LocalCommID), inDREP
	}
	if c == nil {
		return
	}
	_ = m.step(c, &event{in: in, tid: tid, msg: msg})
}

// match finds the connection a message names: ours by our communication
// ID, from its peer, with the peer's ID once we know it.
func (m *machine) match(src wire.GID, ours, theirs uint32) *conn {
	c := m.conns[ours]
	switch {
	case c == nil:
		m.counters.RxUnknown++
		return nil
	case c.peer != src || c.remoteID != 0 && theirs != c.remoteID:
		m.counters.RxBadSource++
		return nil
	}
	return c
}

// reqReceived: a REQ is a duplicate of a connection's, or stale (its QP
// serves a connection still up), or for a service nobody listens on, or
// a new passive connection for a listener.
func (m *machine) reqReceived(src wire.GID, tid uint64, req *mad.REQ) {
	if c := m.remote[remoteKey{req.LocalCommID, req.LocalCAGUID}]; c != nil {
		if c.peer != src {
			m.counters.RxBadSource++
			return
		}
		_ = m.step(c, &event{in: inREQ, tid: tid, msg: req})
		return
	}
	rej := func(reason mad.RejReason) {
		m.counters.Rejects++
		m.reply(src, tid, &mad.REJ{RemoteCommID: req.LocalCommID, Reason: uint16(reason)})
	}
	if req.TransportServiceType > 1 || req.ExtendedTransportType != 0 {
		rej(mad.RejInvalidTransportType) // RC and UC only: no RD, no XRC
		return
	}
	lis := m.listeners[req.ServiceID]
	if lis == nil {
		rej(mad.RejInvalidServiceID)
		return
	}
	if old := m.remoteQPs[remoteKey{req.LocalQPN, req.LocalCAGUID}]; old != nil {
		m.stale(old)
		rej(mad.RejStaleConn)
		return
	}
	c := m.newConn(nil)
	c.state, c.peer, c.tid, c.serviceID = ReqRcvd, src, tid, req.ServiceID
	c.remoteID, c.remoteGUID, c.remoteQPN = req.LocalCommID, req.LocalCAGUID, req.LocalQPN
	c.repTimeout, c.repRetries = convertMS(req.LocalCMResponseTimeout), int(req.MaxCMRetries)
	m.remote[remoteKey{c.remoteID, c.remoteGUID}] = c
	m.remoteQPs[remoteKey{c.remoteQPN, c.remoteGUID}] = c
	if !lis.request(c, req) {
		m.counters.RxDropped++
		m.forget(c)
	}
}

// sidrReqReceived: a SIDR_REQ is a duplicate of one not answered yet, or
// for a service nobody listens on (status 1), or new for a listener.
func (m *machine) sidrReqReceived(src wire.GID, tid uint64, req *mad.SIDRREQ) {
	k := sidrKey{req.RequestID, src}
	if m.sidr[k] != nil {
		m.counters.RxDuplicates[attrIndex(mad.AttrSIDRREQ)]++
		return
	}
	lis := m.listeners[req.ServiceID]
	if lis == nil {
		m.counters.Rejects++
		m.reply(src, tid, &mad.SIDRREP{RequestID: req.RequestID, Status: uint8(mad.SIDRServiceIDUnknown), ServiceID: req.ServiceID})
		return
	}
	c := m.newConn(nil)
	c.state, c.peer, c.tid, c.serviceID, c.remoteID = SIDRReqRcvd, src, tid, req.ServiceID, req.RequestID
	m.sidr[k] = c
	if !lis.request(c, req) {
		m.counters.RxDropped++
		m.forget(c)
	}
}

// tick runs the timers due at m.now.
func (m *machine) tick() {
	for _, c := range m.conns {
		if !c.deadline.IsZero() && !c.deadline.After(m.now) {
			c.deadline = time.Time{}
			_ = m.step(c, &event{in: inTimeout})
		}
	}
}

// nextDeadline returns the earliest timer, or zero.
func (m *machine) nextDeadline() time.Time {
	var d time.Time
	for _, c := range m.conns {
		if !c.deadline.IsZero() && (d.IsZero() || c.deadline.Before(d)) {
			d = c.deadline
		}
	}
	return d
}
