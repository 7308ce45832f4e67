// Package perf runs perftest-like workloads on simulated NICs in virtual
// time: RDMA WRITE, READ, SEND and atomic bandwidth, and WRITE, READ and
// SEND latency, between pairs of hosts on one switch, with any number of
// QPs, message size, memory footprint and page size.
//
// The host side is modelled as perftest's single thread: posting a work
// request costs the profile's post time and a doorbell MMIO write, seeing
// a completion costs its poll time; a host reacts to a completion when the
// NIC's CQE write becomes visible, and to a peer's RDMA WRITE (the latency
// tests' memory polling) when the written data does.
package perf

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/nicmodel"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/timing"
	"github.com/rnic/rnic/wire"
)

// Test names the workload, as perftest names its programs.
type Test string

const (
	WriteBW  Test = "write_bw"
	ReadBW   Test = "read_bw"
	SendBW   Test = "send_bw"
	AtomicBW Test = "atomic_bw"
	WriteLat Test = "write_lat"
	ReadLat  Test = "read_lat"
	SendLat  Test = "send_lat"
)

// Tests lists the workloads.
var Tests = []Test{WriteBW, ReadBW, SendBW, AtomicBW, WriteLat, ReadLat, SendLat}

func (t Test) latency() bool { return strings.HasSuffix(string(t), "_lat") }

// Spec describes one simulated run. A zero field takes its default; a
// value out of range, or one the test would not honour, makes Run (and
// Validate) fail with a *SpecError rather than run something else.
type Spec struct {
	Test Test
	// Size is the message size in bytes (default 65536 for bandwidth
	// tests, 8 for latency tests; atomic_bw always moves 8).
	Size int
	// QPs is the number of QPs each client uses towards its server.
	QPs int
	// Pairs is the number of client/server host pairs; Incast instead
	// sends from Pairs clients to one server.
	Pairs  int
	Incast bool
	// Iters is the number of operations per QP (bandwidth: posted,
	// latency: round trips); Warmup of them are not measured.
	Iters  int
	Warmup int
	// TxDepth is the number of operations a QP keeps outstanding
	// (bandwidth tests; perftest's -t, default 128). Latency tests keep
	// one and refuse more.
	TxDepth int
	// Footprint is the registered memory per QP, in bytes, at least one
	// message: successive operations move through it (default: one
	// message, at least 64 bytes), so a large footprint spreads accesses
	// over many pages and MTT entries.
	Footprint int
	// MRPerQP registers a memory region per QP (perftest's --mr_per_qp);
	// by default, as perftest, a host registers one region that holds
	// every QP's buffer, so that all QPs share one MPT entry.
	MRPerQP bool
	// Random picks each operation's offset in the footprint uniformly (in
	// message-sized slots, from the run's seeded generator) instead of
	// moving through it in order as perftest does: the access pattern of
	// a key-value store or a parameter server, which defeats the
	// translation caches once the footprint's pages outnumber them.
	// Bandwidth tests only; latency tests ping-pong one buffer and refuse
	// it.
	Random bool
	// PageSize is the MTT page size, a power of two from 4 KiB (the
	// default) to 1 GiB (2 MiB for huge pages).
	PageSize int
	// Inline sends payloads of up to this many bytes inline (perftest's
	// -I; write_lat and send_lat default to 220 as on mlx5, NoInline
	// sends none). Only WRITE and SEND tests carry payload in requests;
	// the others refuse a positive Inline.
	Inline int
	// Threads is the number of application threads per host (default 1,
	// as perftest); QPs are spread over them round-robin.
	Threads int
	// CQMod signals every CQMod-th work request of a bandwidth test
	// (perftest's --cq-mod; default 1: every one); one completion retires
	// the unsignaled ones before it. Latency tests signal every one and
	// refuse more.
	CQMod int
	// Metadata moves lengths only (fast; no byte is checked).
	Metadata bool
	// MRChurn deregisters and re-registers one other memory region on each
	// server every MRChurn nanoseconds (0: none), as a noisy neighbour that
	// invalidates translation-cache entries.
	MRChurn sim.Time
	Seed    uint64
	// Limit bounds the virtual time of the run (default 10 s).
	Limit sim.Time
}

