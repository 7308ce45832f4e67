package transport

// Test harnesses for the protocol engine, in the style of gVisor's
// transport/tcp/testing/context and etcd raft's interaction tests:
//
//   - pair: two engines A and B, each with one QP connected to the other,
//     "wired" by the test itself. pump moves frames from A's outbox into
//     B.Receive and back until nothing moves; the test can drop, duplicate
//     or hold back individual frames by their index on each direction, and
//     owns a virtual clock (now) that it advances and Ticks. Everything is
//     deterministic: no goroutines, no real time.
//   - solo: one engine with one connected QP whose peer the test plays by
//     hand: it injects hand-built frames (hdrs) and checks the frames the
//     engine sends with a small checker DSL (expectFrame(t, f, opcode(..),
//     psn(..), syndrome(..), msn(..))), gVisor checker style.
//
// Both build the engine the way internal/nic does (ATU with MPT/MTT caches,
// DMA cluster, QP and CQ tables, arbiter), with small caches so that misses
// and evictions are exercised too.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/dma"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Addresses of the test nodes.
var (
	gidA    = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))
	gidB    = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))
	gidPeer = gidB // the hand-played peer of a solo engine
	gidEvil = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.66"))
)

const (
	testPD    = 1
	otherPD   = 2
	memIOVA   = 0x7f0000001000 // IOVA of a node's main region (non-zero, page aligned)
	peerQPN   = 0x0abcde       // QPN of the hand-played peer
	testQKey  = 0x11111111
	pumpLimit = 10000 // rounds before pump declares a livelock
)

// nodeConfig describes one engine and its QP. The zero value of every field
// means the default given in defaults.
// offload is Config.ICRCOffload for a link that is always intact (on),
// or none (off).
func offload(on bool) func() bool {
	if !on {
		return nil
	}
	return func() bool { return true }
}

type nodeConfig struct {
	dcqcn           *DCQCN  // congestion control (nil: none)
	timely          *TIMELY // delay-based congestion control instead
	qpType          QPType
	localMTU        wire.MTU // the port's active MTU (Config.LocalMTU)
	pathMTU         wire.MTU
	maxUnacked      uint32
	ackReqEvery     uint32
	maxReadPSNs     uint32 // Config.MaxReadPSNs (0: no read budget)
	devRdAtom       uint8  // Config.MaxQPRdAtom and MaxQPInitRdAtom
	sqPSN, rqPSN    wire.PSN
	timeout         uint8
	retryCnt        uint8
	rnrRetry        uint8
	minRNRTimer     uint8
	maxRdAtomic     uint8
	maxDestRdAtomic uint8
	access          atu.Access // QP access flags
	sqDepth         uint32
	rqDepth         uint32
	cqDepth         int
	memSize         int
	sigAll          bool
	host            bus.Mapper // the DMA bus (nil: a bus.Local)
	icrcOffload     bool       // Config.ICRCOffload always true: frames go without an ICRC
	utlb            bool       // CoreConfig.UTLB and BestPageSize: the ATU as the wall-clock NIC has it
	program         bool       // the QP's queues and the CQs in a C program's memory (programring_test.go)
	billing         bool       // Config.Billing: the engine as the timing model drives it
	// noDefaults keeps zero values of timeout, retryCnt, rnrRetry and
	// minRNRTimer (0 is meaningful for each).
	noDefaults bool
}

func (c *nodeConfig) defaults() {
	if c.qpType == 0 {
		c.qpType = RC
	}
	if c.localMTU == 0 {
		c.localMTU = wire.MTU4096
	}
	if c.pathMTU == 0 {
		c.pathMTU = wire.MTU1024
	}
	if c.maxUnacked == 0 {
		c.maxUnacked = 128
	}
	if c.ackReqEvery == 0 {
		c.ackReqEvery = 16
	}
	if c.devRdAtom == 0 {
		c.devRdAtom = 16
	}
	if !c.noDefaults {
		if c.timeout == 0 {
			c.timeout = 14
		}
		if c.retryCnt == 0 {
			c.retryCnt = 7
		}
		if c.rnrRetry == 0 {
			c.rnrRetry = 7
		}
		if c.minRNRTimer == 0 {
			c.minRNRTimer = 12
		}
	}
	if c.maxRdAtomic == 0 {
		c.maxRdAtomic = 4
	}
	if c.maxDestRdAtomic == 0 {
		c.maxDestRdAtomic = 4
	}
	if c.access == 0 {
		c.access = atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead | atu.RemoteAtomic
	}
	if c.sqDepth == 0 {
		c.sqDepth = 64
	}
	if c.rqDepth == 0 {
		c.rqDepth = 64
	}
	if c.cqDepth == 0 {
		c.cqDepth = 256
	}
	if c.memSize == 0 {
		c.memSize = 64 << 10
	}
}

