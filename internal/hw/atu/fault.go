package atu

// Fault is why a translation was refused. The protocol engine turns a fault
// into a completion status (lkey: local protection error) or a NAK (rkey:
// remote access error), and counts it.
type Fault uint8

const (
	OK          Fault = iota
	FaultKey          // no valid region or window has this key (index, variant or state)
	FaultPD           // the region belongs to another protection domain
	FaultBounds       // the range is not inside the region
	FaultAccess       // the region does not grant the requested rights
	FaultAlign        // an atomic's address is not 8-byte aligned
	FaultQP           // a type 2 window is bound to another QP
	FaultKind         // the key names a window where only a region is allowed (lkeys)
	FaultHost         // the host memory behind a valid translation could not be reached (the DMA bus failed)

	numFaults = iota
)

var faultNames = [...]string{
	OK:          "ok",
	FaultKey:    "invalid key",
	FaultPD:     "protection domain mismatch",
	FaultBounds: "out of bounds",
	FaultAccess: "access rights violation",
	FaultAlign:  "misaligned atomic",
	FaultQP:     "window bound to another QP",
	FaultKind:   "window key used as local key",
	FaultHost:   "host memory unreachable",
}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault?"
}