// Result is what a run measured.
type Result struct {
	Spec     Spec
	Elapsed  sim.Time // measured window, virtual time
	Ops      int      // operations completed in the window
	Bytes    int64
	Gbps     float64
	Mops     float64
	Lat      *timing.Histogram // latency tests: one-way (write/send) or round trip (read), ns
	LatMin   sim.Time
	LatAvg   float64
	Errors   int
	Client   NICStats // the first client's NIC
	Server   NICStats // the first server's NIC
	Events   uint64
	WireDrop uint64 // frames the fabric dropped (full queues)
	// Retrans and Timeouts count, over all NICs, packets sent again and
	// retransmission timeouts: what drops cost.
	Retrans, Timeouts uint64
	// Packets is every frame all NICs sent (requests, responses, ACKs):
	// the simulator's unit of work.
	Packets uint64
	// Checked is how many bytes were compared against their source after
	// the run (real-bytes mode); Corrupt how many differed.
	Checked, Corrupt int64
}

// NICStats are one simulated NIC's pipeline statistics.
type NICStats struct {
	QPCHit, QPCMiss, MPTHit, MPTMiss, MTTHit, MTTMiss float64 // counts
	PCIeToHostBytes, PCIeToDeviceBytes                uint64
	PCIeUtilToHost, PCIeUtilToDevice                  float64
	NetBytesTx, NetBytesRx                            int64
	UnitUtil                                          float64
	DMAUtil                                           float64
	MissStallNs                                       sim.Time
	WQEFetched, WQEByMMIO                             int
	RxDrops                                           int
	Counters                                          transport.Counters
}

// NoInline, as Spec.Inline, sends nothing inline (0 takes the test's
// default, which for write_lat and send_lat is 220 bytes).
const NoInline = -1

// SpecError says which parameter of a Spec is not meaningful. Param is
// its name as rnic sim's result columns spell it ("tx_depth"), so that
// the command line can name its flag.
type SpecError struct {
	Param string
	Value any
	Msg   string
}

func (e *SpecError) Error() string { return fmt.Sprintf("perf: %s %v: %s", e.Param, e.Value, e.Msg) }

// Validate reports whether the Spec can run as it says: the first
// parameter that is out of range, or that the test would not honour (a
// latency test keeps one operation outstanding in one buffer), as a
// *SpecError. Zero fields take their defaults and are always valid.
func (s Spec) Validate() error { return s.defaults() }

