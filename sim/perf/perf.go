// Package perf runs perftest's workloads on simulated NICs in virtual
// time: RDMA WRITE, READ, SEND and atomic bandwidth, and WRITE, READ and
// SEND latency, between pairs of hosts on one switch, with any number of
// QPs, message size, memory footprint and page size. It is the workload
// engine of `rnic sim`.
//
// A run is a Go program on the public API in virtual time: an
// rnic.VirtualClock of the hardware profile, a device per host
// (rnic.Open with Options.Clock), each host's application threads as the
// clock's threads, QPs connected with QP.Connect. Each thread runs
// package perftest's own loop over its QPs (perftest.RunWorker: the
// run_iter_bw, run_iter_lat_write, ... that ib_write_bw and friends run),
// so the workloads exist once, for both clocks: it posts (the profile's
// post time, then the doorbell), sleeps on its CQ until the model makes
// completions visible and takes up to 16 per poll (perftest's
// CTX_POLL_BATCH, the poll time each), and in write_lat waits for the
// peer's WRITE. What a run measures comes from the loop's observer on
// the clock's time: an operation when the thread sees it, as perftest
// stamps it after ibv_poll_cq, and a latency sample as the time between
// two posts, as perftest measures it. What perftest has no flag for —
// many hosts, incasts, tenants with start and stop times and rates,
// random offsets, atomics on one word, a receive poster at a rate, MR
// churn — is the Worker's additions and this package's world. Metadata
// mode is the clock's (sim/vclock's Options.Metadata); the model's
// statistics come from sim/vclock's public statistics of a device
// (ReadStats, ObserveSteps, ObserveRates, Trace), the NIC's counters from
// rnic.Device.Counters.
package perf

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/perftest"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/timing"
	"github.com/rnic/rnic/sim/vclock"
)

// Test names the workload: one of perftest's programs (package perftest
// defines the seven, for both clocks).
type Test = perftest.Test

// The workloads.
const (
	WriteBW  = perftest.WriteBW
	ReadBW   = perftest.ReadBW
	SendBW   = perftest.SendBW
	AtomicBW = perftest.AtomicBW
	WriteLat = perftest.WriteLat
	ReadLat  = perftest.ReadLat
	SendLat  = perftest.SendLat
)

// Tests lists the workloads.
var Tests = perftest.Tests()