// node is one engine with one QP, its CQs and one registered region.
type node struct {
	ahs  *AHTable
	t    testing.TB
	name string
	gid  wire.GID
	cfg  nodeConfig

	e    *Engine
	atu  *atu.ATU
	dma  *dma.Cluster
	qps  *Table[QP]
	cqs  *Table[CQ]
	scq  *CQ
	rcq  *CQ
	qp   *QP
	mem  []byte // the main region: LocalWrite and every remote right
	key  uint32 // its lkey (== rkey)
	base uint64 // its IOVA

	events []Event
	trace  []string
	prog   *program // cfg.program: the program's side of the rings
}

// smallCaches are deliberately tiny so that tests miss and evict.
var (
	qpcCache = cache.Config{Name: "qpc", CapacityBytes: 4 * 256, EntryBytes: 256, Ways: 2}
	cqcCache = cache.Config{Name: "cqc", CapacityBytes: 4 * 64, EntryBytes: 64, Ways: 2}
	mptCache = cache.Config{Name: "mpt", CapacityBytes: 8 * 64, EntryBytes: 64, Ways: 2}
	mttCache = cache.Config{Name: "mtt", CapacityBytes: 32 * 8, EntryBytes: 8, Ways: 4}
)

// newNode builds an engine the way internal/nic does and creates one QP in
// RESET. The QP is not connected yet (see connect).
func newNode(t testing.TB, name string, gid wire.GID, cfg nodeConfig) *node {
	t.Helper()
	cfg.defaults()
	n := &node{t: t, name: name, gid: gid, cfg: cfg}
	if cfg.program {
		n.prog = newProgram(cfg)
	}
	core, err := NewCore(CoreConfig{
		MaxQP: 16, MaxCQ: 8, MaxMR: 64, DMAEngines: 2,
		QPCCache: qpcCache, CQCCache: cqcCache, MPTCache: mptCache, MTTCache: mttCache,
		Arbiter:     sched.Config{Levels: 1, Mode: sched.DWRR, Quantum: 65536, BurstLimit: 16},
		MaxQPRdAtom: cfg.devRdAtom, MaxUnackedPSNs: cfg.maxUnacked, MaxReadPSNs: cfg.maxReadPSNs,
		Host: cfg.host, UTLB: cfg.utlb, BestPageSize: cfg.utlb,
		Engine: Config{
			AckReqEvery: cfg.ackReqEvery, LocalMTU: cfg.localMTU, GID: gid, ICRCOffload: offload(cfg.icrcOffload), DCQCN: cfg.dcqcn, TIMELY: cfg.timely, Billing: cfg.billing,
			Event: func(ev Event) { n.events = append(n.events, ev) },
			Trace: func(s string) { n.trace = append(n.trace, s) },
		},
	})
	if err != nil {
		t.Fatalf("NewCore: %v", err)
	}
	n.atu, n.dma, n.qps, n.cqs, n.ahs, n.e = core.ATU, core.DMA, core.QPs, core.CQs, core.AHs, core.Engine
	n.scq = n.newCQ(cfg.cqDepth)
	n.rcq = n.newCQ(cfg.cqDepth)
	n.qp = n.createQP(cfg.qpType, nil)
	n.mem = make([]byte, cfg.memSize)
	n.base = memIOVA
	n.key = n.regMR(testPD, n.mem, n.base, atu.LocalWrite|atu.RemoteWrite|atu.RemoteRead|atu.RemoteAtomic)
	return n
}