// defaults fills the zero fields with their defaults and refuses values
// that are out of range or that the test would ignore: a run never
// reports a parameter it did not use.
func (s *Spec) defaults() error {
	bad := func(param string, v any, format string, args ...any) error {
		return &SpecError{Param: param, Value: v, Msg: fmt.Sprintf(format, args...)}
	}
	if s.Test == "" {
		s.Test = WriteBW
	}
	valid := false
	for _, t := range Tests {
		valid = valid || t == s.Test
	}
	if !valid {
		return fmt.Errorf("perf: unknown test %q", s.Test)
	}
	for _, c := range []struct {
		param string
		v     int64
	}{
		{"size", int64(s.Size)}, {"qps", int64(s.QPs)}, {"pairs", int64(s.Pairs)}, {"iters", int64(s.Iters)},
		{"warmup", int64(s.Warmup)}, {"tx_depth", int64(s.TxDepth)}, {"footprint", int64(s.Footprint)},
		{"page_size", int64(s.PageSize)}, {"threads", int64(s.Threads)}, {"cq_mod", int64(s.CQMod)},
		{"mr_churn_ns", int64(s.MRChurn)}, {"limit", int64(s.Limit)},
	} {
		if c.v < 0 {
			return bad(c.param, c.v, "negative")
		}
	}
	if s.Inline < NoInline {
		return bad("inline", s.Inline, "negative")
	}
	lat := s.Test.latency()
	if s.Test == AtomicBW {
		s.Size = 8 // an atomic moves 8 bytes, whatever was asked
	}
	if s.Size == 0 {
		s.Size = 8
		if !lat {
			s.Size = 65536
		}
	}
	if s.QPs == 0 {
		s.QPs = 1
	}
	if s.Pairs == 0 {
		s.Pairs = 1
	}
	if s.Iters == 0 {
		s.Iters = 1000
	}
	if s.Warmup >= s.Iters {
		return bad("warmup", s.Warmup, "want fewer than iters (%d): warmup operations are not measured", s.Iters)
	}
	switch {
	case lat && s.TxDepth > 1:
		return bad("tx_depth", s.TxDepth, "%s keeps one operation outstanding (a ping-pong)", s.Test)
	case lat && s.CQMod > 1:
		return bad("cq_mod", s.CQMod, "%s signals every operation (it waits for each one)", s.Test)
	case lat && s.Random:
		return bad("random", true, "%s ping-pongs one buffer; random offsets apply to bandwidth tests", s.Test)
	}
	if s.TxDepth == 0 {
		s.TxDepth = 128
		if lat {
			s.TxDepth = 1
		}
	}
	if s.Footprint == 0 {
		s.Footprint = max(s.Size, 64)
	} else if s.Footprint < s.Size {
		return bad("footprint", s.Footprint, "smaller than one message (size %d)", s.Size)
	}
	if s.PageSize == 0 {
		s.PageSize = 4096
	} else if s.PageSize&(s.PageSize-1) != 0 || s.PageSize < 4096 || s.PageSize > 1<<30 {
		return bad("page_size", s.PageSize, "want a power of two from 4K to 1G")
	}
	switch {
	case s.Inline == NoInline:
		s.Inline = 0
	case s.Inline > 0 && s.Test != WriteBW && s.Test != WriteLat && s.Test != SendBW && s.Test != SendLat:
		return bad("inline", s.Inline, "%s sends no payload with its requests (only WRITE and SEND data goes inline)", s.Test)
	case s.Inline == 0 && (s.Test == WriteLat || s.Test == SendLat):
		s.Inline = 220
	}
	if s.Limit == 0 {
		s.Limit = 10 * sim.Second
	}
	if s.Threads == 0 {
		s.Threads = 1
	}
	if s.CQMod == 0 {
		s.CQMod = 1
	}
	if s.TxDepth < s.CQMod {
		return bad("tx_depth", s.TxDepth, "below the completion moderation (cq_mod %d): the queue would fill before a completion frees it", s.CQMod)
	}
	return nil
}

// host is one simulated machine: a NIC and the application's threads.
type host struct {
	nic  *nicmodel.NIC
	cpus []timing.FIFO // the application threads
	pd   uint32
	mrs  []uint32 // per QP
	base []uint64 // per QP: region's address
	buf  [][]byte
	nqp  int // QPs this host will have
	// shared is the one region of every QP's buffer (not MRPerQP).
	shared struct {
		ok   bool
		key  uint32
		iova uint64
		buf  []byte
	}
	cq   *transport.CQ
	qps  []*qpRun
	byQP map[uint32]*qpRun
	run  *runner
	wcs  []transport.WC
}

// qpRun is one QP of a test and its progress.
type qpRun struct {
	h        *host
	qp       *transport.QP
	idx      int
	peer     *qpRun
	client   bool
	raddr    uint64
	rkey     uint32
	posted   int
	done     int
	off      int
	touched  []bool     // Random in real-bytes mode: slots written or read
	started  []sim.Time // latency: when each round trip started
	recvs    int
	pingSeen int
	cpu      *timing.FIFO // the thread that drives this QP
	queued   int          // posts scheduled on the thread, not yet made
	postReq  sim.Time     // when the thread last started a post
	lastOff  int          // offset of the last message posted
	wr       [1]transport.SendWR
	sge      [1]transport.SGE
}

// Run runs one workload.
func Run(p *profile.HardwareProfile, spec Spec) (*Result, error) {
	if err := spec.defaults(); err != nil {
		return nil, err
	}
	r := &runner{spec: spec, prof: p, s: sim.New(spec.Seed), lat: timing.Histogram{Bits: 7}}
	if err := r.build(); err != nil {
		return nil, err
	}
	return r.run()
}