// latency reports whether t is a ping-pong (one operation outstanding).
func latency(t Test) bool { return t.Kind() == perftest.LAT }

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
	// PostList is how many send work requests a bandwidth test posts in
	// one call, with one doorbell (perftest's -l; default 1): a QP posts
	// when that many slots of its queue are free. As perftest, Iters must
	// be a multiple of it, and it a multiple of CQMod.
	PostList int
	// RxDepth is how many receives a SEND test's server keeps posted: it
	// posts that many first and one more for each receive completion it
	// polls (perftest's -r; default min(iters, 2 × tx_depth)). Below the
	// sends in flight the receive queue runs dry and the responder sends
	// RNR NAKs, whose timers run in virtual time.
	RxDepth int
	// TrafficClass is the IP traffic class (DSCP << 2) of the QPs'
	// packets, perftest's --tclass: the fabric's priority is DSCP/8
	// (104, DSCP 26, is priority 3, RoCE's usual lossless one). The ECN
	// bits are the NIC's.
	TrafficClass int
	// RecvEvery makes a send_bw server post its receives at a rate, as a
	// program with a thread of its own for them would: after the first
	// RxDepth, one more on each QP every RecvEvery (while fewer than
	// RxDepth are outstanding), instead of one per receive completion.
	// Slower than the SENDs come, the receive queue runs dry. 0: on
	// completion. Other tests refuse it.
	RecvEvery sim.Time
	// Footprint is the registered memory per QP, in bytes, at least one
	// message: successive operations move through it as perftest moves
	// through its cycle buffer, a message every size rounded up to 64
	// bytes, if it holds two messages or more (default: one message, at
	// least 64 bytes; atomic_bw 512, eight words a cache line apart), so
	// a large footprint spreads accesses over many pages and MTT entries.
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
	// as perftest); QPs are spread over them round-robin. perftest's
	// latency loops run one QP: a latency test gives each QP a thread of
	// its own.
	Threads int
	// CQMod signals every CQMod-th work request of a bandwidth test
	// (perftest's --cq-mod; default 1: every one); one completion retires
	// the unsignaled ones before it. Latency tests signal every one and
	// refuse more.
	CQMod int
	// Metadata moves lengths only (fast; no byte is checked).
	Metadata bool
	// AtomicType is atomic_bw's operation, as perftest's -A:
	// FETCH_AND_ADD (the default; each adds 1) or CMP_AND_SWAP
	// (perftest's: compare 0, swap 0). Other tests refuse it.
	AtomicType string
	// AtomicTarget is where atomic_bw's operations go: AtomicSpread (the
	// default: each QP moves through its footprint, as the other tests
	// do), AtomicPerQP (one address per QP: the first word of its peer's
	// buffer) or AtomicShared (every QP of every client to one address
	// of its server: the first word of the server's first buffer).
	// Other tests refuse it.
	AtomicTarget string
	// MRChurn deregisters and re-registers one other memory region on each
	// server every MRChurn nanoseconds (0: none), as a noisy neighbour that
	// invalidates translation-cache entries.
	MRChurn sim.Time
	Seed    uint64
	// Limit bounds the virtual time of the run (default 10 s).
	Limit sim.Time
	// TimelineQP is the client QP whose congestion-control rate the
	// timeline follows (TimelinePoint.RateGbps): 0-based, counted client
	// by client (the second client's first QP is QPs); default the first.
	TimelineQP int
	// TimelinePort is the egress port whose queue the timeline follows
	// (TimelinePoint.QueueBytes), named as Result.Ports names it:
	// fabric.PortName, NODE:PORT ("leaf0:3", "host 2:0" for host 2's
	// uplink); default the switch port towards the first server.
	TimelinePort string
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
	// ECNMarked is the frames the fabric marked Congestion Experienced.
	ECNMarked uint64
	// QueueMaxBytes is the deepest the switch's port towards the first
	// server got (its queue, the frame being sent included).
	QueueMaxBytes int
	// QueuePort names the port the timeline's QueueBytes follows
	// (Spec.TimelinePort, or the port towards the first server).
	QueuePort string
	// PFC: pause frames the switches sent, how long the hosts' uplinks
	// were paused (summed over hosts), and lossless frames dropped for
	// want of headroom.
	PFCPauses     uint64
	PFCPaused     sim.Time
	HeadroomDrops uint64
	// Ports are the fabric's egress ports and their counters (the whole
	// fabric's, the same in every tenant's result).
	Ports []fabric.PortInfo
	// UplinkQueueMaxBytes is the deepest any host's uplink queue got:
	// what a NIC handed to its port before the wire (or a pause) took it.
	UplinkQueueMaxBytes int
	// Retrans and Timeouts count, over all NICs, packets sent again and
	// retransmission timeouts: what drops cost.
	Retrans, Timeouts uint64
	// Packets is every frame all NICs sent (requests, responses, ACKs):
	// the simulator's unit of work.
	Packets uint64
	// Checked is how many bytes were compared against their source after
	// the run (real-bytes mode); Corrupt how many differed.
	Checked, Corrupt int64
	// Jain is Jain's fairness index of the client QPs' rates, each its
	// measured bytes over the time from the window's start to its last
	// completion: 1 when they all finish together, 1/n when one QP has
	// the link to itself.
	Jain float64
	// Tenant is the tenant's name in a scenario ("" for a plain run), and
	// Timeline what it completed over virtual time.
	Tenant   string
	Timeline []TimelinePoint
}

// NICStats are one simulated NIC's pipeline statistics (sim/vclock's
// public statistics of a device of the clock).
type NICStats = vclock.Stats

// Atomic operations (Spec.AtomicType), as perftest names them.
const (
	FetchAndAdd = "FETCH_AND_ADD"
	CmpAndSwap  = "CMP_AND_SWAP"
)