// newAH makes an address handle of the node's in protection domain pd.
func (n *node) newAH(r wire.Route, pd uint32) *AH {
	n.t.Helper()
	a, err := n.ahs.New(r, pd, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	return a
}

func (n *node) newCQ(depth int) *CQ {
	n.t.Helper()
	cqn, idx, ok := n.cqs.Alloc()
	if !ok {
		n.t.Fatal("CQ table full")
	}
	cq := NewCQ(cqn, depth)
	if n.prog != nil {
		var err error
		if cq, err = NewCQInMem(cqn, n.prog.newCQ(depth).cqMem()); err != nil {
			n.t.Fatal(err)
		}
	}
	n.cqs.Set(idx, cq)
	return cq
}

// createQP creates a QP of type typ in RESET, on the node's CQs.
func (n *node) createQP(typ QPType, srq *SRQ) *QP {
	n.t.Helper()
	qpn, idx, ok := n.qps.Alloc()
	if !ok {
		n.t.Fatal("QP table full")
	}
	init := &QPInit{Type: typ, PD: testPD, SendCQ: n.scq, RecvCQ: n.rcq, SRQ: srq, SigAll: n.cfg.sigAll,
		Cap: QPCap{MaxSendWR: n.cfg.sqDepth, MaxRecvWR: n.cfg.rqDepth, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}}
	if n.prog != nil && n.qp == nil {
		init.SendMem, init.RecvMem = n.prog.ringMems(srq == nil)
	}
	qp, err := n.e.CreateQP(init, qpn, idx)
	if err != nil {
		n.t.Fatalf("CreateQP: %v", err)
	}
	return qp
}

// regMR registers buf at iova and returns its key.
func (n *node) regMR(pd uint32, buf []byte, iova uint64, access atu.Access) uint32 {
	n.t.Helper()
	key, err := n.atu.RegMR(atu.MRSpec{PD: pd, Buf: buf, IOVA: iova, Access: access})
	if err != nil {
		n.t.Fatalf("RegMR: %v", err)
	}
	return key
}

// addr returns the IOVA of byte off of the main region.
func (n *node) addr(off int) uint64 { return n.base + uint64(off) }

// sge returns an SGE over [off, off+length) of the main region.
func (n *node) sge(off, length int) SGE {
	return SGE{Addr: n.addr(off), Length: uint32(length), LKey: n.key}
}

// initAttr, rtrAttr and rtsAttr are the three steps of connecting a QP,
// with the masks IB core requires for its type (verbs.c qp_state_table).
func (n *node) initAttr() (QPAttr, AttrMask) {
	if n.qp.Type == UD {
		return QPAttr{State: QPSInit, Port: 1, QKey: testQKey}, AttrState | AttrPKeyIndex | AttrPort | AttrQKey
	}
	return QPAttr{State: QPSInit, Port: 1, AccessFlags: n.cfg.access}, AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags
}

func (n *node) rtrAttr(dst wire.GID, dqpn uint32) (QPAttr, AttrMask) {
	c := &n.cfg
	switch n.qp.Type {
	case UD:
		return QPAttr{State: QPSRTR}, AttrState
	case UC:
		return QPAttr{State: QPSRTR, AV: wire.Route{Src: n.gid, Dst: dst}, PathMTU: c.pathMTU, DestQPN: dqpn, RQPSN: c.rqPSN},
			AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN
	}
	return QPAttr{State: QPSRTR, AV: wire.Route{Src: n.gid, Dst: dst}, PathMTU: c.pathMTU, DestQPN: dqpn, RQPSN: c.rqPSN,
			MaxDestRdAtomic: c.maxDestRdAtomic, MinRNRTimer: c.minRNRTimer},
		AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
}

func (n *node) rtsAttr() (QPAttr, AttrMask) {
	c := &n.cfg
	if n.qp.Type != RC {
		return QPAttr{State: QPSRTS, SQPSN: c.sqPSN}, AttrState | AttrSQPSN
	}
	return QPAttr{State: QPSRTS, SQPSN: c.sqPSN, Timeout: c.timeout, RetryCnt: c.retryCnt, RNRRetry: c.rnrRetry, MaxRdAtomic: c.maxRdAtomic},
		AttrState | AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic
}

// connect moves the node's QP through INIT and RTR to RTS, connected to
// (dst, dqpn).
func (n *node) connect(dst wire.GID, dqpn uint32) {
	n.t.Helper()
	n.modifyTo(QPSRTS, dst, dqpn)
}

// modifyTo moves a QP in RESET up to state to (INIT, RTR or RTS).
func (n *node) modifyTo(to QPState, dst wire.GID, dqpn uint32) {
	n.t.Helper()
	steps := []func() (QPAttr, AttrMask){n.initAttr, func() (QPAttr, AttrMask) { return n.rtrAttr(dst, dqpn) }, n.rtsAttr}
	for i, step := range steps {
		if QPState(i+1) > to {
			break
		}
		a, m := step()
		if err := n.e.Modify(n.qp, &a, m); err != nil {
			n.t.Fatalf("%s: Modify to %v (%v): %v", n.name, a.State, m, err)
		}
	}
}

// post posts send work requests, failing the test on error.
func (n *node) post(wrs ...SendWR) {
	n.t.Helper()
	if k, err := n.qp.PostSend(wrs); err != nil {
		n.t.Fatalf("%s: PostSend: %d posted: %v", n.name, k, err)
	}
}

// postRecv posts receive work requests, failing the test on error.
func (n *node) postRecv(wrs ...RecvWR) {
	n.t.Helper()
	if k, err := n.qp.PostRecv(wrs); err != nil {
		n.t.Fatalf("%s: PostRecv: %d posted: %v", n.name, k, err)
	}
}

// recvWR is a receive WR over [off, off+length) of the main region.
func (n *node) recvWR(id uint64, off, length int) RecvWR {
	return RecvWR{WRID: id, SGL: []SGE{n.sge(off, length)}}
}

// poll returns every completion in cq.
func poll(cq *CQ) []WC {
	var out []WC
	buf := make([]WC, 16)
	for {
		k := cq.Poll(buf)
		out = append(out, buf[:k]...)
		if k < len(buf) {
			return out
		}
	}
}

func (n *node) sendWCs() []WC {
	if n.prog != nil {
		return n.prog.cqs[0].wcs()
	}
	return poll(n.scq)
}

func (n *node) recvWCs() []WC {
	if n.prog != nil {
		return n.prog.cqs[1].wcs()
	}
	return poll(n.rcq)
}

// counter returns one of the node's QP counters (or a device counter).
func (n *node) counter(c Counter) uint64 {
	if c < numQPCounters {
		return n.e.QPCounters(n.qp)[c]
	}
	return n.e.Counters()[c]
}

// eventTypes lists the async events the node saw so far.
func (n *node) eventTypes() []EventType {
	var out []EventType
	for _, ev := range n.events {
		out = append(out, ev.Type)
	}
	return out
}

// fill writes a recognisable pattern (seeded by seed) into b.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
}

