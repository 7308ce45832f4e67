package transport

import (
	"encoding/binary"
	"fmt"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/queue"
	"github.com/rnic/rnic/wire"
)

// Send WQEs travel from the poster to the engine in their slots of the
// send queue, in the one format of the queues in host memory
// (internal/queue): encodeSend writes a Go program's work request into a
// slot (a C program's library writes the same bytes), decodeSend reads a
// slot into the engine's copy and checks it. The engine decodes a WQE
// once, when it fetches it (fetchSend), and works from its copy after;
// the Go poster decodes what it encoded too, so that a work request the
// engine would refuse fails ibv_post_send at once, with the same checks.

var le = binary.LittleEndian

// encodeSend writes wr into slot. The checks are decodeSend's; only what
// encoding itself needs is refused here (inline data gathered from an
// SGE the ATU refuses, or more than the slot holds).
func (qp *QP) encodeSend(slot []byte, wr *SendWR) error {
	if wr.Opcode >= numWROpcodes {
		return fmt.Errorf("%w: unknown opcode %d", ErrInvalidWR, wr.Opcode)
	}
	clear(slot[:queue.WQEHeaderLen])
	le.PutUint64(slot[queue.WQEWRID:], wr.WRID)
	slot[queue.WQEOpcode], slot[queue.WQEFlags] = uint8(wr.Opcode), uint8(wr.Flags)
	switch wr.Opcode {
	case WRBindMW:
		b := &wr.Bind
		le.PutUint32(slot[queue.BindMWRKey:], b.MW)
		le.PutUint64(slot[queue.BindAddr:], b.Addr)
		le.PutUint32(slot[queue.BindNewRKey:], b.NewKey)
		le.PutUint64(slot[queue.BindLength:], b.Length)
		le.PutUint32(slot[queue.BindAccess:], uint32(b.Access))
		le.PutUint32(slot[queue.BindMRLKey:], b.MR)
		return nil
	case WRSendWithInv, WRLocalInv:
		le.PutUint32(slot[queue.WQEImm:], wr.InvalidateRKey)
	default:
		le.PutUint32(slot[queue.WQEImm:], wr.ImmData)
	}
	le.PutUint64(slot[queue.WQERemoteAddr:], wr.RemoteAddr)
	le.PutUint32(slot[queue.WQERKey:], wr.RKey)
	if wr.Opcode == WRFlush {
		le.PutUint64(slot[queue.FlushLength:], uint64(wr.Flush.Length))
		slot[queue.FlushPlacement], slot[queue.FlushLevel] = wr.Flush.Placement, wr.Flush.Level
	} else {
		le.PutUint64(slot[queue.WQECompareAdd:], wr.CompareAdd)
		le.PutUint64(slot[queue.WQESwap:], wr.Swap)
	}
	le.PutUint32(slot[queue.WQERemoteQPN:], wr.RemoteQPN)
	le.PutUint32(slot[queue.WQERemoteQKey:], wr.RemoteQKey)
	if wr.AH != nil {
		le.PutUint32(slot[queue.WQEAH:], wr.AH.Num)
	}
	body := slot[queue.WQEHeaderLen:]
	if wr.Flags&SendInline == 0 {
		if len(wr.SGL) > len(body)/queue.SGELen || len(wr.SGL) > 255 {
			return fmt.Errorf("%w: %d SGEs exceed max_send_sge %d", ErrInvalidWR, len(wr.SGL), qp.sq.maxSGE)
		}
		slot[queue.WQENumSGE] = uint8(len(wr.SGL))
		for i, s := range wr.SGL {
			g := body[i*queue.SGELen:]
			le.PutUint64(g[queue.SGEAddr:], s.Addr)
			le.PutUint32(g[queue.SGELength:], s.Length)
			le.PutUint32(g[queue.SGELKey:], s.LKey)
		}
		return nil
	}
	// Inline data is copied into the WQE now by the posting CPU (that is
	// what inline means), so the buffer is free on return. The CPU reads
	// through the host's page tables, not the NIC's caches.
	if wr.Inline != nil && len(wr.SGL) != 0 {
		return fmt.Errorf("%w: inline payload without IBV_SEND_INLINE, or with SGEs", ErrInvalidWR)
	}
	var n uint64
	for _, s := range wr.SGL {
		n += uint64(s.Length)
	}
	n += uint64(len(wr.Inline))
	if n > uint64(qp.sq.maxInline) || n > uint64(len(body)) {
		return fmt.Errorf("%w: %d inline bytes exceed max_inline_data %d", ErrInvalidWR, n, qp.sq.maxInline)
	}
	off := copy(body, wr.Inline)
	for _, s := range wr.SGL {
		if f := qp.engine.cfg.ATU.Read(qp.PD, s.LKey, s.Addr, body[off:off+int(s.Length)]); f != atu.OK {
			return fmt.Errorf("%w: inline SGE (lkey %#x, addr %#x, %d bytes): %v", ErrInvalidWR, s.LKey, s.Addr, s.Length, f)
		}
		off += int(s.Length)
	}
	le.PutUint32(slot[queue.WQEInlineLen:], uint32(n))
	return nil
}

