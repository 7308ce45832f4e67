package mem

import "sync/atomic"

// Stats counts what a port did with frames, so tests can check that every
// frame is accounted for (see the package doc for the balance). Drops are
// counted on the sending port; Rx counts are on the receiving port.
type Stats struct {
	TxFrames, TxBytes uint64 // frames (and their bytes) handed to Send
	RxFrames, RxBytes uint64 // frames (and their bytes) delivered to this port's dispatcher

	Dropped     uint64 // lost by Faults.Loss
	Duplicated  uint64 // extra copies made by Faults.Duplicate
	Reordered   uint64 // held back by Faults.Reorder
	Corrupted   uint64 // had one payload bit flipped by Faults.Corrupt
	ECNMarked   uint64 // marked Congestion Experienced by Faults.MarkCE
	Delayed     uint64 // went through the delay line (delay, jitter or reorder)
	Oversize    uint64 // longer than the port's MTU, dropped
	NoRoute     uint64 // destination unknown, closed, or not parseable; dropped
	Unattached  uint64 // destination port has no dispatcher yet; dropped
	ClosedDrops uint64 // sent on a closed port, left queued at Close, or met a closing destination
	Overflow    uint64 // the receiver had no room and the port's buffer (WithBuffer) was full; dropped
	Waiting     uint64 // frames of this port now waiting for a receiver to make room (a gauge)
}

// counters are the live, atomically updated Stats.
type counters struct {
	txFrames, txBytes atomic.Uint64
	rxFrames, rxBytes atomic.Uint64

	dropped, duplicated, reordered, corrupted, delayed atomic.Uint64
	oversize, noRoute, unattached, closedDrops, marked atomic.Uint64
	overflow                                           atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		TxFrames: c.txFrames.Load(), TxBytes: c.txBytes.Load(),
		RxFrames: c.rxFrames.Load(), RxBytes: c.rxBytes.Load(),
		Dropped: c.dropped.Load(), Duplicated: c.duplicated.Load(),
		Reordered: c.reordered.Load(), Corrupted: c.corrupted.Load(),
		Delayed: c.delayed.Load(), Oversize: c.oversize.Load(),
		NoRoute: c.noRoute.Load(), Unattached: c.unattached.Load(),
		ClosedDrops: c.closedDrops.Load(), Overflow: c.overflow.Load(), ECNMarked: c.marked.Load(),
	}
}

// tally accumulates counts over one batch so that shared atomics are
// touched once per batch, not once per frame.
type tally struct {
	dropped, duplicated, reordered, corrupted, delayed uint64
	oversize, noRoute, marked                          uint64
}

// addTo adds the non-zero counts to c.
func (t *tally) addTo(c *counters) {
	add := func(a *atomic.Uint64, n uint64) {
		if n != 0 {
			a.Add(n)
		}
	}
	add(&c.dropped, t.dropped)
	add(&c.duplicated, t.duplicated)
	add(&c.reordered, t.reordered)
	add(&c.corrupted, t.corrupted)
	add(&c.delayed, t.delayed)
	add(&c.oversize, t.oversize)
	add(&c.noRoute, t.noRoute)
	add(&c.marked, t.marked)
}
