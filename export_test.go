package rnic

// DebugState returns the transport state of a QP (tests only).
func DebugState(qp *QP) string {
	var s string
	qp.pd.dev.d.Engine(func(e *engine) { s = e.DebugState(qp.q) })
	return s
}

// SetNextPD makes the device's next PD number n+1 (tests of the wrap).
func SetNextPD(d *Device, n uint32) { d.nextPD.Store(n) }