// pattern returns n bytes of fill(seed).
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// ---------------------------------------------------------------------------
// pair: two engines wired by the test.

// fate is what the test wire does with one frame.
type fate uint8

const (
	deliver fate = iota
	drop
	dup  // deliver it twice (back to back)
	hold // keep it until release
)

// dir is one direction of the test wire.
type dir struct {
	name string
	n    int // frames offered so far; the next frame's index
	// fates by frame index; missing indices are delivered.
	fates map[int]fate
	// filter, if set, decides the fate of frames fates does not name.
	filter func(i int, p *wire.Packet) fate
	// log holds a copy of every frame offered, in order.
	log  []frameRec
	held []*link.Buf
}

// frameRec is one frame the wire carried (or dropped).
type frameRec struct {
	idx   int
	at    int64
	bytes []byte
	op    wire.Opcode
	psn   wire.PSN
	fate  fate
}

func (r frameRec) String() string {
	return fmt.Sprintf("#%d %v psn %v (%d B, fate %d)", r.idx, r.op, r.psn, len(r.bytes), r.fate)
}

// set names the fate of frames by index.
func (d *dir) set(f fate, idx ...int) {
	if d.fates == nil {
		d.fates = map[int]fate{}
	}
	for _, i := range idx {
		d.fates[i] = f
	}
}

// ops describes the frames carried, for failure messages.
func (d *dir) ops() string {
	var b strings.Builder
	for _, r := range d.log {
		fmt.Fprintf(&b, "  %v\n", r)
	}
	return b.String()
}

// opcodes lists the opcodes of the frames offered, in order.
func (d *dir) opcodes() []wire.Opcode {
	var out []wire.Opcode
	for _, r := range d.log {
		out = append(out, r.op)
	}
	return out
}

type pair struct {
	t      testing.TB
	A, B   *node
	now    int64
	ab, ba dir
	budget int
}

// newPair builds two nodes with the given configurations and connects
// their QPs to each other (A's sq_psn is B's rq_psn and vice versa).
func newPair(t testing.TB, ca, cb nodeConfig) *pair {
	t.Helper()
	ca.defaults()
	cb.defaults()
	if cb.rqPSN != ca.sqPSN {
		cb.rqPSN = ca.sqPSN
	}
	if ca.rqPSN != cb.sqPSN {
		ca.rqPSN = cb.sqPSN
	}
	p := &pair{t: t, budget: 16}
	p.A = newNode(t, "A", gidA, ca)
	p.B = newNode(t, "B", gidB, cb)
	p.ab.name, p.ba.name = "A->B", "B->A"
	p.A.connect(gidB, p.B.qp.QPN)
	p.B.connect(gidA, p.A.qp.QPN)
	return p
}

// carry moves the frames in from's outbox onto the wire d and delivers to
// to.Receive the ones whose fate says so. It returns how many frames it
// took from the outbox.
func (p *pair) carry(d *dir, from, to *node) int {
	out := from.e.Outbox()
	k := len(out)
	var batch []*link.Buf
	for _, b := range out {
		i := d.n
		d.n++
		f := b.Bytes()
		var pk wire.Packet
		if err := pk.Parse(f); err != nil {
			p.t.Fatalf("%s frame #%d does not parse: %v\n%x", d.name, i, err, f)
		}
		if err := wire.CheckICRC(f); err != nil {
			p.t.Fatalf("%s frame #%d %v: %v", d.name, i, pk.Op, err)
		}
		ft, ok := d.fates[i]
		if !ok && d.filter != nil {
			ft = d.filter(i, &pk)
		}
		d.log = append(d.log, frameRec{idx: i, at: p.now, bytes: bytes.Clone(f), op: pk.Op, psn: pk.BTH.PSN(), fate: ft})
		switch ft {
		case drop:
			b.Release()
		case dup:
			batch = append(batch, b, b.Clone())
		case hold:
			d.held = append(d.held, b)
		default:
			batch = append(batch, b)
		}
	}
	from.e.ClearOutbox()
	if len(batch) > 0 {
		to.e.Receive(p.now, batch)
	}
	for _, n := range []*node{p.A, p.B} {
		if err := checkSQIndices(n.qp); err != nil {
			p.t.Fatal(err)
		}
	}
	return k
}

