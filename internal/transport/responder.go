package transport

import (
	"encoding/binary"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/dma"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// respState is the responder's part of the QPC.
type respState struct {
	// The message in progress (multi-packet SEND or WRITE).
	recv    recvSlot
	recvOff uint64
	wva     uint64

	// READ and atomic resources (max_dest_rd_atomic of them), kept after
	// they are answered so that a duplicate request is answered again
	// (READ) or replayed from the saved result (atomic), never executed
	// twice. Allocated at the first READ or atomic request (a QP that
	// only sends and writes holds none).
	res    []respRes
	queue  resQueue // resources with responses to send, oldest first
	resCap uint8    // len(res) once allocated; 0 if max_dest_rd_atomic was never set

	epsn    wire.PSN // expected PSN
	msn     uint32   // message sequence number (24 bits)
	wrkey   uint32
	wlen    uint32
	woff    uint32
	resNext uint32
	ackPSN  wire.PSN // the cumulative ACK (or NAK) to send once queued responses are out

	nakSent  bool // a sequence NAK for epsn is outstanding (sent once)
	commEst  bool // COMM_EST reported
	msg      msgKind
	haveRecv bool
	ucDrop   bool // UC: drop until the next FIRST or ONLY

	ack       bool // ackPSN and ackSyn are to be sent
	ackSyn    wire.Syndrome
	onAckList bool
	lastWQE   bool // LAST_WQE_REACHED reported (SRQ QPs)

	// errPending says the NAK in ack is fatal and waits behind queued
	// READ/atomic responses: a request past ones the responder accepted
	// but has not answered yet was in error. Responses go in PSN order,
	// so those are answered first; then the NAK goes out and the QP
	// enters ERR, reporting errEvent. Requests that arrive meanwhile are
	// dropped.
	errPending bool
	errEvent   EventType
}

type msgKind uint8

const (
	msgNone msgKind = iota
	msgSend
	msgWrite
)

type respRes struct {
	atomic    bool
	nonPosted bool  // FLUSH or ATOMIC WRITE: a zero-length READ response, never executed again
	qslot     uint8 // not this resource's: slot k of the response queue (see resQueue)
	first     wire.PSN
	last      wire.PSN
	cur       wire.PSN // next response to send
	start     wire.PSN // where the current response stream began (FIRST/ONLY)
	va        uint64
	rkey      uint32
	length    uint32
	orig      uint64
	valid     bool
	replay    bool // queued again for a duplicate request
}

// set gives the resource new state; qslot belongs to the queue and stays.
func (r *respRes) set(v respRes) {
	v.qslot = r.qslot
	*r = v
}

func (r *respState) queueLen() int { return int(r.queue.n) }

// resQueue is a FIFO of resource indices, a ring of len(res) slots. Slot
// k is res[k].qslot, whichever resource res[k] is, so that the queue costs
// the QPC two bytes rather than a slice of its own.
type resQueue struct {
	head, n uint8
}

func (q *resQueue) slot(res []respRes, k int) *uint8 {
	return &res[(int(q.head)+k)%len(res)].qslot
}

func (q *resQueue) push(res []respRes, i uint8) {
	*q.slot(res, int(q.n)) = i
	q.n++
}
func (q *resQueue) front(res []respRes) uint8 { return *q.slot(res, 0) }
func (q *resQueue) pop(res []respRes) {
	q.head = uint8((int(q.head) + 1) % len(res))
	q.n--
}
func (q *resQueue) reset()                   { q.head, q.n = 0, 0 }
func (q *resQueue) back(res []respRes) uint8 { return *q.slot(res, int(q.n)-1) }
func (q *resQueue) popBack()                 { q.n-- }
func (q *resQueue) remove(res []respRes, i uint8) {
	k := 0
	for j := 0; j < int(q.n); j++ {
		if v := *q.slot(res, j); v != i {
			*q.slot(res, k) = v
			k++
		}
	}
	q.n = uint8(k)
}

func (q *resQueue) contains(res []respRes, i uint8) bool {
	for k := 0; k < int(q.n); k++ {
		if *q.slot(res, k) == i {
			return true
		}
	}
	return false
}

// responderRecv handles a request packet on an RC or UC QP
// (IBTA 9.7.4: check PSN, opcode sequence, resources, length, R_Key;
// execute; complete; acknowledge).
func (rsp *responder) responderRecv(qp *QP, p *wire.Packet) {
	e := rsp.e
	if qp.Type == UD {
		rsp.udRecv(qp, p)
		return
	}
	resp := &qp.resp
	if resp.errPending {
		e.count(qp, RxBadState) // the QP is on its way to ERR
		return
	}
	psn := p.BTH.PSN()
	info := p.Info
	if !resp.commEst && qp.attr.State == QPSRTR {
		resp.commEst = true
		e.cfg.Event(Event{Type: EventCommEst, QP: qp})
	}
	d := psn.Diff(resp.epsn)
	if qp.Type == UC {
		if d < 0 {
			e.count(qp, DuplicateRequest)
			return
		}
		if d > 0 {
			// Packets were lost: the message in progress is dropped and
			// reception resumes at the next FIRST or ONLY.
			e.count(qp, OutOfSequence)
			resp.epsn = psn
			rsp.abortMsg(qp)
			resp.ucDrop = true
		}
		if resp.ucDrop {
			if !info.Flags.Has(wire.FlagFirst) {
				e.count(qp, RxUCDropped)
				resp.epsn = psn.Next()
				return
			}
			resp.ucDrop = false
		}
	} else {
		if d > 0 {
			e.count(qp, OutOfSequence)
			if !resp.nakSent {
				resp.nakSent = true
				e.count(qp, SeqNAKSent)
				rsp.queueAck(qp, resp.epsn, wire.SyndromeNAK(wire.NAKPSNSeqErr))
			}
			return
		}
		if d < 0 {
			e.count(qp, DuplicateRequest)
			rsp.duplicate(qp, p, psn)
			return
		}
	}

	// Opcode sequence: a MIDDLE or LAST continues the message in
	// progress; anything else starts a new one.
	first := info.Flags.Has(wire.FlagFirst)
	switch {
	case resp.msg == msgSend && (first || !info.Flags.Has(wire.FlagSend)),
		resp.msg == msgWrite && (first || !info.Flags.Has(wire.FlagWrite)),
		resp.msg == msgNone && !first:
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	switch {
	case info.Flags.Has(wire.FlagWrite) && !qp.attr.AccessFlags.Has(atu.RemoteWrite),
		info.Flags.Has(wire.FlagReadReq) && !qp.attr.AccessFlags.Has(atu.RemoteRead),
		info.Flags.Has(wire.FlagAtomic) && !qp.attr.AccessFlags.Has(atu.RemoteAtomic),
		info.Flags.Has(wire.FlagAtomicWrite) && !qp.attr.AccessFlags.Has(atu.RemoteWrite), // rxe: remote write, not atomic
		info.Flags.Has(wire.FlagFlush) && !qp.attr.AccessFlags.Has(flushAccess(p.FETH.Placement())):
		e.count(qp, RespRemoteAccessErrors)
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	// Payload length against the path MTU: FIRST and MIDDLE carry exactly
	// one MTU, LAST 1..MTU, ONLY 0..MTU.
	n := uint32(len(p.Payload))
	last := info.Flags.Has(wire.FlagLast)
	if n > qp.mtu || (!last && n != qp.mtu) || (last && !first && n == 0) {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}

	switch {
	case info.Flags.Has(wire.FlagSend):
		if !rsp.recvSend(qp, p, psn, first, last) {
			return
		}
	case info.Flags.Has(wire.FlagWrite):
		if !rsp.recvWrite(qp, p, psn, first, last) {
			return
		}
	case info.Flags.Has(wire.FlagReadReq):
		rsp.recvRead(qp, p, psn)
		return
	case info.Flags.Has(wire.FlagAtomic):
		rsp.recvAtomic(qp, p, psn)
		return
	case info.Flags.Has(wire.FlagAtomicWrite):
		rsp.recvAtomicWrite(qp, p, psn)
		return
	case info.Flags.Has(wire.FlagFlush):
		rsp.recvFlush(qp, p, psn)
		return
	}
	resp.epsn = psn.Next()
	resp.nakSent = false
	if qp.Type == RC && p.BTH.AckReq() {
		rsp.queueAck(qp, psn, wire.SyndromeACK(wire.CreditsInvalid))
	}
}

// takeRecvWQE gets a receive WQE from the QP's RQ or SRQ.
func (rsp *responder) takeRecvWQE(qp *QP) bool {
	e := rsp.e
	resp := &qp.resp
	if resp.haveRecv {
		return true
	}
	// The NIC reads the receive queue when a message needs a WQE, as a
	// hardware NIC fetches one from host memory: a receive posted just
	// before the message is found.
	var r takeResult
	if qp.srq != nil {
		var limit bool
		r, limit = qp.srq.take(&resp.recv)
		if limit {
			e.cfg.Event(Event{Type: EventSRQLimitReached, SRQ: qp.srq})
		}
		if r == takeMalformed || r == takeBadIndex {
			e.cfg.Event(Event{Type: EventSRQErr, SRQ: qp.srq})
		}
	} else {
		r = qp.rq.takeRecv(&resp.recv, false)
	}
	switch r {
	case takeEmpty:
		return false
	case takeMalformed:
		// Garbage where a WQE should be: the WQE completes with a
		// local QP operation error and the QP goes to the error state;
		// the NIC serves every other QP on.
		resp.haveRecv = true
		rsp.recvError(qp, WCLocQPOpErr)
		e.toError(qp)
		return false
	case takeBadIndex:
		// A producer index the ring never had: no WQE to complete;
		// the QP goes to the error state, the asynchronous error says
		// why.
		e.toError(qp)
		e.cfg.Event(Event{Type: EventQPFatal, QP: qp})
		return false
	}
	resp.haveRecv = true
	resp.recvOff = 0
	e.bill.RecvWQEFetches++
	e.bill.RecvWQEBytes += recvWQEBytes(len(resp.recv.sge))
	return true
}

// noRecvWQE answers a request that needs a receive WQE when there is none:
// RNR NAK on RC (the requester waits and retries), drop on UC.
func (rsp *responder) noRecvWQE(qp *QP, psn wire.PSN) {
	e := rsp.e
	if qp.attr.State == QPSErr {
		return // the receive queue was garbage (takeRecvWQE): the QP is in error, nothing to answer
	}
	if qp.Type == RC {
		e.count(qp, RNRNAKSent)
		rsp.queueAck(qp, psn, wire.SyndromeRNR(qp.attr.MinRNRTimer))
		// Packets after it are dropped silently until the requester,
		// after its RNR wait, sends psn again (no sequence NAK on top).
		qp.resp.nakSent = true
		return
	}
	e.count(qp, OutOfBuffer)
	rsp.abortMsg(qp)
	qp.resp.ucDrop = true
	qp.resp.epsn = psn.Next()
}

func (rsp *responder) recvSend(qp *QP, p *wire.Packet, psn wire.PSN, first, last bool) bool {
	e := rsp.e
	resp := &qp.resp
	if first {
		e.count(qp, RxSendRequests)
		if !rsp.takeRecvWQE(qp) {
			rsp.noRecvWQE(qp, psn)
			return false
		}
		resp.msg = msgSend
	}
	n := uint64(len(p.Payload))
	if resp.recvOff+n > resp.recv.length {
		e.count(qp, RespLocalLengthError)
		rsp.recvError(qp, WCLocLenErr)
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return false
	}
	if n > 0 {
		f, ok := e.scatterReceived(placedWrite{qp: qp, psn: psn, send: true}, nil, false, rsp.recvPD(qp), resp.recv.sge, resp.recvOff, p.Payload, !last)
		if !ok {
			return false // a payload of this SEND before this packet faulted
		}
		if f != atu.OK {
			rsp.recvError(qp, WCLocProtErr)
			rsp.requestError(qp, psn, wire.NAKRemoteOpErr)
			return false
		}
	}
	resp.recvOff += n
	if !last {
		return true
	}
	wc := WC{WRID: resp.recv.wrid, Status: WCSuccess, Opcode: WCRecv, ByteLen: uint32(resp.recvOff), QPNum: qp.QPN, SrcQP: qp.attr.DestQPN}
	if p.ImmDt != nil {
		wc.Flags |= WCWithImm
		wc.ImmData = p.ImmDt.Imm()
	}
	if p.IETH != nil {
		rkey := p.IETH.RKey()
		if f := e.cfg.ATU.Invalidate(rkey, qp.PD, qp.QPN, true); f != atu.OK {
			rsp.recvError(qp, WCRemInvReqErr)
			rsp.requestError(qp, psn, wire.NAKInvalidRequest)
			return false
		}
		wc.Flags |= WCWithInv
		wc.InvalidatedRKey = rkey
	}
	resp.haveRecv = false
	resp.msg = msgNone
	resp.msn = (resp.msn + 1) & wire.PSNMask
	e.cqe(qp, qp.recvCQN(), &wc, p.BTH.SE())
	return true
}

func (rsp *responder) recvWrite(qp *QP, p *wire.Packet, psn wire.PSN, first, last bool) bool {
	e := rsp.e
	resp := &qp.resp
	n := uint32(len(p.Payload))
	if first {
		e.count(qp, RxWriteRequests)
		resp.wva, resp.wrkey, resp.wlen, resp.woff = p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen(), 0
		if resp.wlen > MaxMsgSize {
			rsp.requestError(qp, psn, wire.NAKInvalidRequest)
			return false
		}
		if !last && resp.wlen > 0 {
			// Check the whole RETH range before placing the first byte,
			// so a WRITE that would overrun its region changes nothing
			// (a single-packet WRITE is checked whole just below).
			segs, f := e.translate(&atu.Request{Key: resp.wrkey, PD: qp.PD, QPN: qp.QPN,
				VA: resp.wva, Len: uint64(resp.wlen), Access: atu.RemoteWrite, Remote: true, CheckOnly: true}, e.segs[:0])
			e.releaseSegs(segs)
			if f != atu.OK {
				e.count(qp, RespRemoteAccessErrors)
				rsp.accessError(qp, psn)
				return false
			}
		}
		resp.msg = msgWrite
	}
	if resp.woff+n > resp.wlen || (last && resp.woff+n != resp.wlen) {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return false
	}
	imm := p.ImmDt != nil
	if imm && !rsp.takeRecvWQE(qp) {
		if first {
			// The requester sends this ONLY packet again after the RNR
			// wait: it must find no message in progress.
			resp.msg = msgNone
		}
		rsp.noRecvWQE(qp, psn)
		return false
	}
	if n > 0 {
		segs, f := e.windowSegs(&e.xw[xwWriteTarget], qp, n == resp.wlen, &atu.Request{Key: resp.wrkey, PD: qp.PD, QPN: qp.QPN,
			VA: resp.wva, Len: uint64(resp.wlen), Access: atu.RemoteWrite, Remote: true}, uint64(resp.woff), uint64(n))
		if f != atu.OK {
			e.segs = segs[:0]
			e.count(qp, RespRemoteAccessErrors)
			rsp.accessError(qp, psn)
			return false
		}
		f, ok := e.placeReceived(placedWrite{qp: qp, psn: psn}, segs, p.Payload, !last)
		e.releaseSegs(segs)
		if !ok {
			return false // a payload of this WRITE before this packet faulted
		}
		if f != atu.OK {
			// Host memory behind the region could not be written: as
			// rxe, a remote access error (the bytes placed before the
			// failing page stay, as they would on hardware).
			e.count(qp, RespRemoteAccessErrors)
			rsp.accessError(qp, psn)
			return false
		}
		e.bill.RxWriteBytes += int(n)
	}
	resp.woff += n
	if !last {
		return true
	}
	e.xw[xwWriteTarget].drop(qp)
	resp.msg = msgNone
	resp.msn = (resp.msn + 1) & wire.PSNMask
	if imm {
		wc := WC{WRID: resp.recv.wrid, Status: WCSuccess, Opcode: WCRecvRDMAWithImm, Flags: WCWithImm,
			ImmData: p.ImmDt.Imm(), ByteLen: resp.wlen, QPNum: qp.QPN, SrcQP: qp.attr.DestQPN}
		resp.haveRecv = false
		e.cqe(qp, qp.recvCQN(), &wc, p.BTH.SE())
	}
	return true
}

// allocRes takes the next READ/atomic resource; false if all are still
// answering (the requester exceeded max_dest_rd_atomic).
func (rsp *responder) allocRes(qp *QP) (*respRes, uint8, bool) {
	resp := &qp.resp
	if resp.res == nil {
		if resp.resCap == 0 {
			return nil, 0, false // max_dest_rd_atomic never set
		}
		resp.res = make([]respRes, resp.resCap)
	}
	i := uint8(resp.resNext % uint32(len(resp.res)))
	if resp.queue.contains(resp.res, i) {
		if !resp.res[i].replay {
			return nil, 0, false // never answered: the requester exceeded the limit
		}
		// Answering an old duplicate again (one the link delayed or
		// duplicated) is worth less than the new request.
		resp.queue.remove(resp.res, i)
	}
	resp.resNext++
	return &resp.res[i], i, true
}

func (rsp *responder) recvRead(qp *QP, p *wire.Packet, psn wire.PSN) {
	e := rsp.e
	resp := &qp.resp
	e.count(qp, RxReadRequests)
	va, rkey, length := p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen()
	if length > MaxMsgSize {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	if length > 0 {
		// Check the whole range now so that an access error is a NAK
		// before any response (the MR is checked again per packet).
		segs, f := e.translate(&atu.Request{Key: rkey, PD: qp.PD, QPN: qp.QPN, VA: va, Len: uint64(length),
			Access: atu.RemoteRead, Remote: true, CheckOnly: true}, e.segs[:0])
		e.releaseSegs(segs)
		if f != atu.OK {
			e.count(qp, RespRemoteAccessErrors)
			rsp.accessError(qp, psn)
			return
		}
	}
	r, i, ok := rsp.allocRes(qp)
	if !ok {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	np := packets(length, qp.mtu)
	r.set(respRes{first: psn, last: psn.Add(np - 1), cur: psn, start: psn, va: va, rkey: rkey, length: length, valid: true})
	resp.queue.push(resp.res, i)
	resp.epsn = r.last.Next()
	resp.nakSent = false
	resp.msn = (resp.msn + 1) & wire.PSNMask
	e.arb.Ring(qp.index)
}

func (rsp *responder) recvAtomic(qp *QP, p *wire.Packet, psn wire.PSN) {
	e := rsp.e
	resp := &qp.resp
	e.count(qp, RxAtomicRequests)
	a := p.AtomicETH
	va := a.VA()
	if va&7 != 0 {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	segs, f := e.translate(&atu.Request{Key: a.RKey(), PD: qp.PD, QPN: qp.QPN, VA: va, Len: 8,
		Access: atu.RemoteAtomic, Remote: true}, e.segs[:0])
	if f != atu.OK {
		e.releaseSegs(segs)
		e.count(qp, RespRemoteAccessErrors)
		if f == atu.FaultAlign {
			rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		} else {
			rsp.accessError(qp, psn)
		}
		return
	}
	r, i, ok := rsp.allocRes(qp)
	if !ok {
		e.releaseSegs(segs)
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	op := dma.FetchAdd
	if p.Op == wire.OpRCCompareSwap {
		op = dma.CompareSwap
	}
	orig, err := e.cfg.DMA.Atomic(qp.index, segs[0], op, chooseAtomicArg(op, a), a.SwapAdd())
	e.bill.AtomicMR, e.bill.AtomicAddr, e.bill.AtomicPSN = a.RKey()>>8, segs[0].Addr, uint32(psn)
	e.releaseSegs(segs)
	if err != nil {
		e.hostFault(qp, err)
		e.count(qp, RespRemoteAccessErrors)
		rsp.accessError(qp, psn)
		return
	}
	e.bill.Atomics++
	r.set(respRes{atomic: true, first: psn, last: psn, cur: psn, start: psn, orig: orig, valid: true})
	resp.queue.push(resp.res, i)
	resp.epsn = psn.Next()
	resp.nakSent = false
	resp.msn = (resp.msn + 1) & wire.PSNMask
	e.arb.Ring(qp.index)
}

// flushAccess is the right a FLUSH of placement type plt needs: of the
// QP, and of the region.
func flushAccess(plt uint8) atu.Access {
	var a atu.Access
	if plt&wire.FlushGlobal != 0 {
		a |= atu.FlushGlobal
	}
	if plt&wire.FlushPersistent != 0 {
		a |= atu.FlushPersistent
	}
	return a
}

// recvAtomicWrite executes an ATOMIC WRITE (IBTA 1.5): an 8-byte store at
// an aligned address of a region with remote write, single-copy atomic
// (the DMA cluster's atomic unit), answered by a zero-length READ
// response from a responder resource, as rxe answers it; a duplicate is
// answered again without storing again.
func (rsp *responder) recvAtomicWrite(qp *QP, p *wire.Packet, psn wire.PSN) {
	e := rsp.e
	e.count(qp, RxAtomicRequests)
	va, rkey := p.RETH.VA(), p.RETH.RKey()
	if p.RETH.DMALen() != wire.AtomicWriteSize || len(p.Payload) != wire.AtomicWriteSize || p.Pad != 0 || va&7 != 0 {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	segs, f := e.translate(&atu.Request{Key: rkey, PD: qp.PD, QPN: qp.QPN, VA: va, Len: wire.AtomicWriteSize,
		Access: atu.RemoteWrite, Remote: true}, e.segs[:0])
	if f != atu.OK || len(segs) != 1 {
		e.releaseSegs(segs)
		e.count(qp, RespRemoteAccessErrors)
		rsp.accessError(qp, psn)
		return
	}
	r, i, ok := rsp.allocRes(qp)
	if !ok {
		e.releaseSegs(segs)
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	_, err := e.cfg.DMA.Atomic(qp.index, segs[0], dma.Store, 0, binary.NativeEndian.Uint64(p.Payload))
	e.bill.AtomicMR, e.bill.AtomicAddr, e.bill.AtomicPSN = rkey>>8, segs[0].Addr, uint32(psn)
	e.releaseSegs(segs)
	if err != nil {
		e.hostFault(qp, err)
		e.count(qp, RespRemoteAccessErrors)
		rsp.accessError(qp, psn)
		return
	}
	e.bill.Atomics++
	rsp.answerNonPosted(qp, r, i, psn)
}

// recvFlush executes a FLUSH (IBTA 1.5). Global visibility: every
// placement this responder made is already in host memory when the DMA
// returns (a copy into the program's memory, or process_vm_writev), so
// there is nothing to wait for. Persistence: rnic cannot make a program's
// memory persistent (it would need file- or DAX-backed memory and a
// write-back it does not do), so a persistent FLUSH is refused with a
// remote access error, as rxe refuses one on memory that is not pmem.
func (rsp *responder) recvFlush(qp *QP, p *wire.Packet, psn wire.PSN) {
	e := rsp.e
	plt, sel := p.FETH.Placement(), p.FETH.Level()
	if plt == 0 || plt&^(wire.FlushGlobal|wire.FlushPersistent) != 0 || sel > wire.FlushMR || p.FETH.Reserved() != 0 {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	va, rkey, length := p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen()
	if length > MaxMsgSize {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	need := flushAccess(plt)
	switch {
	case sel == wire.FlushMR:
		m, ok := e.cfg.ATU.Lookup(rkey)
		if !ok || !m.Valid || m.PD != qp.PD || !m.Access.Has(need) {
			e.count(qp, RespRemoteAccessErrors)
			rsp.accessError(qp, psn)
			return
		}
	case length > 0:
		segs, f := e.translate(&atu.Request{Key: rkey, PD: qp.PD, QPN: qp.QPN, VA: va, Len: uint64(length),
			Access: need, Remote: true, CheckOnly: true}, e.segs[:0])
		e.releaseSegs(segs)
		if f != atu.OK {
			e.count(qp, RespRemoteAccessErrors)
			rsp.accessError(qp, psn)
			return
		}
	}
	if plt&wire.FlushPersistent != 0 {
		e.count(qp, RespRemoteAccessErrors)
		rsp.accessError(qp, psn)
		return
	}
	r, i, ok := rsp.allocRes(qp)
	if !ok {
		rsp.requestError(qp, psn, wire.NAKInvalidRequest)
		return
	}
	rsp.answerNonPosted(qp, r, i, psn)
}

// answerNonPosted queues the zero-length READ RESPONSE ONLY that answers
// a FLUSH or ATOMIC WRITE at psn, from resource r (index i).
func (rsp *responder) answerNonPosted(qp *QP, r *respRes, i uint8, psn wire.PSN) {
	resp := &qp.resp
	r.set(respRes{nonPosted: true, first: psn, last: psn, cur: psn, start: psn, valid: true})
	resp.queue.push(resp.res, i)
	resp.epsn = psn.Next()
	resp.nakSent = false
	resp.msn = (resp.msn + 1) & wire.PSNMask
	rsp.e.arb.Ring(qp.index)
}

// chooseAtomicArg returns the compare value (CmpSwap) or the addend
// (FetchAdd, carried in the Swap/Add field).
func chooseAtomicArg(op dma.AtomicOp, a wire.AtomicETH) uint64 {
	if op == dma.CompareSwap {
		return a.Compare()
	}
	return a.SwapAdd()
}

// duplicate answers a request the responder has already executed
// (IBTA 9.7.5.1.2): SEND and WRITE get an ACK, a READ is answered again
// from the requested PSN, an atomic gets its saved result.
func (rsp *responder) duplicate(qp *QP, p *wire.Packet, psn wire.PSN) {
	e := rsp.e
	resp := &qp.resp
	info := p.Info
	switch {
	case info.Flags.Has(wire.FlagReadReq) || info.Flags.Has(wire.FlagAtomic) || info.Flags.Has(wire.FlagFlush) || info.Flags.Has(wire.FlagAtomicWrite):
		nonPosted := info.Flags.Has(wire.FlagFlush) || info.Flags.Has(wire.FlagAtomicWrite)
		for i := range resp.res {
			r := &resp.res[i]
			if !r.valid || r.atomic != info.Flags.Has(wire.FlagAtomic) || r.nonPosted != nonPosted || psn.Before(r.first) || psn.After(r.last) {
				continue
			}
			if (r.atomic || r.nonPosted) && psn != r.first {
				continue
			}
			// The requester went back to psn and will send everything
			// after it again: responses queued for later PSNs are
			// dropped (their requests come again), and this one is
			// answered (again) from psn. The queue stays in PSN order.
			for resp.queue.n > 0 && int(resp.queue.back(resp.res)) != i && !resp.res[resp.queue.back(resp.res)].first.Before(psn) {
				resp.queue.popBack()
			}
			if e.cfg.Trace != nil {
				e.tracef("qp %#x responder: duplicate %v at psn %v: answer again (resource %v..%v, was at %v, queue %d)", qp.QPN, p.Op, psn, r.first, r.last, r.cur, resp.queue.n)
			}
			r.cur, r.start, r.replay = psn, psn, true
			if resp.queue.n == 0 || int(resp.queue.back(resp.res)) != i {
				resp.queue.push(resp.res, uint8(i))
			}
			e.arb.Ring(qp.index)
			return
		}
		// Too old to answer: drop, the requester's timer will fail it.
		if e.cfg.Trace != nil {
			e.tracef("qp %#x responder: duplicate %v at psn %v: no resource holds it", qp.QPN, p.Op, psn)
		}
	default:
		rsp.queueAck(qp, resp.epsn.Add(wire.PSNMask), wire.SyndromeACK(wire.CreditsInvalid))
	}
}

// queueAck records a cumulative ACK or NAK to send at the end of the
// receive batch (ACK coalescing), or after queued READ/atomic responses.
func (rsp *responder) queueAck(qp *QP, psn wire.PSN, syn wire.Syndrome) {
	resp := &qp.resp
	if resp.ack && resp.ackSyn.Kind() != wire.AckKindACK && !psn.After(resp.ackPSN) {
		// A NAK pending for PSN p says more than an ACK of p-1 (a
		// duplicate's re-ACK) or a later NAK of p: keep it.
		return
	}
	resp.ack, resp.ackPSN, resp.ackSyn = true, psn, syn
	if !resp.onAckList {
		resp.onAckList = true
		rsp.ackList = append(rsp.ackList, qp)
	}
}

// flushAcks sends the coalesced ACKs of a receive batch. An ACK waits for
// queued responses older than it, so the requester sees responses in PSN
// order.
func (rsp *responder) flushAcks() {
	for _, qp := range rsp.ackList {
		resp := &qp.resp
		resp.onAckList = false
		if !resp.ack || qp.destroyed {
			continue
		}
		if resp.queue.n > 0 && !resp.ackPSN.Before(resp.res[resp.queue.front(resp.res)].first) {
			continue // sent by serveResponses after the queue drains
		}
		rsp.sendAck(qp)
	}
	clear(rsp.ackList)
	rsp.ackList = rsp.ackList[:0]
}

func (rsp *responder) sendAck(qp *QP) {
	e := rsp.e
	resp := &qp.resp
	resp.ack = false
	route := &qp.attr.AV
	b, f, h := e.newFrame(route, wire.OpRCAck, 0)
	wire.BTH(f[h:]).Encode(&wire.BTHFields{Opcode: wire.OpRCAck, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, PSN: resp.ackPSN})
	wire.AETH(f[h+wire.BTHSize:]).Encode(resp.ackSyn, resp.msn)
	e.send(qp, b, route)
	e.count(qp, AcksSent)
}

// serveResponses sends queued READ responses and atomic ACKs.
func (rsp *responder) serveResponses(qp *QP, g sched.Grant) (pkts, bytes int) {
	e := rsp.e
	resp := &qp.resp
	route := &qp.attr.AV
	for resp.queue.n > 0 && pkts < g.Packets && bytes < g.Bytes {
		r := &resp.res[resp.queue.front(resp.res)]
		if r.atomic {
			b, f, h := e.newFrame(route, wire.OpRCAtomicAck, 0)
			wire.BTH(f[h:]).Encode(&wire.BTHFields{Opcode: wire.OpRCAtomicAck, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, PSN: r.first})
			wire.AETH(f[h+wire.BTHSize:]).Encode(wire.SyndromeACK(wire.CreditsInvalid), resp.msn)
			wire.AtomicAckETH(f[h+wire.BTHSize+wire.AETHSize:]).SetOrigData(r.orig)
			e.send(qp, b, route)
			resp.queue.pop(resp.res)
			pkts++
			continue
		}
		if e.gatherBurst > 1 {
			if k := rsp.burstLen(qp, r, g, pkts, bytes); k > 0 {
				if n, ok := rsp.sendReadBurst(qp, r, k); ok {
					pkts += k
					bytes += n
					continue
				}
			}
		}
		rp := rsp.buildReadResponse(qp, r, r.cur)
		b, n, off := rp.b, rp.n, rp.off
		if n > 0 {
			payload := rp.payload
			segs, fault := e.windowSegs(&e.xw[xwReadSource], qp, n == r.length, &atu.Request{Key: r.rkey, PD: qp.PD, QPN: qp.QPN, VA: r.va,
				Len: uint64(r.length), Access: atu.RemoteRead, Remote: true}, uint64(off), uint64(n))
			if fault != atu.OK && r.replay {
				// A duplicate asked for a READ that was answered while its
				// region was valid; the region has gone since. The
				// requester that sent the duplicate may already have every
				// byte (a resend racing the answer, or one it kept past a
				// gap) and its application may have released the region:
				// an access error now would break a healthy connection.
				// Drop the replay; a requester that still lacks data times
				// out.
				e.releaseSegs(segs)
				b.Release()
				e.count(qp, ReadReplayAborted)
				resp.queue.pop(resp.res)
				continue
			}
			if fault != atu.OK {
				// The region went away under the READ.
				e.releaseSegs(segs)
				b.Release()
				e.count(qp, RespRemoteAccessErrors)
				rsp.accessError(qp, r.cur)
				return pkts, bytes
			}
			fault = e.dmaGather(qp, payload, segs)
			e.releaseSegs(segs)
			if fault != atu.OK {
				// Host memory behind the region could not be read.
				b.Release()
				e.count(qp, RespRemoteAccessErrors)
				rsp.accessError(qp, r.cur)
				return pkts, bytes
			}
		}
		rsp.finishReadResponse(qp, r, &rp)
		pkts++
		bytes += int(n)
	}
	if resp.queue.n == 0 && resp.ack {
		rsp.sendAck(qp)
		if resp.errPending {
			e.cfg.Event(Event{Type: resp.errEvent, QP: qp})
			e.toError(qp)
		}
	}
	return pkts, bytes
}

// readResponse is a READ response packet being built (as request is a
// request's).
type readResponse struct {
	b       *link.Buf
	payload []byte
	off, n  uint32 // the payload's offset in the READ, and length
	pad     int
	padAt   int
}

// buildReadResponse makes the frame of r's response packet psn and
// writes its transport headers; the payload is left to fill.
func (rsp *responder) buildReadResponse(qp *QP, r *respRes, psn wire.PSN) readResponse {
	e := rsp.e
	off := uint32(psn.Diff(r.first)) * qp.mtu
	n := min(qp.mtu, r.length-off)
	var op wire.Opcode
	switch {
	case psn == r.start && psn == r.last:
		op = wire.OpRCReadRespOnly
	case psn == r.start:
		op = wire.OpRCReadRespFirst
	case psn == r.last:
		op = wire.OpRCReadRespLast
	default:
		op = wire.OpRCReadRespMiddle
	}
	b, f, h := e.newFrame(&qp.attr.AV, op, int(n))
	pad := wire.PadLen(int(n))
	wire.BTH(f[h:]).Encode(&wire.BTHFields{Opcode: op, PadCount: uint8(pad), PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, PSN: psn})
	oi := op.Info()
	if o := oi.Offset(wire.HdrAETH); o >= 0 {
		wire.AETH(f[h+o:]).Encode(wire.SyndromeACK(wire.CreditsInvalid), qp.resp.msn)
	}
	rp := readResponse{b: b, off: off, n: n, pad: pad, padAt: h + oi.HdrLen + int(n)}
	if n > 0 {
		rp.payload = f[h+oi.HdrLen : rp.padAt]
	}
	return rp
}

// finishReadResponse pads and queues a READ response whose payload is in
// place, and moves r past it.
func (rsp *responder) finishReadResponse(qp *QP, r *respRes, rp *readResponse) {
	e := rsp.e
	if rp.n > 0 {
		clear(rp.b.Bytes()[rp.padAt : rp.padAt+rp.pad])
	}
	e.send(qp, rp.b, &qp.attr.AV)
	e.count(qp, ReadResponsesSent)
	if r.cur == r.last {
		qp.resp.queue.pop(qp.resp.res)
	} else {
		r.cur = r.cur.Next()
	}
}

// burstLen is how many of r's response packets, from the next,
// sendReadBurst may build at once (the requester's burstLen's rule: two
// or more, within the grant's room).
func (rsp *responder) burstLen(qp *QP, r *respRes, g sched.Grant, pkts, bytes int) int {
	k := min(rsp.e.gatherBurst, int(r.last.Diff(r.cur))+1)
	room := 0
	for room < k && pkts+room < g.Packets && bytes < g.Bytes {
		bytes += int(qp.mtu)
		room++
	}
	if room < 2 {
		return 0
	}
	return room
}

// sendReadBurst sends the next k response packets of r, their payloads
// read with one translation and one DMA access. If either fails it sends
// nothing and reports false: the caller goes packet by packet, and the
// packet that fails answers as it would alone (an access error, or a
// replay dropped).
func (rsp *responder) sendReadBurst(qp *QP, r *respRes, k int) (int, bool) {
	e := rsp.e
	ps := rsp.burst[:k]
	dsts := rsp.dsts[:k]
	psn := r.cur
	total := uint32(0)
	for i := range ps {
		ps[i] = rsp.buildReadResponse(qp, r, psn)
		dsts[i] = ps[i].payload
		total += ps[i].n
		psn = psn.Next()
	}
	segs, fault := e.translate(&atu.Request{Key: r.rkey, PD: qp.PD, QPN: qp.QPN, VA: r.va + uint64(ps[0].off),
		Len: uint64(total), Access: atu.RemoteRead, Remote: true}, e.segs[:0])
	if fault == atu.OK {
		fault = e.dmaGatherV(qp, dsts, int(total), segs)
	}
	e.releaseSegs(segs)
	clear(dsts)
	if fault != atu.OK {
		for i := range ps {
			ps[i].b.Release()
			ps[i] = readResponse{}
		}
		return 0, false
	}
	for i := range ps {
		rsp.finishReadResponse(qp, r, &ps[i])
		ps[i] = readResponse{}
	}
	return int(total), true
}

// requestError NAKs a request that the responder refuses (class B/C
// errors: invalid request, remote operational error) and moves the QP to
// ERR, with the matching async event.
func (rsp *responder) requestError(qp *QP, psn wire.PSN, code wire.NAKCode) {
	e := rsp.e
	if e.cfg.Trace != nil {
		e.tracef("qp %#x responder: NAK %v at psn %v (epsn %v, msg %d)", qp.QPN, code, psn, qp.resp.epsn, qp.resp.msg)
	}
	e.count(qp, RxInvalidRequests)
	if qp.Type == UC {
		rsp.abortMsg(qp)
		qp.resp.ucDrop = true
		return
	}
	rsp.fatalNAK(qp, psn, code, EventQPReqErr)
}

// accessError NAKs an R_Key violation and moves the QP to ERR.
func (rsp *responder) accessError(qp *QP, psn wire.PSN) {
	e := rsp.e
	if e.cfg.Trace != nil {
		e.tracef("qp %#x responder: NAK remote access error at psn %v", qp.QPN, psn)
	}
	if qp.Type == UC {
		rsp.abortMsg(qp)
		qp.resp.ucDrop = true
		return
	}
	rsp.fatalNAK(qp, psn, wire.NAKRemoteAccessErr, EventQPAccessErr)
}

// fatalNAK answers a request in error with a NAK and moves the QP to ERR,
// reporting ev. If READ or atomic requests before it still wait for their
// responses, those go first (IBTA 9.7.5.2: responses are returned in PSN
// order, and the requests were legal): the NAK waits in the queue's
// cumulative ACK slot and serveResponses sends it once they are out.
func (rsp *responder) fatalNAK(qp *QP, psn wire.PSN, code wire.NAKCode, ev EventType) {
	e := rsp.e
	resp := &qp.resp
	if resp.queue.n > 0 && resp.res[resp.queue.front(resp.res)].cur.Before(psn) {
		resp.ack, resp.ackPSN, resp.ackSyn = true, psn, wire.SyndromeNAK(code)
		resp.errPending, resp.errEvent = true, ev
		e.arb.Ring(qp.index)
		return
	}
	rsp.nakNow(qp, psn, code)
	e.cfg.Event(Event{Type: ev, QP: qp})
	e.toError(qp)
}

// nakNow sends a NAK at once (the QP is about to leave the states that
// send anything).
func (rsp *responder) nakNow(qp *QP, psn wire.PSN, code wire.NAKCode) {
	qp.resp.ack, qp.resp.ackPSN, qp.resp.ackSyn = true, psn, wire.SyndromeNAK(code)
	qp.resp.queue.reset()
	rsp.sendAck(qp)
}

// recvError completes the receive WQE in progress with an error.
func (rsp *responder) recvError(qp *QP, status WCStatus) {
	e := rsp.e
	resp := &qp.resp
	if !resp.haveRecv {
		return
	}
	resp.haveRecv = false
	e.count(qp, RespCQEError)
	wc := WC{WRID: resp.recv.wrid, Status: status, Opcode: WCRecv, QPNum: qp.QPN}
	e.cqe(qp, qp.recvCQN(), &wc, false)
}

// abortMsg forgets the message in progress (UC loss); a receive WQE taken
// for it stays with the QP for the next message.
func (rsp *responder) abortMsg(qp *QP) {
	qp.resp.msg = msgNone
	qp.resp.recvOff = 0
}

// recvPD is the protection domain of the QP's receive buffers.
func (rsp *responder) recvPD(qp *QP) uint32 {
	if qp.srq != nil {
		return qp.srq.PD
	}
	return qp.PD
}

// udRecv handles a UD SEND: check the Q_Key, take a receive WQE, place
// the 40-byte GRH and the payload (IBTA 11.4.1.1).
func (rsp *responder) udRecv(qp *QP, p *wire.Packet) {
	e := rsp.e
	if p.DETH.QKey() != qp.attr.QKey {
		e.count(qp, RxBadQKey)
		return
	}
	e.count(qp, RxSendRequests)
	resp := &qp.resp
	if !rsp.takeRecvWQE(qp) {
		e.count(qp, OutOfBuffer)
		return
	}
	total := uint64(grhSize + len(p.Payload))
	if total > resp.recv.length {
		e.count(qp, RespLocalLengthError)
		rsp.recvError(qp, WCLocLenErr)
		return
	}
	// The GRH area holds the IPv6 header, or for IPv4 the IPv4 header in
	// its last 20 bytes (the RoCEv2 convention of rdma-core). It is built
	// in the engine's scratch: the DMA engines' interface would move a
	// local array to the heap, one allocation per datagram.
	grh := &e.grh
	clear(grh[:])
	if p.IPv6 {
		copy(grh[:], p.Frame[:grhSize])
	} else {
		copy(grh[20:], p.Frame[:20])
	}
	pd := rsp.recvPD(qp)
	if f := e.scatter(qp, pd, resp.recv.sge, 0, grh[:]); f != atu.OK {
		rsp.recvError(qp, WCLocProtErr)
		return
	}
	if len(p.Payload) > 0 {
		if f := e.scatter(qp, pd, resp.recv.sge, grhSize, p.Payload); f != atu.OK {
			rsp.recvError(qp, WCLocProtErr)
			return
		}
	}
	resp.haveRecv = false
	wc := WC{WRID: resp.recv.wrid, Status: WCSuccess, Opcode: WCRecv, Flags: WCWithGRH, ByteLen: uint32(total),
		QPNum: qp.QPN, SrcQP: p.DETH.SrcQP(), SL: roceL3Type(p.IPv6)}
	if p.ImmDt != nil {
		wc.Flags |= WCWithImm
		wc.ImmData = p.ImmDt.Imm()
	}
	e.cqe(qp, qp.recvCQN(), &wc, p.BTH.SE())
}

const grhSize = 40

// The L3 header type a RoCE UD receive reports in its completion's SL, as
// ConnectX does: RoCE carries no SL (there is no LRH), and the CQE says
// instead whether the GRH area holds an IPv6 or an IPv4 header (IBTA
// Annex 17, A17.4.5.1: the CQE carries "a flag that indicates if the
// received frame is an IPv4, IPv6 or RoCE packet"). UCX's UD transport
// reads it there to find the destination address in the GRH area, and
// drops every packet whose address it does not find.
const (
	roceL3IPv6 = 1
	roceL3IPv4 = 2
)

func roceL3Type(ipv6 bool) uint8 {
	if ipv6 {
		return roceL3IPv6
	}
	return roceL3IPv4
}
