package device

import (
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/transport"
)

// HostVerbs are the verbs layer's calls that the host server
// (internal/device/host) makes beyond package rnic's public API: objects
// whose queues are a program's rings in shared memory, regions of
// another process's memory, and the NIC's own objects behind the verbs
// ones. The type parameters are package rnic's types (*Device, *PD, *MR,
// *CQ, *QP, *SRQ, *AH, QPInitAttr, SRQInitAttr, Access), which this
// package cannot name: package rnic sets Host to its instance when it
// loads, and the host server asserts it once, to that instance, and is
// typed from then on.
type HostVerbs[Dev, PD, MR, CQ, QP, SRQ, AH, QPInit, SRQInit, Access any] struct {
	// Usable returns nil while the device is open.
	Usable func(d Dev) error
	// CreateCQ creates a CQ whose ring is the program's memory m.
	CreateCQ func(d Dev, cqe int, m *transport.CQMem) (CQ, error)
	// CreateQP creates a QP whose send and receive queues are the
	// program's rings (recv nil: the QP is on an SRQ).
	CreateQP func(pd PD, a QPInit, send, recv *transport.RingMem) (QP, error)
	// CreateSRQ creates an SRQ whose ring is the program's.
	CreateSRQ func(pd PD, a SRQInit, m *transport.RingMem) (SRQ, error)
	// RegProcess registers a range of another process's memory.
	RegProcess func(pd PD, proc *bus.Process, addr, length, iova uint64, access Access, implicit bool) (MR, error)
	// ReregProcess changes such a region in place (ibv_rereg_mr).
	ReregProcess func(mr MR, pd PD, proc *bus.Process, addr, length, iova uint64, access Access) error
	// QPCore, CQCore and AHNum give the NIC's objects behind the verbs
	// ones: the engine's QP and CQ, the AH's number in the NIC's table.
	QPCore func(qp QP) *transport.QP
	CQCore func(cq CQ) *transport.CQ
	AHNum  func(ah AH) uint32
}

// Host is package rnic's *HostVerbs instance (nil until it loads).
var Host any