// release delivers the frames held on d (in the order they were held).
func (p *pair) release(d *dir, to *node) {
	h := d.held
	d.held = nil
	if len(h) > 0 {
		to.e.Receive(p.now, h)
	}
}

// pump runs both engines and carries frames between them until nothing
// moves (no frame in flight, no engine with work). Timers are not fired.
//
// Frames held (fate hold) are delivered at the start of the next round,
// behind nothing and ahead of that round's frames: one round of reordering.
func (p *pair) pump() {
	p.t.Helper()
	for range pumpLimit {
		heldAB, heldBA := len(p.ab.held), len(p.ba.held)
		p.release(&p.ab, p.B)
		p.release(&p.ba, p.A)
		moreA := p.A.e.Run(p.now, p.budget)
		fa := p.carry(&p.ab, p.A, p.B)
		moreB := p.B.e.Run(p.now, p.budget)
		fb := p.carry(&p.ba, p.B, p.A)
		if !moreA && !moreB && fa == 0 && fb == 0 && heldAB == 0 && heldBA == 0 {
			return
		}
	}
	p.t.Fatalf("pump: no quiescence after %d rounds\n%s%s", pumpLimit, p.A.e.DebugState(p.A.qp), p.B.e.DebugState(p.B.qp))
}

// advance moves the virtual clock by d ns, fires due timers on both
// engines and pumps.
func (p *pair) advance(d int64) {
	p.t.Helper()
	p.now += d
	p.A.e.Tick(p.now)
	p.B.e.Tick(p.now)
	p.pump()
}

// nextDeadline returns the earliest timer deadline of either engine.
func (p *pair) nextDeadline() (int64, bool) {
	da, oka := p.A.e.NextDeadline()
	db, okb := p.B.e.NextDeadline()
	switch {
	case oka && okb:
		return min(da, db), true
	case oka:
		return da, true
	}
	return db, okb
}

// settle pumps and then jumps the clock from deadline to deadline (firing
// timers) until no timer is left, at most steps times.
func (p *pair) settle(steps int) {
	p.t.Helper()
	p.pump()
	for range steps {
		d, ok := p.nextDeadline()
		if !ok {
			return
		}
		if d > p.now {
			p.now = d
		}
		p.A.e.Tick(p.now)
		p.B.e.Tick(p.now)
		p.pump()
	}
}

// ---------------------------------------------------------------------------
// solo: one engine, a peer played by hand.

type solo struct {
	t   testing.TB
	n   *node
	now int64
}

// newSolo builds one node whose QP is connected to the hand-played peer
// (gidPeer, peerQPN).
func newSolo(t testing.TB, c nodeConfig) *solo {
	t.Helper()
	s := &solo{t: t, n: newNode(t, "E", gidA, c)}
	s.n.connect(gidPeer, peerQPN)
	return s
}

// hdrs describes a frame the peer sends. Headers the opcode does not carry
// are ignored; those it carries and are nil here are zero.
type hdrs struct {
	Op       wire.Opcode
	PSN      wire.PSN
	AckReq   bool
	SE       bool
	DestQP   uint32 // 0: the solo QP
	PKey     uint16 // 0: the default P_Key
	Pad      int    // -1: use the pad of the payload; otherwise forced
	Src      wire.GID
	RETH     reth
	Atomic   atomicETH
	Imm      uint32
	InvRKey  uint32
	QKey     uint32
	SrcQP    uint32
	Syn      wire.Syndrome
	MSN      uint32
	OrigData uint64
	Payload  []byte
}

type reth struct {
	VA   uint64
	RKey uint32
	Len  uint32
}

type atomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// buildFrame encodes h as a frame from src to dst (IP header to ICRC).
func buildFrame(h hdrs, src, dst wire.GID, destQP uint32) []byte {
	r := wire.Route{Src: src, Dst: dst, SrcPort: 0xC123}
	op := h.Op
	oi := op.Info()
	n := len(h.Payload)
	f := make([]byte, wire.FrameLen(&r, op, n))
	t := f[r.HeaderLen():]
	pad := wire.PadLen(n)
	pkey := h.PKey
	if pkey == 0 {
		pkey = wire.DefaultPKey
	}
	wire.BTH(t).Encode(&wire.BTHFields{Opcode: op, SE: h.SE, PadCount: uint8(pad), PKey: pkey, DestQP: destQP, AckReq: h.AckReq, PSN: h.PSN})
	if o := oi.Offset(wire.HdrDETH); o >= 0 {
		wire.DETH(t[o:]).Encode(h.QKey, h.SrcQP)
	}
	if o := oi.Offset(wire.HdrRETH); o >= 0 {
		wire.RETH(t[o:]).Encode(h.RETH.VA, h.RETH.RKey, h.RETH.Len)
	}
	if o := oi.Offset(wire.HdrAtomicETH); o >= 0 {
		wire.AtomicETH(t[o:]).Encode(h.Atomic.VA, h.Atomic.RKey, h.Atomic.SwapAdd, h.Atomic.Compare)
	}
	if o := oi.Offset(wire.HdrAETH); o >= 0 {
		wire.AETH(t[o:]).Encode(h.Syn, h.MSN)
	}
	if o := oi.Offset(wire.HdrAtomicAckETH); o >= 0 {
		wire.AtomicAckETH(t[o:]).SetOrigData(h.OrigData)
	}
	if o := oi.Offset(wire.HdrImmDt); o >= 0 {
		wire.ImmDt(t[o:]).SetImm(h.Imm)
	}
	if o := oi.Offset(wire.HdrIETH); o >= 0 {
		wire.IETH(t[o:]).SetRKey(h.InvRKey)
	}
	copy(t[oi.HdrLen:], h.Payload)
	r.Finish(f)
	return f
}

// frame builds h as a frame from the peer to the solo QP.
func (s *solo) frame(h hdrs) []byte {
	src := h.Src
	if src.IsZero() {
		src = gidPeer
	}
	dq := h.DestQP
	if dq == 0 {
		dq = s.n.qp.QPN
	}
	return buildFrame(h, src, s.n.gid, dq)
}

// inject delivers frames (one Receive batch) and returns what the engine
// sent in answer, after running it until it has no more work.
func (s *solo) inject(frames ...[]byte) [][]byte {
	s.t.Helper()
	bufs := make([]*link.Buf, len(frames))
	for i, f := range frames {
		b := link.Get(len(f))
		copy(b.Bytes(), f)
		bufs[i] = b
	}
	s.n.e.Receive(s.now, bufs)
	if err := checkSQIndices(s.n.qp); err != nil {
		s.t.Fatal(err)
	}
	return s.run()
}

// send is inject of hdrs.
func (s *solo) send(hs ...hdrs) [][]byte {
	s.t.Helper()
	fs := make([][]byte, len(hs))
	for i, h := range hs {
		fs[i] = s.frame(h)
	}
	return s.inject(fs...)
}

// run runs the engine until it has no work and returns its output frames.
func (s *solo) run() [][]byte {
	s.t.Helper()
	for range pumpLimit {
		if !s.n.e.Run(s.now, 16) {
			break
		}
	}
	return s.take()
}

// take copies and releases the engine's outbox.
func (s *solo) take() [][]byte {
	out := s.n.e.Outbox()
	fs := make([][]byte, len(out))
	for i, b := range out {
		fs[i] = bytes.Clone(b.Bytes())
		b.Release()
	}
	s.n.e.ClearOutbox()
	return fs
}

// tick advances the clock to at, fires timers and runs the engine.
func (s *solo) tickAt(at int64) [][]byte {
	s.t.Helper()
	s.now = at
	s.n.e.Tick(at)
	return s.run()
}

// ---------------------------------------------------------------------------
// Checker DSL (gVisor's checker): expectFrame(t, f, opcode(..), psn(..)).

// frameCheck checks one property of a parsed frame.
type frameCheck func(p *wire.Packet) error

// parse parses a frame and verifies its ICRC, failing the test otherwise.
func parse(t testing.TB, f []byte) *wire.Packet {
	t.Helper()
	p := new(wire.Packet)
	if err := p.Parse(f); err != nil {
		t.Fatalf("frame does not parse: %v\n%x", err, f)
	}
	if err := wire.CheckICRC(f); err != nil {
		t.Fatalf("frame %v: %v", p.Op, err)
	}
	return p
}

