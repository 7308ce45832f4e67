package udp

import "sync/atomic"

// Counters reports the link's work for the NIC's statistics
// (link.Counted): the frames it sent through the kernel and the system
// calls that took, the frames it handed to siblings and took from them,
// the frames it received and dropped.
func (l *Link) Counters(f func(name string, value uint64)) {
	s := l.Stats()
	f("link_tx_frames", s.TxFrames)
	f("link_sent_frames", s.SentFrames)
	f("link_send_syscalls", s.TxBatches)
	f("link_rx_frames", s.RxFrames)
	f("link_recv_syscalls", s.RxBatches)
	f("link_sibling_tx_frames", s.SiblingFrames)
	f("link_sibling_rx_frames", s.SiblingRx)
	f("link_sibling_drops", s.SiblingDrops)
	f("link_kernel_drops", s.KernelDrops)
	f("link_tx_drops", s.Dropped+s.Oversize+s.Mismatch+s.Malformed+s.SendErrors+s.ClosedDrops)
	f("link_rx_drops", s.RxDropped+s.RxOversize+s.RxMalformed+s.Unattached)
}

// Stats counts what a link did with frames. Every frame is counted once on
// each side it passes, so for a link at rest
//
//	TxFrames = SentFrames + SiblingFrames + Dropped + Oversize + Mismatch +
//	           Malformed + SendErrors + ClosedDrops
//	RawRx + SocketRx + (frames siblings sent, less the receiver's
//	SiblingDrops and what its inbox holds) = RxFrames + RxDropped +
//	RxOversize + RxMalformed + Unattached
//
// and, between two links on one host (in two processes) with no
// KernelDrops, the frames one sends to the other (SentFrames) are the
// other's RawRx + SocketRx.
type Stats struct {
	TxFrames, TxBytes     uint64 // frames (and bytes, IP header through ICRC) handed to Send
	SentFrames, SentBytes uint64 // frames the kernel accepted
	RxFrames, RxBytes     uint64 // frames delivered to the dispatcher

	TxBatches   uint64 // sendmmsg calls
	RxBatches   uint64 // recvmmsg calls that returned datagrams
	GSOSegments uint64 // frames sent as segments of a GSO datagram (in SentFrames)
	GROSegments uint64 // frames received as segments of a GRO datagram (in SocketRx)
	RawRx       uint64 // frames received through the raw socket, with their real IP header
	SocketRx    uint64 // frames received through the UDP socket, IP and UDP headers rebuilt

	// Send-side drops.
	Dropped     uint64 // lost by Faults.Loss
	Oversize    uint64 // longer than the MTU
	Mismatch    uint64 // a header field the kernel writes differently (source address or port, IPv4 ID, flags or options, or the family), so the ICRC would not verify
	Malformed   uint64 // not an IP/UDP frame, or lengths that disagree with the frame
	SendErrors  uint64 // refused by the kernel (EMSGSIZE, ENETUNREACH, EPERM, ...)
	ClosedDrops uint64 // sent on a closed link or while it closed

	// Receive-side drops.
	RxDropped   uint64 // lost by Faults.RxLoss
	RxOversize  uint64 // larger than a receive buffer (link.MaxFrame): not a RoCE frame
	RxMalformed uint64 // too short for a RoCE frame, or (raw) not a whole frame for this link
	Unattached  uint64 // arrived with no dispatcher attached
	KernelDrops uint64 // dropped by the kernel before the link read them (socket buffer full), from SO_RXQ_OVFL
	RxErrors    uint64 // receive system calls that failed (other than "try again")

	GSOFallbacks uint64 // times GSO was switched off after the kernel refused a GSO send

	// Siblings (links of this process, reached in memory: sibling.go).
	SiblingFrames, SiblingBytes uint64 // frames (and bytes) handed to a sibling, no system call
	SiblingRx                   uint64 // frames from siblings delivered to the dispatcher (in RxFrames)
	SiblingDrops                uint64 // frames from siblings dropped: the inbox was full
}

