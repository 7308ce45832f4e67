package transport

import "github.com/rnic/rnic/internal/hw/atu"

// Bill is the host-side work the engine did since the last TakeBill:
// the PCIe transactions and SRAM cache fills a hardware RNIC would spend
// time on. The simulator (package sim) turns it into time, step by step,
// as the engine runs under it, and sets Config.Billing. The real-time
// driver never takes a bill; its engine then keeps the counts (fixed-size,
// they cannot grow) but no list of the CQs written to, which would grow
// with every CQ the device ever had.
type Bill struct {
	WQEFetches     int // send WQEs read from a send queue
	WQEBytes       int
	RecvWQEFetches int // receive WQEs read from a receive queue or SRQ
	RecvWQEBytes   int
	CQEWrites      int

	QPCMisses, CQCMisses, MPTMisses, MTTMisses int
	// Lookups of each cache, hits and misses (for hit rates by QP).
	QPCLookups, MPTLookups, MTTLookups int
	// MPTIndex and MTTIndex name the entries of the step's last
	// translation (its region's MPT entry, its first MTT entry): a timing
	// model makes a step that finds them in the cache while another
	// step's read of them is still on its way wait for that read.
	MPTIndex, MTTIndex uint32
	Translations       int

	DMAReads, DMAReadBytes   int // gather descriptors: host memory → NIC
	DMAWrites, DMAWriteBytes int // scatter descriptors: NIC → host memory
	RxWriteBytes             int // of which RDMA WRITE payload placed by the responder
	Atomics                  int
	// AtomicMR and AtomicAddr name the host memory of the step's (last)
	// atomic: its region's MPT index and its bus address there. The
	// timing model's atomic unit locks by them. AtomicPSN is its request's
	// PSN: the responses from it on wait for its value.
	AtomicMR    uint32
	AtomicAddr  uint64
	AtomicPSN   uint32
	InlineBytes int // payload copied from WQEs (it came with the WQE, not by DMA)

	TxPackets, TxBytes int
	RxPackets, RxBytes int

	// QP is the number of the (last) local QP the work was for.
	QP uint32
	// CQs says which CQs the CQEWrites went to, each once. It is only
	// kept with Config.Billing, and is valid until the next TakeBill (it
	// shares the engine's scratch array, so that taking a bill does not
	// allocate). A step usually writes to a QP's send and receive CQs, but
	// one Run may flush several QPs in error, each with CQs of its own.
	CQs []CQECount
}

// CQECount is a number of completions written to one CQ.
type CQECount struct {
	CQ *CQ
	N  int
}

// addCQE counts a completion written to cq. The list is searched from
// its end: a step's CQEs mostly go to the CQ of the one before.
func (b *Bill) addCQE(cq *CQ) {
	for i := len(b.CQs) - 1; i >= 0; i-- {
		if b.CQs[i].CQ == cq {
			b.CQs[i].N++
			return
		}
	}
	b.CQs = append(b.CQs, CQECount{CQ: cq, N: 1})
}

// TakeBill returns the work done since the last call and starts a new
// bill. The returned CQs slice is valid until the next call.
func (e *Engine) TakeBill() Bill {
	b := e.bill
	e.ResetBill()
	return b
}

// Bill returns the bill of the work done since the last TakeBill or
// ResetBill, in place: a timing model that charges every step reads it
// there and then calls ResetBill, rather than copying it out. It is
// valid until the engine runs again.
func (e *Engine) Bill() *Bill { return &e.bill }

// ResetBill starts a new bill.
func (e *Engine) ResetBill() {
	// Entries past this bill's are older bills': drop their CQ pointers
	// (a destroyed CQ must not stay reachable from the scratch array).
	// Only those up to the longest bill since the last reset can be set:
	// a step writes one or two, and the whole array costs a clear of its
	// capacity per step.
	n := len(e.bill.CQs)
	if e.billCQs > n {
		clear(e.bill.CQs[n:e.billCQs])
	}
	e.billCQs = n
	e.bill = Bill{CQs: e.bill.CQs[:0]}
}