// expectFrame parses f and applies every check, reporting all failures.
func expectFrame(t testing.TB, f []byte, checks ...frameCheck) *wire.Packet {
	t.Helper()
	p := parse(t, f)
	var errs []string
	for _, c := range checks {
		if err := c(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		t.Errorf("frame %s:\n  %s", describe(p), strings.Join(errs, "\n  "))
	}
	return p
}

// expectFrames checks that fs holds exactly len(want) frames, each
// passing its checks.
func expectFrames(t testing.TB, fs [][]byte, want ...[]frameCheck) {
	t.Helper()
	if len(fs) != len(want) {
		t.Fatalf("got %d frames, want %d:\n%s", len(fs), len(want), describeAll(fs))
	}
	for i := range fs {
		expectFrame(t, fs[i], want[i]...)
	}
}

// checks groups frame checks (for expectFrames).
func checks(c ...frameCheck) []frameCheck { return c }

func describe(p *wire.Packet) string {
	s := fmt.Sprintf("%v psn %v dqp %#x ackreq %v pad %d len %d", p.Op, p.BTH.PSN(), p.BTH.DestQP(), p.BTH.AckReq(), p.Pad, len(p.Payload))
	if p.AETH != nil {
		s += fmt.Sprintf(" [%v msn %d]", p.AETH.Syndrome(), p.AETH.MSN())
	}
	if p.RETH != nil {
		s += fmt.Sprintf(" [RETH va %#x rkey %#x len %d]", p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen())
	}
	return s
}

func describeAll(fs [][]byte) string {
	var b strings.Builder
	for i, f := range fs {
		var p wire.Packet
		if err := p.Parse(f); err != nil {
			fmt.Fprintf(&b, "  %d: unparsable: %v\n", i, err)
			continue
		}
		fmt.Fprintf(&b, "  %d: %s\n", i, describe(&p))
	}
	return b.String()
}

func opcode(op wire.Opcode) frameCheck {
	return func(p *wire.Packet) error {
		if p.Op != op {
			return fmt.Errorf("opcode %v, want %v", p.Op, op)
		}
		return nil
	}
}

func psn(v uint32) frameCheck {
	return func(p *wire.Packet) error {
		if got := p.BTH.PSN(); got != wire.PSN(v) {
			return fmt.Errorf("PSN %v, want %v", got, v)
		}
		return nil
	}
}

func destQP(q uint32) frameCheck {
	return func(p *wire.Packet) error {
		if got := p.BTH.DestQP(); got != q {
			return fmt.Errorf("DestQP %#x, want %#x", got, q)
		}
		return nil
	}
}

func ackReq(want bool) frameCheck {
	return func(p *wire.Packet) error {
		if got := p.BTH.AckReq(); got != want {
			return fmt.Errorf("AckReq %v, want %v", got, want)
		}
		return nil
	}
}

func solicited(want bool) frameCheck {
	return func(p *wire.Packet) error {
		if got := p.BTH.SE(); got != want {
			return fmt.Errorf("SE %v, want %v", got, want)
		}
		return nil
	}
}

func padCount(n int) frameCheck {
	return func(p *wire.Packet) error {
		if p.Pad != n || p.BTH.PadCount() != n {
			return fmt.Errorf("pad %d (BTH %d), want %d", p.Pad, p.BTH.PadCount(), n)
		}
		return nil
	}
}

func syndrome(s wire.Syndrome) frameCheck {
	return func(p *wire.Packet) error {
		if p.AETH == nil {
			return fmt.Errorf("no AETH, want syndrome %v", s)
		}
		if got := p.AETH.Syndrome(); got != s {
			return fmt.Errorf("syndrome %v (%#x), want %v (%#x)", got, uint8(got), s, uint8(s))
		}
		return nil
	}
}

func msn(m uint32) frameCheck {
	return func(p *wire.Packet) error {
		if p.AETH == nil {
			return fmt.Errorf("no AETH, want MSN %d", m)
		}
		if got := p.AETH.MSN(); got != m {
			return fmt.Errorf("MSN %d, want %d", got, m)
		}
		return nil
	}
}

func payload(b []byte) frameCheck {
	return func(p *wire.Packet) error {
		if !bytes.Equal(p.Payload, b) {
			return fmt.Errorf("payload %d B %x…, want %d B %x…", len(p.Payload), head(p.Payload), len(b), head(b))
		}
		return nil
	}
}

func payloadLen(n int) frameCheck {
	return func(p *wire.Packet) error {
		if len(p.Payload) != n {
			return fmt.Errorf("payload %d B, want %d", len(p.Payload), n)
		}
		return nil
	}
}

func rethIs(va uint64, rkey, length uint32) frameCheck {
	return func(p *wire.Packet) error {
		if p.RETH == nil {
			return fmt.Errorf("no RETH")
		}
		if p.RETH.VA() != va || p.RETH.RKey() != rkey || p.RETH.DMALen() != length {
			return fmt.Errorf("RETH va %#x rkey %#x len %d, want va %#x rkey %#x len %d",
				p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen(), va, rkey, length)
		}
		return nil
	}
}

func origData(v uint64) frameCheck {
	return func(p *wire.Packet) error {
		if p.AtomicAckETH == nil {
			return fmt.Errorf("no AtomicAckETH")
		}
		if got := p.AtomicAckETH.OrigData(); got != v {
			return fmt.Errorf("orig data %#x, want %#x", got, v)
		}
		return nil
	}
}

func head(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}

// Syndromes used throughout (IBTA §9.7.5.1 Table 42/43).
var (
	synACK    = wire.SyndromeACK(wire.CreditsInvalid)
	synSeqErr = wire.SyndromeNAK(wire.NAKPSNSeqErr)       // 0x60
	synInvReq = wire.SyndromeNAK(wire.NAKInvalidRequest)  // 0x61
	synAccErr = wire.SyndromeNAK(wire.NAKRemoteAccessErr) // 0x62
	synOpErr  = wire.SyndromeNAK(wire.NAKRemoteOpErr)     // 0x63
)

// wcString formats completions for failure messages.
func wcString(wcs []WC) string {
	var b strings.Builder
	for _, wc := range wcs {
		fmt.Fprintf(&b, "  wrid %d %v %v len %d flags %#x\n", wc.WRID, wc.Opcode, wc.Status, wc.ByteLen, wc.Flags)
	}
	return b.String()
}

// expectWCs checks completions by (WRID, status) in order.
func expectWCs(t testing.TB, got []WC, want ...WC) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].WRID == want[i].WRID && got[i].Status == want[i].Status && got[i].Opcode == want[i].Opcode
	}
	if !ok {
		t.Fatalf("completions:\n%swant:\n%s", wcString(got), wcString(want))
	}
}