type runner struct {
	spec    Spec
	prof    *profile.HardwareProfile
	s       *sim.Sim
	fab     *fabric.Fabric
	clients []*host
	servers []*host
	hosts   []*host

	measuring  bool
	winStart   sim.Time
	winEnd     sim.Time
	ops        int
	bytes      int64
	lat        timing.Histogram
	latMin     sim.Time
	latSum     float64
	latN       int
	errors     int
	finished   int // QPs done
	totalQPs   int
	churnTimer *sim.Timer
	trace      func(at sim.Time, h *host, what string) // host-side stages (breakdown)
}

// Event kinds of the runner.
const (
	evStart int32 = iota
	evPost        // the host thread posts for a QP (Ptr: *qpRun)
	evChurn
)

func (r *runner) build() error {
	sp := &r.spec
	fab, err := fabric.New(r.s, r.prof.FabricConfig())
	if err != nil {
		return err
	}
	r.fab = fab
	nClients := sp.Pairs
	nServers := sp.Pairs
	if sp.Incast {
		nServers = 1
	}
	addrs := fabric.HostAddrs(nClients + nServers)
	for i, a := range addrs {
		h, err := r.newHost(a)
		if err != nil {
			return err
		}
		if i < nClients {
			h.nqp = sp.QPs
			r.clients = append(r.clients, h)
		} else {
			h.nqp = sp.QPs * nClients / nServers
			r.servers = append(r.servers, h)
		}
		r.hosts = append(r.hosts, h)
	}
	for ci, c := range r.clients {
		srv := r.servers[ci%len(r.servers)]
		for q := 0; q < sp.QPs; q++ {
			a, err := c.newQP(true)
			if err != nil {
				return err
			}
			b, err := srv.newQP(false)
			if err != nil {
				return err
			}
			a.peer, b.peer = b, a
			if err := connect(a, b, sp); err != nil {
				return err
			}
			r.totalQPs++
		}
	}
	if sp.MRChurn > 0 {
		r.churnTimer = r.s.NewTimer(r, evChurn, 0)
		r.churnTimer.Reset(sp.MRChurn)
	}
	return nil
}

func (r *runner) newHost(a netip.Addr) (*host, error) {
	port, err := r.fab.AddHost(a)
	if err != nil {
		return nil, err
	}
	qps := r.spec.QPs * r.spec.Pairs
	nic, err := nicmodel.New(r.s, nicmodel.Config{Profile: r.prof, Port: port, Metadata: r.spec.Metadata,
		MaxQP: qps + 16, MaxCQ: 16, MaxMR: qps + 16, PageShift: pageShift(r.spec.PageSize)})
	if err != nil {
		return nil, err
	}
	h := &host{nic: nic, pd: 1, run: r, byQP: map[uint32]*qpRun{}, wcs: make([]transport.WC, 64),
		cpus: make([]timing.FIFO, r.spec.Threads)}
	cqn, idx, _ := nic.CQs.Alloc()
	h.cq = transport.NewCQ(cqn, 1<<16)
	nic.CQs.Set(idx, h.cq)
	nic.SetCQEHandler(h)
	if r.spec.Test == WriteLat {
		// Only write_lat waits for written data (perftest polls the
		// buffer); elsewhere the NIC need not schedule its visibility.
		nic.SetWriteHandler(h)
	}
	return h, nil
}

func pageShift(n int) uint8 {
	s := uint8(0)
	for 1<<s < n {
		s++
	}
	return s
}

