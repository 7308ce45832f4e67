package rnic

import (
	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/transport"
)

// hostVerbs is the instance of device.HostVerbs with this package's
// types: what the host server (internal/device/host) asserts
// device.Host to.
type hostVerbs = device.HostVerbs[*Device, *PD, *MR, *CQ, *QP, *SRQ, *AH, QPInitAttr, SRQInitAttr, Access]

func init() {
	device.Host = &hostVerbs{
		Usable:   func(d *Device) error { return d.usable() },
		CreateCQ: func(d *Device, cqe int, m *transport.CQMem) (*CQ, error) { return d.createCQ(cqe, m) },
		CreateQP: func(pd *PD, a QPInitAttr, send, recv *transport.RingMem) (*QP, error) {
			return pd.createQP(a, send, recv)
		},
		CreateSRQ: func(pd *PD, a SRQInitAttr, m *transport.RingMem) (*SRQ, error) { return pd.createSRQ(a, m) },
		RegProcess: func(pd *PD, proc *bus.Process, addr, length, iova uint64, access Access, implicit bool) (*MR, error) {
			return pd.regProcess(proc, addr, length, iova, access, implicit)
		},
		ReregProcess: func(mr *MR, pd *PD, proc *bus.Process, addr, length, iova uint64, access Access) error {
			return mr.reregProcess(pd, proc, addr, length, iova, access)
		},
		QPCore: func(qp *QP) *transport.QP { return qp.q },
		CQCore: func(cq *CQ) *transport.CQ { return cq.c },
		AHNum:  func(ah *AH) uint32 { return ah.ah.Num },
	}
}
