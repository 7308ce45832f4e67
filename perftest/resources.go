package perftest

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/rnic/rnic"
)

// resources are the verbs objects of one side (ctx_init): one PD, a send
// CQ and a receive CQ shared by the QPs, and the registered buffers.
type resources struct {
	p      *params
	dev    *rnic.Device
	pd     *rnic.PD
	sendCQ *rnic.CQ
	recvCQ *rnic.CQ
	qps    []*qpRes
	access rnic.Access
}

// qpRes is one QP and its part of the buffers, laid out as perftest lays
// them out (alloc_ctx, create_mr, set_up_connection, ctx_set_recv_wqes).
// Without --mr_per_qp one region holds every QP's buffers: QP i sends
// from (or reads into) base + i·BUFF_SIZE, and the peer reaches it at
// base + (qps+i)·BUFF_SIZE. With --mr_per_qp each QP has its own region,
// sends from its start and is reached at start + BUFF_SIZE. A send test
// receives at base + (qps+i)·INC(BUFF_SIZE) (shared) or at the region's
// start (per QP), past room for the GRH on UD.
type qpRes struct {
	qp       *rnic.QP
	mr       *rnic.MR
	buffSize int    // BUFF_SIZE(size, cycle_buffer)
	buf      uint64 // ctx->buf[i]
	recv     uint64 // the first receive buffer
	ah       *rnic.AH
	my, rem  Dest
}

// buffSize is perftest's BUFF_SIZE: the message size, at least the cycle
// buffer.
func buffSize(size, cycle int) int { return max(size, cycle) }

// inc is perftest's INC: how far consecutive messages are apart in the
// buffer, at least a cache line.
func inc(size, cacheLine int) int {
	if size > cacheLine {
		return roundUp(size, cacheLine)
	}
	return cacheLine
}

// newResources creates the PD, CQs, QPs and buffers for p on dev.
func newResources(p *params, dev *rnic.Device) (*resources, error) {
	r := &resources{p: p, dev: dev, access: rnic.AccessLocalWrite}
	switch p.Test.Verb() {
	case VerbWrite:
		r.access |= rnic.AccessRemoteWrite
	case VerbRead:
		r.access |= rnic.AccessRemoteRead
	case VerbAtomic:
		r.access |= rnic.AccessRemoteAtomic
	}
	gid, err := dev.GID(p.gidIndex)
	if err != nil {
		return nil, fmt.Errorf("perftest: -x %d: %w", p.gidIndex, err)
	}
	if r.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	nq := p.QPs
	if r.sendCQ, err = dev.CreateCQ(p.txDepth*nq + 1); err != nil {
		return nil, err
	}
	r.recvCQ = r.sendCQ
	if p.Test.Verb() == VerbSend {
		if r.recvCQ, err = dev.CreateCQ(p.rxDepth*nq + 1); err != nil {
			return nil, err
		}
	}
	recvWR := 1
	if p.Test.Verb() == VerbSend {
		recvWR = p.rxDepth
	}
	bs := buffSize(p.Size, p.cycleBuffer)
	perQP := inc(bs, p.cacheLine) * 2 // one QP's part: what it sends and what the peer reaches
	regions := 1
	regionLen := perQP * nq
	if p.MRPerQP {
		regions, regionLen = nq, perQP
	}
	if p.Conn == rnic.UD {
		regionLen += p.cacheLine
	}
	// perftest draws PSNs and buffer contents from rand(); in virtual time
	// they come from the clock's seed, and regions sit at fixed virtual
	// addresses (not the Go heap's), so that a run is a function of the
	// seed.
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	if vc := p.Clock; vc != nil {
		rng = rand.New(rand.NewPCG(vc.Rand().Uint64(), vc.Rand().Uint64()))
	}
	mrs := make([]*rnic.MR, regions)
	for i := range mrs {
		buf := alignedBuffer(regionLen, p.cycleBuffer)
		if p.Test != WriteLat { // write_lat polls its buffer: it starts zeroed
			fillRandom(buf, rng)
		}
		if p.Clock != nil {
			mrs[i], err = r.pd.RegMRIOVA(buf, uint64(i+1)<<32, r.access)
		} else {
			mrs[i], err = r.pd.RegMR(buf, r.access)
		}
		if err != nil {
			return nil, err
		}
	}
	for i := range nq {
		q := &qpRes{buffSize: bs}
		if p.MRPerQP {
			q.mr = mrs[i]
			q.buf = q.mr.Addr()
			q.recv = q.buf
			q.my.VAddr = q.buf + uint64(bs)
		} else {
			q.mr = mrs[0]
			base := q.mr.Addr()
			q.buf = base + uint64(i*bs)
			q.recv = base + uint64((nq+i)*inc(bs, p.cacheLine))
			q.my.VAddr = base + uint64((nq+i)*bs)
		}
		if p.Conn == rnic.UD {
			q.recv += uint64(p.cacheLine - udAddition)
		}
		q.qp, err = r.pd.CreateQP(rnic.QPInitAttr{
			Type: p.Conn, SendCQ: r.sendCQ, RecvCQ: r.recvCQ,
			Cap: rnic.QPCap{MaxSendWR: uint32(p.txDepth), MaxRecvWR: uint32(recvWR), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(p.inline)},
		})
		if err != nil {
			return nil, err
		}
		q.my.OutReads, q.my.QPN, q.my.PSN = uint16(p.outReads), q.qp.QPN(), rng.Uint32()&0xffffff
		q.my.RKey, q.my.GID = q.mr.RKey(), gid
		r.qps = append(r.qps, q)
	}
	return r, nil
}