// Sizes of the host-memory structures the NIC reads and writes, as an
// mlx5-class RNIC lays them out: a send WQE is a control segment, an
// address segment for RDMA and atomics, an atomic segment, a datagram
// segment for UD, then 16-byte data segments or the inline data, in
// 64-byte basic blocks; a receive WQE is its data segments; a CQE is 64
// bytes.
const (
	wqeBasicBlock = 64
	cqeBytes      = 64
)

func sendWQEBytes(qpType QPType, w *sendWQE) int {
	n := 16 // control segment
	info := &wrInfos[w.op]
	if info.needsRKey {
		n += 16
	}
	if info.atomic {
		n += 16
	}
	if qpType == UD {
		n += 48
	}
	if w.inline {
		n += (4 + int(w.length) + 15) &^ 15
	} else {
		n += 16 * int(w.nsge)
	}
	return (n + wqeBasicBlock - 1) &^ (wqeBasicBlock - 1)
}

func recvWQEBytes(nsge int) int { return 16 * max(nsge, 1) }

// translate is ATU.Translate, billed.
func (e *Engine) translate(r *atu.Request, dst []atu.Seg) ([]atu.Seg, atu.Fault) {
	dst, f := e.cfg.ATU.Translate(r, dst)
	e.bill.Translations++
	e.bill.MPTMisses += int(r.MPTMisses)
	e.bill.MTTMisses += int(r.MTTMisses)
	e.bill.MPTLookups += int(r.MPTLookups)
	e.bill.MTTLookups += int(r.MTTLookups)
	e.bill.MPTIndex = r.Key >> 8
	if r.MTTLookups > 0 {
		e.bill.MTTIndex = r.MTTFirst
	}
	return dst, f
}

// dmaGather is DMA.Gather, billed as a read of host memory. A bus error
// (host memory unreachable behind a valid translation) is counted and
// reported as atu.FaultHost, which the caller turns into the same status
// as a protection fault of that access.
func (e *Engine) dmaGather(qp *QP, dst []byte, segs []atu.Seg) atu.Fault {
	n := len(dst)
	if !e.cfg.Metadata {
		var err error
		if n, err = e.cfg.DMA.Gather(qp.index, dst, segs); err != nil {
			return e.hostFault(qp, err)
		}
	}
	e.bill.DMAReads++
	e.bill.DMAReadBytes += n
	return atu.OK
}

// dmaGatherV is dmaGather into the payloads of a burst of packets
// (total bytes) with one access, billed as a read per packet. A fault is
// not counted: the caller goes packet by packet then, and the packet that
// faults counts it, once, as without bursts.
func (e *Engine) dmaGatherV(qp *QP, dsts [][]byte, total int, segs []atu.Seg) atu.Fault {
	if !e.cfg.Metadata {
		if n, err := e.cfg.DMA.GatherV(qp.index, dsts, segs); err != nil || n < total {
			return atu.FaultHost
		}
	}
	e.bill.DMAReads += len(dsts)
	e.bill.DMAReadBytes += total
	return atu.OK
}

// hostFault counts a failed DMA access and says what the caller reports.
func (e *Engine) hostFault(qp *QP, err error) atu.Fault {
	e.count(qp, HostMemErrors)
	if e.cfg.Trace != nil {
		e.tracef("qp %#x: DMA: %v", qp.QPN, err)
	}
	return atu.FaultHost
}

// copyInline copies inline data from a WQE into a packet: the bytes came
// with the WQE (its fetch, or the doorbell write), so no host read.
func (e *Engine) copyInline(qp *QP, dst []byte, src []byte) {
	e.cfg.DMA.Copy(qp.index, dst, src)
	e.bill.InlineBytes += len(dst)
}

// dmaScatter is DMA.Scatter, billed as a write of host memory; errors as
// dmaGather.
func (e *Engine) dmaScatter(qp *QP, segs []atu.Seg, src []byte) atu.Fault {
	n := len(src)
	if !e.cfg.Metadata {
		var err error
		if n, err = e.cfg.DMA.Scatter(qp.index, segs, src); err != nil {
			return e.hostFault(qp, err)
		}
	}
	e.bill.DMAWrites++
	e.bill.DMAWriteBytes += n
	return atu.OK
}