// decodeSend reads slot into w and the SGL into sge (room for the QP's
// max_send_sge), reading each field of the slot once, and checks the WQE
// against the QP: its opcode, its SGL or inline data against the QP's
// caps and the slot, an atomic's one 8-byte SGE, a UD destination's
// address handle (in the QP's protection domain). w's posted fields are
// set even when the WQE is refused (its completion names its wr_id).
func (qp *QP) decodeSend(slot []byte, w *sendWQE, sge []SGE) error {
	*w = sendWQE{
		wrid:  le.Uint64(slot[queue.WQEWRID:]),
		op:    WROpcode(slot[queue.WQEOpcode]),
		flags: SendFlags(slot[queue.WQEFlags]),
	}
	nsge, v12 := slot[queue.WQENumSGE], le.Uint32(slot[queue.WQEImm:])
	w.raddr, w.rkey = le.Uint64(slot[queue.WQERemoteAddr:]), le.Uint32(slot[queue.WQERKey:])
	w.cmpAdd, w.swap = le.Uint64(slot[queue.WQECompareAdd:]), le.Uint64(slot[queue.WQESwap:])
	w.rqpn, w.rqkey = le.Uint32(slot[queue.WQERemoteQPN:]), le.Uint32(slot[queue.WQERemoteQKey:])
	ah, inlineLen := le.Uint32(slot[queue.WQEAH:]), le.Uint32(slot[queue.WQEInlineLen:])
	if w.op >= numWROpcodes || wrInfos[w.op].qpTypes == 0 {
		return fmt.Errorf("%w: unknown opcode %d", ErrInvalidWR, w.op)
	}
	info := &wrInfos[w.op]
	if info.qpTypes&(1<<qp.Type) == 0 {
		return fmt.Errorf("%w: %v is not supported on a %v QP", ErrInvalidWR, w.op, qp.Type)
	}
	switch w.op {
	case WRBindMW:
		// The bind's fields share the header (queue.BindFields).
		w.invKey, w.imm, w.rkey = v12, le.Uint32(slot[queue.BindNewRKey:]), le.Uint32(slot[queue.BindMRLKey:])
		w.raddr, w.cmpAdd = le.Uint64(slot[queue.BindAddr:]), le.Uint64(slot[queue.BindLength:])
		w.rqkey, w.rqpn, w.swap = le.Uint32(slot[queue.BindAccess:]), 0, 0
		return nil
	case WRSendWithInv, WRLocalInv:
		w.invKey = v12
	default:
		w.imm = v12
	}
	sq, body := qp.sq, slot[queue.WQEHeaderLen:]
	var length uint64
	if w.flags&SendInline != 0 {
		if !info.payload {
			return fmt.Errorf("%w: IBV_SEND_INLINE on %v", ErrInvalidWR, w.op)
		}
		if nsge != 0 {
			return fmt.Errorf("%w: inline payload without IBV_SEND_INLINE, or with SGEs", ErrInvalidWR)
		}
		if inlineLen > sq.maxInline || uint64(inlineLen) > uint64(len(body)) {
			return fmt.Errorf("%w: %d inline bytes exceed max_inline_data %d", ErrInvalidWR, inlineLen, sq.maxInline)
		}
		w.inline, length = true, uint64(inlineLen)
	} else {
		if uint32(nsge) > sq.maxSGE || int(nsge) > len(sge) || int(nsge)*queue.SGELen > len(body) {
			return fmt.Errorf("%w: %d SGEs exceed max_send_sge %d", ErrInvalidWR, nsge, sq.maxSGE)
		}
		if inlineLen != 0 {
			return fmt.Errorf("%w: %d inline bytes without IBV_SEND_INLINE", ErrInvalidWR, inlineLen)
		}
		for i := range int(nsge) {
			g := body[i*queue.SGELen:]
			sge[i] = SGE{Addr: le.Uint64(g[queue.SGEAddr:]), Length: le.Uint32(g[queue.SGELength:]), LKey: le.Uint32(g[queue.SGELKey:])}
			length += uint64(sge[i].Length)
		}
		w.nsge = uint16(nsge)
	}
	if length > MaxMsgSize {
		return fmt.Errorf("%w: message of %d bytes exceeds the maximum %d", ErrInvalidWR, length, MaxMsgSize)
	}
	if info.atomic && (length != 8 || nsge != 1) {
		return fmt.Errorf("%w: an atomic needs exactly one 8-byte SGE (got %d SGEs, %d bytes)", ErrInvalidWR, nsge, length)
	}
	if info.nonPosted {
		if nsge != 0 || w.inline {
			return fmt.Errorf("%w: %v carries no SGL", ErrInvalidWR, w.op)
		}
		switch w.op {
		case WRAtomicWrite:
			length = wire.AtomicWriteSize
		case WRFlush:
			n, placement, level := le.Uint64(slot[queue.FlushLength:]), slot[queue.FlushPlacement], slot[queue.FlushLevel]
			if placement == 0 || placement&^(wire.FlushGlobal|wire.FlushPersistent) != 0 || level > wire.FlushMR || n > 1<<32-1 {
				return fmt.Errorf("%w: FLUSH of placement type %#x, selectivity level %d, %d bytes", ErrInvalidWR, placement, level, n)
			}
			length = n
			w.rqkey, w.cmpAdd = uint32(placement)|uint32(level)<<8, 0
		}
	}
	w.length = uint32(length)
	if qp.Type == UD {
		a := qp.engine.cfg.AHs.Get(ah)
		if a == nil {
			return fmt.Errorf("%w: UD send without an address handle (AH %d)", ErrInvalidWR, ah)
		}
		if a.PD != qp.PD {
			return fmt.Errorf("%w: address handle of another protection domain", ErrInvalidWR)
		}
		if w.rqpn > 0xFFFFFF {
			return fmt.Errorf("%w: remote QPN %#x exceeds 24 bits", ErrInvalidWR, w.rqpn)
		}
		w.ah = a
	}
	return nil
}

