package sim

// Handler reacts to events. A component (a NIC, a fabric, a workload)
// implements Handle once and tells its events apart by Event.Kind, so an
// event carries no closure and scheduling does not allocate.
type Handler interface {
	Handle(s *Sim, ev Event)
}

// HandlerFunc adapts a function to Handler. Convert it once and keep the
// Handler: a func value converted to an interface is pointer-shaped and
// does not allocate, but building a new closure for each event would.
type HandlerFunc func(s *Sim, ev Event)

// Handle calls f(s, ev).
func (f HandlerFunc) Handle(s *Sim, ev Event) { f(s, ev) }

// KindNamer is implemented by handlers that name their event kinds, so
// that trace lines say "deliver" rather than "kind=2".
type KindNamer interface {
	KindName(kind int32) string
}

// Event is one thing that happens at one instant. It is stored by value;
// Kind, Arg and Ptr are the handler's to interpret.
type Event struct {
	// At is when the event happens (absolute virtual time).
	At Time
	// Kind tells the handler what happened.
	Kind int32
	// Arg is a small payload: an index, a QPN, a byte count.
	Arg uint64
	// Ptr is an optional reference. Store pointers only: a pointer in an
	// interface does not allocate, an integer or struct may.
	Ptr any
	// H receives the event.
	H Handler
}
