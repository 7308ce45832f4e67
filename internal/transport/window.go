package transport

import "github.com/rnic/rnic/internal/hw/atu"

// Translation windows: the wall-clock engine translates the memory of a
// message a window (up to xlateWindowBytes) at a time and cuts each
// packet's extents from it, while the ATU's tables stay as they were
// (ATU.Tables: after any registration, deregistration, bind or
// invalidation the window is translated again), instead of translating
// every packet. A hardware RNIC keeps a message's memory key context and
// its pages the same way. The window starts at the packet that needed it
// and ends at the message's end, so the work stays bounded by the bytes
// that move (a request claiming 1 GiB walks no more of the MTT than one
// claiming its own length), and a page is looked up once per window, not
// once per packet crossing it.
//
// The timing model translates every packet, as its profiles were
// calibrated (Config.Billing), and so does a message of one packet:
// nothing would be kept. On the wall clock atu_translations counts
// windows.
//
// Each place that translates packet after packet has a window of its
// own: they interleave (a QP sends WRITEs while it places READ
// responses).
const (
	xwWriteTarget = iota // the responder's WRITE target
	xwReadSource         // the responder's READ source
	xwGather             // the requester's gather list
	xwReadTarget         // the requester's READ scatter list
	numWindows
)

const xlateWindowBytes = 256 << 10

// xlateWindow is one kept translation: bytes [off, off+len) of the range
// (key, va) of qp, with the access and protection domain it was checked
// for, read when the tables were at tables.
type xlateWindow struct {
	qp       *QP
	tables   uint64
	key, pd  uint32
	access   atu.Access
	va       uint64
	off, len uint64
	segs     []atu.Seg
}

// windowSegs translates bytes [off, off+n) of the range r describes
// (r.VA and r.Len: the whole of it; r's key, rights and QP as for a
// packet) into e.segs, from window w where it can. one says the range is
// a single packet's.
func (e *Engine) windowSegs(w *xlateWindow, qp *QP, one bool, r *atu.Request, off, n uint64) ([]atu.Seg, atu.Fault) {
	if one || !e.keepsWindows() {
		r.VA += off
		r.Len = n
		return e.translate(r, e.segs[:0])
	}
	tables := e.cfg.ATU.Tables() // read first: a change during the walk makes it stale
	if w.qp != qp || w.tables != tables || w.key != r.Key || w.pd != r.PD || w.access != r.Access || w.va != r.VA ||
		off < w.off || off+n > w.off+w.len {
		w.qp = nil
		va := r.VA
		r.VA += off
		r.Len = max(n, min(xlateWindowBytes, r.Len-off))
		segs, f := e.translate(r, w.segs[:0])
		w.segs = segs
		if f != atu.OK {
			return e.segs[:0], f
		}
		w.qp, w.tables, w.key, w.pd, w.access, w.va, w.off, w.len = qp, tables, r.Key, r.PD, r.Access, va, off, r.Len
	}
	return cutSegs(e.segs[:0], w.segs, off-w.off, n), atu.OK
}

// windowSGL is translateSGL with window w: bytes [off, off+n) of an SGL,
// through the window when they lie in one of its entries (the common
// case: one SGE), else one by one. one is as for windowSegs.
func (e *Engine) windowSGL(w *xlateWindow, qp *QP, one bool, pd uint32, sgl []SGE, off, n uint64, access atu.Access) ([]atu.Seg, atu.Fault) {
	if one || !e.keepsWindows() {
		return e.translateSGL(qp, pd, sgl, off, n, access)
	}
	in := off // the offset within the entry the bytes start in
	for _, s := range sgl {
		if in >= uint64(s.Length) {
			in -= uint64(s.Length)
			continue
		}
		if in+n > uint64(s.Length) {
			break // the bytes span entries
		}
		return e.windowSegs(w, qp, false, &atu.Request{Key: s.LKey, PD: pd, QPN: qp.QPN, VA: s.Addr, Len: uint64(s.Length), Access: access}, in, n)
	}
	return e.translateSGL(qp, pd, sgl, off, n, access)
}

// keepsWindows reports whether the engine keeps translation windows: on
// the wall clock, not in the timing model (Billing) or metadata mode.
func (e *Engine) keepsWindows() bool { return !e.cfg.Billing && !e.cfg.Metadata }

// cutSegs appends to dst the extents of bytes [off, off+n) of segs.
func cutSegs(dst, segs []atu.Seg, off, n uint64) []atu.Seg {
	for _, s := range segs {
		if n == 0 {
			break
		}
		l := uint64(s.Len)
		if off >= l {
			off -= l
			continue
		}
		take := min(l-off, n)
		s.Addr += off
		s.Len = uint32(take)
		dst = append(dst, s)
		off, n = 0, n-take
	}
	return dst
}

// drop forgets w if it is qp's (its message is done, or qp destroyed).
func (w *xlateWindow) drop(qp *QP) {
	if w.qp == qp {
		w.qp = nil
		clear(w.segs)
		w.segs = w.segs[:0]
	}
}