// newQP creates a QP with its buffer: a region of its own (MRPerQP) or
// its slice of the host's one region.
func (h *host) newQP(client bool) (*qpRun, error) {
	sp := &h.run.spec
	qpn, slot, ok := h.nic.QPs.Alloc()
	if !ok {
		return nil, errors.New("perf: out of QPs")
	}
	var qp *transport.QP
	var err error
	depth := uint32(max(sp.TxDepth*2, 16))
	qp, err = h.nic.Engine.CreateQP(&transport.QPInit{Type: transport.RC, PD: h.pd, SendCQ: h.cq, RecvCQ: h.cq,
		Cap: transport.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(max(sp.Inline, 0))}}, qpn, slot)
	if err != nil {
		return nil, err
	}
	q := &qpRun{h: h, qp: qp, idx: len(h.qps), client: client}
	if client && sp.Random && !sp.Metadata && !sp.Test.latency() {
		q.touched = make([]bool, sp.Footprint/sp.Size)
	}
	q.cpu = &h.cpus[q.idx%len(h.cpus)]
	key, iova, buf, err := h.region(q.idx)
	if err != nil {
		return nil, err
	}
	h.mrs = append(h.mrs, key)
	h.base = append(h.base, iova)
	h.buf = append(h.buf, buf)
	h.qps = append(h.qps, q)
	h.byQP[qp.QPN] = q
	return q, nil
}

// region returns the memory of the host's i-th QP: its key, address and
// bytes (nil in metadata mode).
func (h *host) region(i int) (key uint32, iova uint64, buf []byte, err error) {
	sp := &h.run.spec
	fp := sp.Footprint
	if sp.MRPerQP || !h.shared.ok {
		n := fp
		if !sp.MRPerQP {
			n = fp * h.nqp
		}
		spec := atu.MRSpec{PD: h.pd, IOVA: uint64(len(h.mrs)+1) << 40, PageShift: pageShift(sp.PageSize),
			Access: atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead | atu.RemoteAtomic}
		if sp.Metadata {
			spec.Length = uint64(n)
		} else {
			spec.Buf = make([]byte, n)
		}
		k, err := h.nic.ATU.RegMR(spec)
		if err != nil {
			return 0, 0, nil, err
		}
		if sp.MRPerQP {
			return k, spec.IOVA, spec.Buf, nil
		}
		h.shared.ok, h.shared.key, h.shared.iova, h.shared.buf = true, k, spec.IOVA, spec.Buf
	}
	iova = h.shared.iova + uint64(i*fp)
	if h.shared.buf != nil {
		buf = h.shared.buf[i*fp : (i+1)*fp : (i+1)*fp]
	}
	return h.shared.key, iova, buf, nil
}