// Atomic targets (Spec.AtomicTarget).
const (
	AtomicSpread = "spread"
	AtomicPerQP  = "qp"
	AtomicShared = "shared"
)

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
	if !s.Test.Valid() {
		return fmt.Errorf("perf: unknown test %v", s.Test)
	}
	for _, c := range []struct {
		param string
		v     int64
	}{
		{"size", int64(s.Size)}, {"qps", int64(s.QPs)}, {"pairs", int64(s.Pairs)}, {"iters", int64(s.Iters)},
		{"warmup", int64(s.Warmup)}, {"tx_depth", int64(s.TxDepth)}, {"post_list", int64(s.PostList)}, {"rx_depth", int64(s.RxDepth)}, {"footprint", int64(s.Footprint)},
		{"page_size", int64(s.PageSize)}, {"threads", int64(s.Threads)}, {"cq_mod", int64(s.CQMod)},
		{"mr_churn_ns", int64(s.MRChurn)}, {"recv_every_ns", int64(s.RecvEvery)}, {"limit", int64(s.Limit)},
		{"tclass", int64(s.TrafficClass)}, {"timeline_qp", int64(s.TimelineQP)},
	} {
		if c.v < 0 {
			return bad(c.param, c.v, "negative")
		}
	}
	if s.TrafficClass > 255 {
		return bad("tclass", s.TrafficClass, "not a traffic class (0 to 255)")
	}
	if s.Inline < NoInline {
		return bad("inline", s.Inline, "negative")
	}
	lat := latency(s.Test)
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
	if s.TimelineQP >= s.QPs*s.Pairs {
		return bad("timeline_qp", s.TimelineQP, "want one of the %d client QPs (qps %d times %d clients), 0-based", s.QPs*s.Pairs, s.QPs, s.Pairs)
	}
	if s.TimelinePort != "" && !strings.Contains(s.TimelinePort, ":") {
		return bad("timeline_port", s.TimelinePort, "want NODE:PORT as the ports table names a port (switch:0, leaf1:3, host 2:0)")
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
	case lat && s.PostList > 1:
		return bad("post_list", s.PostList, "%s posts one operation at a time", s.Test)
	case s.RecvEvery > 0 && s.Test != SendBW:
		return bad("recv_every_ns", time.Duration(s.RecvEvery), "%s's server posts no receives at a rate (send_bw's does)", s.Test)
	}
	if s.TxDepth == 0 {
		s.TxDepth = 128
		if lat {
			s.TxDepth = 1
		}
	}
	if s.Footprint == 0 {
		s.Footprint = max(s.Size, 64)
		if s.Test == AtomicBW {
			// Eight cache lines: perftest moves through its buffer a
			// cache line at a time, and spread atomics need distinct
			// words (one word would serialize them as AtomicShared).
			s.Footprint = 8 * 64
		}
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
	switch {
	case s.Test != AtomicBW && s.AtomicType != "":
		return bad("atomic_type", s.AtomicType, "%s runs no atomics", s.Test)
	case s.Test != AtomicBW && s.AtomicTarget != "":
		return bad("atomic_target", s.AtomicTarget, "%s runs no atomics", s.Test)
	case s.Test == AtomicBW:
		if s.AtomicType == "" {
			s.AtomicType = FetchAndAdd
		}
		if s.AtomicTarget == "" {
			s.AtomicTarget = AtomicSpread
		}
		if s.AtomicType != FetchAndAdd && s.AtomicType != CmpAndSwap {
			return bad("atomic_type", s.AtomicType, "want %s or %s", FetchAndAdd, CmpAndSwap)
		}
		if s.AtomicTarget != AtomicSpread && s.AtomicTarget != AtomicPerQP && s.AtomicTarget != AtomicShared {
			return bad("atomic_target", s.AtomicTarget, "want %s, %s or %s", AtomicSpread, AtomicPerQP, AtomicShared)
		}
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
	if s.PostList == 0 {
		s.PostList = 1
	}
	if s.RxDepth == 0 {
		s.RxDepth = min(s.Iters, s.TxDepth*2)
	}
	if s.PostList > 1 && s.Iters%s.PostList != 0 {
		return bad("post_list", s.PostList, "iters (%d) is not a multiple of it (perftest's rule: every list is whole)", s.Iters)
	}
	if s.PostList > 1 && s.PostList%s.CQMod != 0 {
		return bad("post_list", s.PostList, "not a multiple of cq_mod (%d) (perftest's rule: a list ends with a signaled work request)", s.CQMod)
	}
	if s.PostList > s.TxDepth {
		return bad("post_list", s.PostList, "above tx_depth (%d): a list must fit in the send queue", s.TxDepth)
	}
	if s.TxDepth < s.CQMod {
		return bad("tx_depth", s.TxDepth, "below the completion moderation (cq_mod %d): the queue would fill before a completion frees it", s.CQMod)
	}
	return nil
}

// host is a workload's part of one machine: the machine's device (shared
// with the other tenants there), and the workload's own PD, regions and
// application threads.
type host struct {
	dev  *rnic.Device
	m    *machine
	pd   *rnic.PD
	mrs  []*rnic.MR // per QP: its region (its own, or the host's one)
	base []uint64   // per QP: its buffer's address
	buf  [][]byte
	nqp  int // QPs this host will have
	// shared is the one region of every QP's buffer (not MRPerQP).
	shared  *rnic.MR
	threads []*thread
	qps     []*qpRun
	run     *runner
	churn   []byte // MRChurn's region, with real bytes
}

// qpRun is one QP of a test and what its thread's loop reported of it.
type qpRun struct {
	h        *host
	qp       *rnic.QP
	idx      int
	peer     *qpRun
	client   bool
	rkey     uint32
	done     int      // a client's operations completed
	measured int64    // bytes of its operations in the measured window
	lastAt   sim.Time // when its last measured operation completed
	touched  []bool   // Random in real-bytes mode: slots written or read
	posts    int      // latency: posts so far
	lastPost sim.Time // latency: when it last posted
	over     bool     // its part is done
	lastOff  int      // offset of the last message posted
}

// Run runs one workload.
func Run(p *profile.HardwareProfile, spec Spec) (*Result, error) {
	r, err := single(p, spec)
	if err != nil {
		return nil, err
	}
	res, err := r.w.run()
	return res[0], err
}

// single builds the world of one workload: its clients on the first
// hosts, its servers on the next (one for an incast).
func single(p *profile.HardwareProfile, spec Spec) (*runner, error) {
	if err := spec.defaults(); err != nil {
		return nil, err
	}
	r := newRunner(spec)
	nServers := spec.Pairs
	if spec.Incast {
		nServers = 1
	}
	for i := range spec.Pairs {
		r.clientIdx = append(r.clientIdx, i)
	}
	for i := range nServers {
		r.serverIdx = append(r.serverIdx, spec.Pairs+i)
	}
	if _, err := newWorld(p, spec.Pairs+nServers, spec.Seed, spec.Metadata, spec.Limit, spec.TimelinePort, []*runner{r}, false); err != nil {
		return nil, err
	}
	return r, nil
}

func newRunner(spec Spec) *runner { return &runner{spec: spec, lat: timing.Histogram{Bits: 7}} }

// runner is one workload (a tenant of its world): its hosts on the
// world's machines, its QPs, and what it measured.
type runner struct {
	spec    Spec
	w       *world
	vc      *rnic.VirtualClock
	clients []*host
	servers []*host
	hosts   []*host
	// The machines of its clients and servers (indices in the world).
	clientIdx, serverIdx []int
	// A tenant's name, its start and stop times, its posting rate per QP
	// (0: as fast as tx_depth lets it) and its service level.
	name        string
	start, stop sim.Time
	rate        float64
	sl          uint8
	tl          timeline
	// flow is the client QP (spec.TimelineQP) whose
	// congestion-controlled rate rates records.
	flow   *qpRun
	rates  rateLog
	caches [2]cacheCount // its client and server QPs' cache lookups (scenarios)

	measuring bool
	winStart  sim.Time
	winEnd    sim.Time
	ops       int
	bytes     int64
	lat       timing.Histogram
	latMin    sim.Time
	latSum    float64
	latN      int
	errors    int
	err       error // why the run stopped early (the clock's deadlock or time limit)
	finished  int   // client QPs done
	totalQPs  int
	trace     func(at sim.Time, h *host, what string) // host-side stages (breakdown)
}

func (r *runner) now() sim.Time { return sim.Time(r.vc.Now()) }

// fail records why a thread stopped.
func (r *runner) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// access is every right a test's regions and QPs grant.
const access = rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic

func (r *runner) build() error {
	sp := &r.spec
	for k, i := range append(append([]int(nil), r.clientIdx...), r.serverIdx...) {
		h, err := r.newHost(r.w.machines[i])
		if err != nil {
			return err
		}
		if k < len(r.clientIdx) {
			h.nqp = sp.QPs
			r.clients = append(r.clients, h)
		} else {
			h.nqp = sp.QPs * len(r.clientIdx) / len(r.serverIdx)
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
			if err := connect(a, b, r.sl, uint8(r.spec.TrafficClass)); err != nil {
				return err
			}
			r.totalQPs++
		}
	}
	return nil
}

// newHost sets up the workload's application on machine m: a PD of its
// own, its threads.
func (r *runner) newHost(m *machine) (*host, error) {
	sp := &r.spec
	pd, err := m.dev.AllocPD()
	if err != nil {
		return nil, err
	}
	h := &host{dev: m.dev, m: m, pd: pd, run: r}
	// perftest's latency loops run one QP: a latency test's thread per QP.
	n := sp.Threads
	if latency(sp.Test) {
		n = 0
	}
	for range n {
		h.threads = append(h.threads, &thread{h: h})
	}
	if sp.MRChurn > 0 && !sp.Metadata {
		h.churn = make([]byte, churnBytes)
	}
	return h, nil
}

// newQP creates a QP with its buffer: a region of its own (MRPerQP) or
// its slice of the host's one region. A host's QPs are spread over its
// threads round-robin; in a latency test each has a thread of its own.
func (h *host) newQP(client bool) (*qpRun, error) {
	sp := &h.run.spec
	idx := len(h.qps)
	if latency(sp.Test) {
		h.threads = append(h.threads, &thread{h: h})
	}
	th := h.threads[idx%len(h.threads)]
	if th.sendCQ == nil {
		// Room for every completion its QPs can have outstanding, as
		// perftest sizes its CQs (tx_depth per QP, and the receives a
		// SEND test's server keeps posted): a thread busy posting takes
		// them later than they come.
		nq := (h.nqp + len(h.threads) - 1) / len(h.threads)
		if latency(sp.Test) {
			nq = 1
		}
		n := min(max(nq*(sp.TxDepth*2+2), 64), 1<<20)
		cq, err := h.dev.CreateCQ(n)
		if err != nil {
			return nil, err
		}
		th.sendCQ, th.recvCQ = cq, cq
		if sp.Test == SendBW || sp.Test == SendLat {
			if th.recvCQ, err = h.dev.CreateCQ(n); err != nil {
				return nil, err
			}
		}
	}
	depth := uint32(max(sp.TxDepth*2, sp.RxDepth, 16))
	qp, err := h.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: th.sendCQ, RecvCQ: th.recvCQ,
		Cap: rnic.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(max(sp.Inline, 0))}})
	if err != nil {
		return nil, err
	}
	q := &qpRun{h: h, qp: qp, idx: idx, client: client}
	if client && sp.Random && !sp.Metadata && !latency(sp.Test) {
		q.touched = make([]bool, max(sp.Footprint/slotStep(sp.Size), 1))
	}
	mr, iova, buf, err := h.region(idx)
	if err != nil {
		return nil, err
	}
	h.mrs = append(h.mrs, mr)
	h.base = append(h.base, iova)
	h.buf = append(h.buf, buf)
	h.qps = append(h.qps, q)
	th.qps = append(th.qps, q)
	h.m.qps[qp.QPN()] = q
	return q, nil
}

