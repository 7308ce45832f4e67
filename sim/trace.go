package sim

import (
	"fmt"
	"io"
)

// WriterTrace returns a TraceFunc that writes one line per event to w:
//
//	#42 1.5us main.nic kind=deliver arg=3
//
// the event number, its time, the handler's type, the kind (named if the
// handler implements KindNamer) and the argument. Lines contain nothing
// that varies between runs of the same seed, so two traces can be diffed.
// Formatting allocates; tracing is for debugging, not for benchmarks.
func WriterTrace(w io.Writer) TraceFunc {
	return func(n uint64, ev Event) {
		kind := fmt.Sprint(ev.Kind)
		if kn, ok := ev.H.(KindNamer); ok {
			kind = kn.KindName(ev.Kind)
		}
		fmt.Fprintf(w, "#%d %v %T kind=%s arg=%d\n", n, ev.At, ev.H, kind, ev.Arg)
	}
}
