package transport

// EventType is an asynchronous event's kind; values of enum ibv_event_type.
type EventType uint8

const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPKeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
)

var eventNames = map[EventType]string{
	EventCQErr: "CQ error", EventQPFatal: "local catastrophic error",
	EventQPReqErr: "invalid request local work queue error", EventQPAccessErr: "local access violation work queue error",
	EventCommEst: "communication established", EventSQDrained: "send queue drained",
	EventPathMig: "path migrated", EventPathMigErr: "path migration request error",
	EventDeviceFatal: "local catastrophic error", EventPortActive: "port active", EventPortErr: "port error",
	EventSRQErr: "SRQ catastrophic error", EventSRQLimitReached: "SRQ limit reached",
	EventQPLastWQEReached: "last WQE reached", EventGIDChange: "GID table change",
}

// String returns the text of ibv_event_type_str.
func (t EventType) String() string {
	if s, ok := eventNames[t]; ok {
		return s
	}
	return "unknown"
}

// Event is an asynchronous event (struct ibv_async_event).
type Event struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
}