// perQP is the bytes of a QP's buffer: its footprint, twice for write_lat
// in real bytes, whose two sides each mark the last byte of what they
// send and poll the last byte of what they receive (perftest's halves).
func (h *host) perQP() int {
	sp := &h.run.spec
	if sp.Test == WriteLat && !sp.Metadata {
		return 2 * sp.Footprint
	}
	return sp.Footprint
}

// target is where QP i receives and its peer's WRITEs land: its
// buffer's second half in write_lat with real bytes, else its start.
func (h *host) target(i int) uint64 {
	if h.perQP() > h.run.spec.Footprint {
		return h.base[i] + uint64(h.run.spec.Footprint)
	}
	return h.base[i]
}

// region returns the memory of the host's i-th QP: its region, address
// and bytes (nil in metadata mode).
func (h *host) region(i int) (mr *rnic.MR, iova uint64, buf []byte, err error) {
	sp := &h.run.spec
	fp := h.perQP()
	if sp.MRPerQP || h.shared == nil {
		n := fp
		if !sp.MRPerQP {
			n = fp * h.nqp
		}
		iova := uint64(len(h.mrs)+1) << 40
		if sp.Metadata {
			mr, err = h.pd.RegMRMetadata(iova, n, access, sp.PageSize)
		} else {
			mr, err = h.pd.RegMRPageSize(make([]byte, n), iova, access, sp.PageSize)
		}
		if err != nil {
			return nil, 0, nil, err
		}
		if sp.MRPerQP {
			return mr, iova, mr.Bytes(), nil
		}
		h.shared = mr
	}
	iova = h.shared.Addr() + uint64(i*fp)
	if b := h.shared.Bytes(); b != nil {
		buf = b[i*fp : (i+1)*fp : (i+1)*fp]
	}
	return h.shared, iova, buf, nil
}