// offset returns where address a is in q's region.
func (q *qpRes) offset(a uint64) int64 { return int64(a - q.mr.Addr()) }

// alignedBuffer returns n zeroed bytes starting at a multiple of align
// (memalign), so that addresses look like perftest's.
func alignedBuffer(n, align int) []byte {
	b := make([]byte, n+align)
	off := 0
	if m := int(uintptr(unsafe.Pointer(&b[0])) % uintptr(align)); m != 0 {
		off = align - m
	}
	return b[off : off+n : off+n]
}

// fillRandom fills b with pseudo-random bytes, as perftest fills its
// buffers with rand().
func fillRandom(b []byte, r *rand.Rand) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
}

// connect moves every QP to RTS towards the peer's QP of the same index
// (ctx_connect), with perftest's attributes, and for UD creates the
// address handle.
func (r *resources) connect() error {
	p := r.p
	maxRd := uint8(r.dev.Attr().MaxQPRdAtom)
	for i, q := range r.qps {
		rem := q.rem
		cp := rnic.ConnParams{
			MTU: p.mtu, PSN: rnic.PSN(q.my.PSN), Access: qpAccess(p.Test.Verb()),
			Timeout: verbsZero(p.qpTimeout()), RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
			MaxRdAtomic:     int(clampRd(rem.OutReads, maxRd)),
			MaxDestRdAtomic: int(clampRd(q.my.OutReads, maxRd)),
			HopLimit:        0xFF,
			TrafficClass:    uint8(p.TrafficClass),    // --tclass: ah_attr.grh.traffic_class
			SL:              uint8(p.SL),              // -S: ah_attr.sl
			SGIDIndex:       connGIDIndex(p.gidIndex), // -x: ah_attr.grh.sgid_index
		}
		ep := rnic.Endpoint{GID: rem.GID, QPN: rem.QPN, PSN: rnic.PSN(rem.PSN)}
		if err := q.qp.Connect(ep, cp); err != nil {
			return fmt.Errorf("perftest: QP %d: %w", i, err)
		}
		if p.Conn == rnic.UD {
			ah, err := r.pd.CreateAH(rnic.AHAttr{SGIDIndex: uint8(p.gidIndex), DGID: rem.GID, HopLimit: 0xFF, TrafficClass: uint8(p.TrafficClass), SL: uint8(p.SL)})
			if err != nil {
				return fmt.Errorf("perftest: QP %d: %w", i, err)
			}
			q.ah = ah
		}
	}
	return nil
}

// connGIDIndex is -x as ConnParams.SGIDIndex takes it (0 there means the
// default; a negative value, index 0).
func connGIDIndex(x int) int {
	if x == 0 {
		return -1
	}
	return x
}

// qpAccess returns the remote rights perftest grants the peer's requests
// per test (ctx_modify_qp_to_init): WRITE for write tests, READ for read
// tests, ATOMIC for atomic tests, and REMOTE_WRITE|LOCAL_WRITE for send
// tests; UD QPs take none. A request the test does not grant is refused as
// perftest's QP refuses it (NAK invalid request).
func qpAccess(v Verb) rnic.Access {
	switch v {
	case VerbWrite:
		return rnic.AccessRemoteWrite
	case VerbRead:
		return rnic.AccessRemoteRead
	case VerbAtomic:
		return rnic.AccessRemoteAtomic
	case VerbSend:
		return rnic.AccessRemoteWrite | rnic.AccessLocalWrite
	}
	return 0
}

// verbsZero passes a verbs attribute to ConnParams, where 0 means the
// default and a negative value verbs' 0.
func verbsZero(v uint8) int {
	if v == 0 {
		return -1
	}
	return int(v)
}

// clampRd bounds an outstanding-reads count to [1, max].
func clampRd(v uint16, m uint8) uint8 {
	return uint8(max(1, min(int(v), int(m))))
}
