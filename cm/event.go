package cm

import (
	"fmt"

	"github.com/rnic/rnic/wire/mad"
)

// EventType is what happened to a connection, named as rdma_cm names its
// events (enum rdma_cm_event_type).
type EventType uint8

const (
	EventConnectRequest  EventType = iota + 1 // passive: a REQ (or SIDR_REQ) for a listener
	EventEstablished                          // REP and RTU exchanged (UD: the SIDR_REP resolved the service)
	EventRejected                             // the peer rejected: Event.Reason
	EventUnreachable                          // no answer after every retry (rdma_cm: status -ETIMEDOUT)
	EventConnectError                         // the connection could not be set up here (a QP the REP's values do not fit)
	EventDisconnected                         // DREQ sent or received
	EventTimeWaitExit                         // the time wait after a disconnection is over
	EventConnectResponse                      // active: the REP came; the consumer readies its QP and accepts (RTU)
)

var eventNames = [...]string{
	EventConnectRequest: "CONNECT_REQUEST", EventEstablished: "ESTABLISHED", EventRejected: "REJECTED",
	EventUnreachable: "UNREACHABLE", EventConnectError: "CONNECT_ERROR", EventDisconnected: "DISCONNECTED",
	EventTimeWaitExit: "TIMEWAIT_EXIT", EventConnectResponse: "CONNECT_RESPONSE",
}

// String returns the rdma_cm name of the event (RDMA_CM_EVENT_ without
// the prefix).
func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one event of a connection.
type Event struct {
	Type EventType
	// Reason is a REJ's reason (EventRejected).
	Reason mad.RejReason
	// SIDRStatus is a SIDR_REP's status when it is not QPValid
	// (EventRejected of a UD endpoint).
	SIDRStatus mad.SIDRStatus
	// PrivateData is what the peer's message carried for the consumer
	// (REP, REJ, DREQ, SIDR_REP: the whole field, as rdma_cm gives it).
	PrivateData []byte
	// QPN and QKey are the remote UD QP a SIDR_REP named.
	QPN, QKey uint32
}

func (e Event) String() string {
	switch e.Type {
	case EventRejected:
		if e.SIDRStatus != 0 {
			return fmt.Sprintf("%v (SIDR status %d)", e.Type, e.SIDRStatus)
		}
		return fmt.Sprintf("%v (reason %d: %v)", e.Type, uint16(e.Reason), e.Reason)
	}
	return e.Type.String()
}