// connect connects the two QPs to each other, as perftest does: the
// exchange of endpoints is in-process, both at PSN 0.
func connect(a, b *qpRun, sl, tclass uint8) error {
	cp := rnic.ConnParams{Access: access, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
		MaxRdAtomic: 16, MaxDestRdAtomic: 16, SL: sl, TrafficClass: tclass &^ 3}
	for _, x := range []*qpRun{a, b} {
		y := x.peer
		if err := x.qp.Connect(y.qp.Endpoint(cp), cp); err != nil {
			return err
		}
		x.rkey = y.h.mrs[y.idx].RKey()
	}
	return nil
}

// fillPatterns gives every region a distinct seeded byte pattern, so that
// the data check after the run sees where each byte came from.
func (r *runner) fillPatterns() {
	if r.spec.Metadata {
		return
	}
	rng := r.vc.Rand()
	for _, h := range r.hosts {
		for _, b := range h.buf {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		}
	}
	if r.spec.Test == AtomicBW && r.spec.AtomicTarget != AtomicSpread {
		// The words the atomics target start at 0: the check knows
		// what they must hold after.
		for _, h := range r.servers {
			for _, b := range h.buf {
				clear(b[:8])
			}
		}
	}
}

// check compares what the bandwidth tests moved with its source: for
// WRITE and SEND the server's region against the client's, for READ the
// client's against the server's, over the slots of the cycle buffer the
// operations covered (a message every slotStep bytes, perftest's way
// through it). Latency tests write both ways into the same bytes, and
// atomics target counters: neither has a source to compare with.
func (r *runner) check() (checked, corrupt int64) {
	sp := &r.spec
	if sp.Test == AtomicBW {
		return r.checkAtomics()
	}
	step := slotStep(sp.Size)
	for _, c := range r.clients {
		for _, q := range c.qps {
			var src, dst []byte
			switch sp.Test {
			case SendBW:
				// The receives move through the server's buffer as
				// perftest posts them; one of its slots holds the last
				// message sent.
				src = c.buf[q.idx][q.lastOff : q.lastOff+sp.Size]
				dst = q.peer.h.buf[q.peer.idx]
				best := int64(sp.Size)
				for from := 0; from+sp.Size <= len(dst) && best > 0; from += step {
					best = min(best, differ(src, dst[from:from+sp.Size]))
				}
				checked, corrupt = checked+int64(sp.Size), corrupt+best
				continue
			case WriteBW:
				src, dst = c.buf[q.idx], q.peer.h.buf[q.peer.idx]
			case ReadBW:
				src, dst = q.peer.h.buf[q.peer.idx], c.buf[q.idx]
			default:
				continue
			}
			slots := 1 // a message above half the footprint starts at 0 every time
			if sp.Size <= sp.Footprint/2 {
				slots = sp.Footprint / step
			}
			for slot := range min(slots, q.done) {
				if q.touched != nil && !q.touched[slot] {
					continue // random offsets: the slots operations covered
				}
				from, to := slot*step, slot*step+sp.Size
				checked, corrupt = checked+int64(sp.Size), corrupt+differ(src[from:to], dst[from:to])
			}
		}
	}
	return checked, corrupt
}