// connect moves both QPs to RTS, connected to each other.
func connect(a, b *qpRun, sp *Spec) error {
	mtu, _ := wire.MTUFromBytes(a.h.run.prof.Link.MTUBytes)
	for _, x := range []*qpRun{a, b} {
		y := x.peer
		e := x.h.nic.Engine
		steps := []struct {
			a    transport.QPAttr
			mask transport.AttrMask
		}{
			{transport.QPAttr{State: transport.QPSInit, Port: 1, AccessFlags: atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead | atu.RemoteAtomic},
				transport.AttrState | transport.AttrPKeyIndex | transport.AttrPort | transport.AttrAccessFlags},
			{transport.QPAttr{State: transport.QPSRTR, AV: wire.Route{Dst: y.h.nic.GID()}, PathMTU: mtu, DestQPN: y.qp.QPN,
				RQPSN: 0, MaxDestRdAtomic: 16, MinRNRTimer: 12},
				transport.AttrState | transport.AttrAV | transport.AttrPathMTU | transport.AttrDestQPN | transport.AttrRQPSN |
					transport.AttrMaxDestRdAtomic | transport.AttrMinRNRTimer},
			{transport.QPAttr{State: transport.QPSRTS, SQPSN: 0, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
				transport.AttrState | transport.AttrSQPSN | transport.AttrTimeout | transport.AttrRetryCnt |
					transport.AttrRNRRetry | transport.AttrMaxQPRdAtomic},
		}
		for _, s := range steps {
			if err := e.Modify(x.qp, &s.a, s.mask); err != nil {
				return err
			}
		}
		x.raddr = y.h.base[y.idx]
		x.rkey = y.h.mrs[y.idx]
	}
	return nil
}

func (r *runner) run() (*Result, error) {
	r.latMin = sim.Never
	r.fillPatterns()
	for _, c := range r.clients {
		for _, q := range c.qps {
			r.s.Schedule(sim.Event{At: 0, Kind: evStart, Ptr: q, H: r})
		}
	}
	for _, s := range r.servers {
		for _, q := range s.qps {
			r.s.Schedule(sim.Event{At: 0, Kind: evStart, Ptr: q, H: r})
		}
	}
	r.s.RunUntil(r.spec.Limit)
	if r.finished < r.totalQPs {
		return nil, fmt.Errorf("perf: %s did not finish in %v of virtual time (%d of %d QPs done, %d errors)",
			r.spec.Test, r.spec.Limit, r.finished, r.totalQPs, r.errors)
	}
	res := &Result{Spec: r.spec, Elapsed: r.winEnd - r.winStart, Ops: r.ops, Bytes: r.bytes, Errors: r.errors,
		Events: r.s.Events(), Lat: &r.lat}
	if res.Elapsed > 0 {
		sec := float64(res.Elapsed) / 1e9
		res.Gbps = float64(res.Bytes) * 8 / sec / 1e9
		res.Mops = float64(res.Ops) / sec / 1e6
	}
	if r.latN > 0 {
		res.LatMin = r.latMin
		res.LatAvg = r.latSum / float64(r.latN)
	}
	res.Client = stats(r.clients[0].nic, r.winEnd)
	res.Server = stats(r.servers[0].nic, r.winEnd)
	for _, h := range r.hosts {
		c := h.nic.Engine.Counters()
		res.Packets += c[transport.TxPackets]
		res.Retrans += c[transport.RetransPackets]
		res.Timeouts += c[transport.LocalAckTimeoutErr]
	}
	for id := range r.fab.Hosts() {
		p := r.fab.Host(fabric.HostID(id))
		res.WireDrop += p.UplinkStats().Drops + p.SwitchPortStats().Drops
	}
	if !r.spec.Metadata {
		res.Checked, res.Corrupt = r.check()
		if res.Corrupt > 0 {
			return res, fmt.Errorf("perf: %d of %d bytes differ from their source after %s", res.Corrupt, res.Checked, r.spec.Test)
		}
	}
	return res, nil
}

// fillPatterns gives every region a distinct seeded byte pattern, so that
// the data check after the run sees where each byte came from.
func (r *runner) fillPatterns() {
	if r.spec.Metadata {
		return
	}
	rng := r.s.Rand()
	for _, h := range r.hosts {
		for _, b := range h.buf {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		}
	}
}

// check compares what the bandwidth tests moved with its source: for
// WRITE and SEND the server's region against the client's, for READ the
// client's against the server's, over the bytes the operations covered.
// Latency tests write both ways into the same bytes, and atomics target
// counters: neither has a source to compare with.
func (r *runner) check() (checked, corrupt int64) {
	sp := &r.spec
	span := min(sp.Footprint, sp.Iters*sp.Size)
	for _, c := range r.clients {
		for _, q := range c.qps {
			var src, dst []byte
			switch sp.Test {
			case SendBW:
				// Every message lands at the start of the receive buffer,
				// so it holds the last one sent.
				src, dst = c.buf[q.idx][q.lastOff:q.lastOff+sp.Size], q.peer.h.buf[q.peer.idx][:sp.Size]
				checked, corrupt = checked+int64(sp.Size), corrupt+differ(src, dst)
				continue
			case WriteBW:
				src, dst = c.buf[q.idx], q.peer.h.buf[q.peer.idx]
			case ReadBW:
				src, dst = q.peer.h.buf[q.peer.idx], c.buf[q.idx]
			default:
				continue
			}
			if q.touched == nil {
				n := min(span, len(src), len(dst))
				checked, corrupt = checked+int64(n), corrupt+differ(src[:n], dst[:n])
				continue
			}
			// Random offsets: compare the slots operations covered.
			for slot, t := range q.touched {
				if t {
					from, to := slot*sp.Size, (slot+1)*sp.Size
					checked, corrupt = checked+int64(sp.Size), corrupt+differ(src[from:to], dst[from:to])
				}
			}
		}
	}
	return checked, corrupt
}

// differ counts the positions where a and b (of equal length) differ.
func differ(a, b []byte) int64 {
	var n int64
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func stats(n *nicmodel.NIC, end sim.Time) NICStats {
	qpc, _ := n.Engine.CacheStats()
	a := n.ATU.Stats()
	ps := n.PCIe().Stats()
	c := n.Costs()
	var st NICStats
	st.QPCHit, st.QPCMiss = float64(qpc.Hits), float64(qpc.Misses)
	st.MPTHit, st.MPTMiss = float64(a.MPT.Hits), float64(a.MPT.Misses)
	st.MTTHit, st.MTTMiss = float64(a.MTT.Hits), float64(a.MTT.Misses)
	st.PCIeToHostBytes, st.PCIeToDeviceBytes = ps.ToHost.Bytes, ps.ToDevice.Bytes
	if end > 0 {
		st.PCIeUtilToHost = ps.ToHost.Utilization(int64(end) * 1000)
		st.PCIeUtilToDevice = ps.ToDevice.Utilization(int64(end) * 1000)
		u := n.Units()
		st.UnitUtil = float64(u.Stats().Busy) / float64(int64(end)*int64(u.Len()))
		d := n.DMAEngines()
		st.DMAUtil = float64(d.Stats().Busy) / float64(int64(end)*int64(d.Len()))
	}
	cnt := n.Engine.Counters()
	st.Counters = cnt
	st.NetBytesTx, st.NetBytesRx = int64(cnt[transport.TxBytes]), int64(cnt[transport.RxBytes])
	st.MissStallNs = c.MissStall
	st.WQEFetched, st.WQEByMMIO = c.WQEFetched, c.WQEByMMIO
	st.RxDrops = c.RxDrops
	return st
}

// Handle is the runner's event handler: starting a QP, posting, churn.
func (r *runner) Handle(s *sim.Sim, ev sim.Event) {
	switch ev.Kind {
	case evStart:
		q := ev.Ptr.(*qpRun)
		q.start()
	case evPost:
		q := ev.Ptr.(*qpRun)
		q.post()
	case evChurn:
		r.churn()
		r.churnTimer.Reset(s.Now() + r.spec.MRChurn)
	}
}

// qpFinished counts a QP that completed its iterations. When the last
// one does, the churning neighbour stops too: its timer would otherwise
// keep the simulation running until the time limit.
func (r *runner) qpFinished() {
	r.finished++
	if r.finished == r.totalQPs && r.churnTimer != nil {
		r.churnTimer.Stop()
	}
}

// churn registers and deregisters a region on each server: the host
// table changes invalidate the NIC's MPT and MTT cache entries of that
// region, and the registration's pages evict others.
func (r *runner) churn() {
	for _, h := range r.servers {
		spec := atu.MRSpec{PD: h.pd, IOVA: 1 << 50, Length: 1 << 20, Access: atu.LocalWrite}
		key, err := h.nic.ATU.RegMR(spec)
		if err != nil {
			r.errors++
			continue
		}
		// Touch it as an application would (its translations enter the
		// caches), then deregister.
		h.nic.ATU.Translate(&atu.Request{Key: key, PD: h.pd, VA: 1 << 50, Len: 1 << 20, Access: atu.LocalRead}, nil)
		if err := h.nic.ATU.DeregMR(key); err != nil {
			r.errors++
		}
	}
}

// measure records a completed operation.
func (r *runner) measure(q *qpRun, bytes int) {
	now := r.s.Now()
	if q.done == r.spec.Warmup && !r.measuring {
		r.measuring = true
		r.winStart = now
	}
	if q.done > r.spec.Warmup {
		r.ops++
		r.bytes += int64(bytes)
	}
	r.winEnd = max(r.winEnd, now)
}

// sortedQPNs returns a host's QP numbers in order (determinism).
func (h *host) sortedQPNs() []uint32 {
	out := make([]uint32, 0, len(h.byQP))
	for k := range h.byQP {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