// counters are the live Stats, updated atomically once per batch.
type counters struct {
	txFrames, txBytes, sentFrames, sentBytes, rxFrames, rxBytes atomic.Uint64

	txBatches, rxBatches, gsoSegments, groSegments, rawRx, socketRx atomic.Uint64

	dropped, oversize, mismatch, malformed, sendErrors, closedDrops atomic.Uint64

	rxDropped, rxOversize, rxMalformed, unattached, kernelDrops, rxErrors atomic.Uint64

	gsoFallbacks atomic.Uint64

	siblingTx, siblingTxBytes, siblingRx, siblingDrops atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		TxFrames: c.txFrames.Load(), TxBytes: c.txBytes.Load(),
		SentFrames: c.sentFrames.Load(), SentBytes: c.sentBytes.Load(),
		RxFrames: c.rxFrames.Load(), RxBytes: c.rxBytes.Load(),
		TxBatches: c.txBatches.Load(), RxBatches: c.rxBatches.Load(),
		GSOSegments: c.gsoSegments.Load(), GROSegments: c.groSegments.Load(),
		RawRx: c.rawRx.Load(), SocketRx: c.socketRx.Load(),
		Dropped: c.dropped.Load(), Oversize: c.oversize.Load(), Mismatch: c.mismatch.Load(),
		Malformed: c.malformed.Load(), SendErrors: c.sendErrors.Load(), ClosedDrops: c.closedDrops.Load(),
		RxDropped: c.rxDropped.Load(), RxOversize: c.rxOversize.Load(), RxMalformed: c.rxMalformed.Load(),
		Unattached: c.unattached.Load(), KernelDrops: c.kernelDrops.Load(), RxErrors: c.rxErrors.Load(),
		GSOFallbacks:  c.gsoFallbacks.Load(),
		SiblingFrames: c.siblingTx.Load(), SiblingBytes: c.siblingTxBytes.Load(),
		SiblingRx: c.siblingRx.Load(), SiblingDrops: c.siblingDrops.Load(),
	}
}

// add adds n to a if n is not zero, so that a batch touches only the
// shared counters it changes.
func add(a *atomic.Uint64, n uint64) {
	if n != 0 {
		a.Add(n)
	}
}

// txTally accumulates one Send call's counts.
type txTally struct {
	sent, sentBytes, batches, gso                     uint64
	dropped, oversize, mismatch, malformed, errs, cls uint64
	sibling, siblingBytes                             uint64
}

func (t *txTally) addTo(c *counters) {
	add(&c.sentFrames, t.sent)
	add(&c.sentBytes, t.sentBytes)
	add(&c.txBatches, t.batches)
	add(&c.gsoSegments, t.gso)
	add(&c.dropped, t.dropped)
	add(&c.oversize, t.oversize)
	add(&c.mismatch, t.mismatch)
	add(&c.malformed, t.malformed)
	add(&c.sendErrors, t.errs)
	add(&c.closedDrops, t.cls)
	add(&c.siblingTx, t.sibling)
	add(&c.siblingTxBytes, t.siblingBytes)
}

// rxTally accumulates one receive batch's counts.
type rxTally struct {
	frames, bytes, raw, socket, gro                       uint64
	dropped, oversize, malformed, unattached, errs, batch uint64
}

func (t *rxTally) addTo(c *counters) {
	add(&c.rxFrames, t.frames)
	add(&c.rxBytes, t.bytes)
	add(&c.rawRx, t.raw)
	add(&c.socketRx, t.socket)
	add(&c.groSegments, t.gro)
	add(&c.rxDropped, t.dropped)
	add(&c.rxOversize, t.oversize)
	add(&c.rxMalformed, t.malformed)
	add(&c.unattached, t.unattached)
	add(&c.rxErrors, t.errs)
	add(&c.rxBatches, t.batch)
}