// checkAtomics checks the words atomic_bw targeted one per QP or one
// shared, which started at 0: fetch-and-add leaves each holding the
// number of atomics that targeted it, and perftest's compare-and-swap
// (compare 0, swap 0) leaves each at 0. Atomics spread over the
// footprint leave sums no one tracks: those are not checked.
func (r *runner) checkAtomics() (checked, corrupt int64) {
	sp := &r.spec
	word := func(b []byte, want uint64) {
		checked += 8
		if got := binary.NativeEndian.Uint64(b[:8]); got != want {
			corrupt += 8
		}
	}
	for _, h := range r.servers {
		switch {
		case sp.AtomicTarget == AtomicPerQP && sp.AtomicType == FetchAndAdd:
			for _, q := range h.qps {
				word(h.buf[q.idx], uint64(q.peer.done))
			}
		case sp.AtomicTarget == AtomicShared && sp.AtomicType == FetchAndAdd:
			sum := 0
			for _, q := range h.qps {
				sum += q.peer.done
			}
			word(h.buf[0], uint64(sum))
		case sp.AtomicTarget == AtomicPerQP:
			// perftest's compare-and-swap compares 0 and swaps in 0:
			// a word that started at 0 holds 0 after every one.
			for _, q := range h.qps {
				word(h.buf[q.idx], 0)
			}
		case sp.AtomicTarget == AtomicShared:
			word(h.buf[0], 0)
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

// stats reads d's statistics from the clock vc, with utilisations over
// the window from the clock's start to end (none if end is 0).
func stats(vc *rnic.VirtualClock, d *rnic.Device, end sim.Time) NICStats {
	st, _ := vclock.ReadStats(vc, d, time.Duration(end))
	return st
}

// churnBytes is the size of the region the MR-churn neighbour registers.
const churnBytes = 1 << 20

// churnLoop is the noisy neighbour (MRChurn): every MRChurn it registers
// and deregisters a region on each server, until the test's QPs are
// done: the host table changes invalidate the NIC's MPT and MTT cache
// entries of that region, and the registration's pages evict others.
func (r *runner) churnLoop() {
	for r.finished < r.totalQPs {
		if r.vc.Sleep(time.Duration(r.spec.MRChurn)) != nil || r.finished == r.totalQPs {
			return
		}
		for _, h := range r.servers {
			var mr *rnic.MR
			var err error
			if h.churn == nil {
				mr, err = h.pd.RegMRMetadata(1<<50, churnBytes, rnic.AccessLocalWrite, 0)
			} else {
				mr, err = h.pd.RegMRIOVA(h.churn, 1<<50, rnic.AccessLocalWrite)
			}
			if err != nil {
				r.errors++
				continue
			}
			// The NIC walks its translations as a use would (they enter
			// the caches), then the region goes.
			if err := h.pd.AdviseMR(rnic.AdvisePrefetch, []rnic.SGE{{Addr: 1 << 50, Length: churnBytes, LKey: mr.LKey()}}); err != nil {
				r.errors++
			}
			if err := mr.Dereg(); err != nil {
				r.errors++
			}
		}
	}
}

// measure records an operation completed at now.
func (r *runner) measure(q *qpRun, bytes int, now sim.Time) {
	if q.done == r.spec.Warmup && !r.measuring {
		r.measuring = true
		r.winStart = now
	}
	if q.done > r.spec.Warmup {
		r.ops++
		r.bytes += int64(bytes)
		q.measured += int64(bytes)
		q.lastAt = now
	}
	r.winEnd = max(r.winEnd, now)
	r.tl.add(now, 1, int64(bytes))
}