// checkSQIndices checks the send queue invariant the requester documents
// (requester.go, reqState): sq.ci <= compIdx <= next <= sq.pi, in ring
// order, and no negative count of outstanding READs/atomics.
func checkSQIndices(qp *QP) error {
	ci, pi := qp.sq.ci.Load(), qp.sq.pi.Load()
	r := &qp.req
	if r.compIdx-ci > r.next-ci || r.next-ci > pi-ci {
		return fmt.Errorf("QP %#x send queue indices out of order: ci %d compIdx %d next %d pi %d", qp.QPN, ci, r.compIdx, r.next, pi)
	}
	if r.rdAtomic < 0 {
		return fmt.Errorf("QP %#x: %d READ/atomic WQEs outstanding", qp.QPN, r.rdAtomic)
	}
	return nil
}

// hostU64 reads a 64-bit value in host byte order (how atomics leave memory).
func hostU64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

// TestHarnessSmoke checks the harnesses themselves: a pair moves a SEND
// and its ACK, and a solo engine answers a hand-built SEND ONLY with an ACK
// the checker accepts (and a wrong expectation is caught).
func TestHarnessSmoke(t *testing.T) {
	p := newPair(t, nodeConfig{}, nodeConfig{})
	p.B.postRecv(p.B.recvWR(1, 0, 100))
	fill(p.A.mem[:100], 1)
	p.A.post(SendWR{WRID: 7, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 100)}})
	p.pump()
	expectWCs(t, p.A.sendWCs(), WC{WRID: 7, Status: WCSuccess, Opcode: WCSend})
	expectWCs(t, p.B.recvWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCRecv})
	if !bytes.Equal(p.B.mem[:100], p.A.mem[:100]) {
		t.Fatal("payload did not arrive")
	}
	if got := p.ab.opcodes(); len(got) != 1 || got[0] != wire.OpRCSendOnly {
		t.Fatalf("A->B carried %v", got)
	}
	if got := p.ba.opcodes(); len(got) != 1 || got[0] != wire.OpRCAck {
		t.Fatalf("B->A carried %v", got)
	}

	s := newSolo(t, nodeConfig{})
	s.n.postRecv(s.n.recvWR(1, 0, 64))
	out := s.send(hdrs{Op: wire.OpRCSendOnly, PSN: 0, AckReq: true, Payload: pattern(5, 3)})
	expectFrames(t, out, checks(opcode(wire.OpRCAck), psn(0), destQP(peerQPN), syndrome(synACK), msn(1)))

	// The checker must be able to fail.
	ft := &fakeT{TB: t}
	expectFrame(ft, out[0], opcode(wire.OpRCSendOnly), psn(1), msn(7), syndrome(synSeqErr))
	if ft.errors != 1 || !strings.Contains(ft.msg, "opcode") || !strings.Contains(ft.msg, "MSN") {
		t.Fatalf("checker did not report the mismatches: %d errors %q", ft.errors, ft.msg)
	}
}

// fakeT records errors instead of failing (to test the checkers).
type fakeT struct {
	testing.TB
	errors int
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors++
	f.msg += fmt.Sprintf(format, args...)
}
