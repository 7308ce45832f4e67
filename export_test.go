package rnic

import (
	"fmt"

	"github.com/rnic/rnic/internal/hw/atu"
)

// DebugState returns the transport state of a QP (tests only).
func DebugState(qp *QP) string {
	var s string
	qp.pd.dev.d.Engine(func(e *engine) { s = e.DebugState(qp.q) })
	return s
}

// SetNextPD makes the device's next PD number n+1 (tests of the wrap).
func SetNextPD(d *Device, n uint32) { d.nextPD.Store(n) }

// ReadThroughMR reads n bytes at iova through the region key as the NIC
// does for a local access of PD pd: the ATU's translation, then the bus
// (tests of the host interface: the region is another process's memory).
func ReadThroughMR(d *Device, pd, key uint32, iova uint64, n int) ([]byte, error) {
	segs, f := d.atu.Translate(&atu.Request{Key: key, PD: pd, VA: iova, Len: uint64(n)}, nil)
	if f != atu.OK {
		return nil, fmt.Errorf("translation fault %v", f)
	}
	out := make([]byte, n)
	if _, err := d.atu.Host().Gather(out, segs); err != nil {
		return nil, err
	}
	return out, nil
}

// CQUnpolled returns the number of completions cq holds.
func CQUnpolled(cq *CQ) int { return cq.c.Unpolled() }