// fetchSend fetches the WQEs the poster has published and the engine has
// not fetched yet: each slot is decoded into the engine's copy, a WQE the
// checks refuse marked to complete with a local QP operation error. A
// producer index more than the ring's depth past the consumer index (or
// behind what was fetched) is one no poster can write but by error: it
// returns false and fetches nothing more, ever (until RESET), and the
// caller puts the QP in error.
func (e *Engine) fetchSend(qp *QP) bool {
	sq := qp.sq
	if sq.bad {
		return false
	}
	pi := sq.pi.Load()
	if pi == sq.fetched {
		return true
	}
	if pi-sq.ci.Load() > sq.depth || pi-sq.ci.Load() < sq.fetched-sq.ci.Load() {
		sq.bad = true
		e.tracef("QP %#x: send queue producer index %d, consumer index %d, depth %d: garbage", qp.QPN, pi, sq.ci.Load(), sq.depth)
		return false
	}
	for i := sq.fetched; i != pi && !sq.own; i++ {
		w := sq.slot(i)
		if err := qp.decodeSend(sq.slotMem(i), w, sq.slotSGE(i)); err != nil {
			w.bad = true
			e.tracef("QP %#x: WQE %d refused at fetch: %v", qp.QPN, i, err)
		}
	}
	sq.fetched = pi
	return true
}

// lastWQEBytes is the size the timing model charges for the last WQE
// posted (the doorbell's), read from its slot: it is not fetched yet.
func (qp *QP) lastWQEBytes() int {
	sq := qp.sq
	pi := sq.pi.Load()
	if pi == sq.ci.Load() {
		return 0
	}
	s := sq.slotMem(pi - 1)
	w := sendWQE{op: WROpcode(s[queue.WQEOpcode]), inline: SendFlags(s[queue.WQEFlags])&SendInline != 0,
		length: le.Uint32(s[queue.WQEInlineLen:]), nsge: uint16(s[queue.WQENumSGE])}
	if w.op >= numWROpcodes {
		return 0
	}
	return sendWQEBytes(qp.Type, &w)
}
