package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/rnic/rnic"
)

// A Worker is one application thread's part of a test on QPs its caller
// created and connected: the loop a perftest program runs after its
// exchange (run_iter_bw, run_iter_bw_server, run_iter_lat_write,
// run_iter_lat, run_iter_lat_send), the same code, without the exchange
// and without the report. rnic sim's hosts run their threads as Workers
// (sim/perf), so that the simulator's workloads are perftest's.
//
// What a Worker adds to the program is for workloads perftest has no flag
// for, and is off by default: random offsets (Random), one remote address
// per QP (FixedRemote), a stop time (Stop), a pace per QP (Rate) and a
// receive poster at a rate (RecvEvery). An Observer sees each post and
// each completed operation on the clock's time: the caller measures.
type WorkerConfig struct {
	// Config holds the test and its flags as a program's: Test, Size,
	// Iters (any positive number here), TxDepth, RxDepth, CQMod,
	// PostList, Inline, Conn, Atomic and Clock. The exchange's fields
	// (Peer, Port, Local, Open, Listener, ExchangeConn), -a, -D, -e, -b,
	// --reversed and the report's flags are refused.
	Config
	// Client makes this thread the side that sends the test's traffic;
	// otherwise it is the server: send_bw's receives, write_lat's and
	// send_lat's answers (the servers of write_bw, read_bw, atomic_bw and
	// read_lat have nothing to run).
	Client bool
	// QPs are the thread's QPs, connected to their peers, completing on
	// SendCQ and RecvCQ (RecvCQ may be SendCQ except in SEND tests, where
	// the loops wait on each separately). Latency tests take one.
	QPs            []WorkerQP
	SendCQ, RecvCQ *rnic.CQ
	// CycleBuffer is how far a bandwidth test's messages move through a
	// QP's buffer before they start again at its beginning (perftest's
	// cycle buffer, the page size; 0: 4096), in steps of the message
	// size rounded up to 64 bytes.
	CycleBuffer int
	// Metadata says the regions hold no bytes (rnic.PD.RegMRMetadata in
	// virtual time): write_lat waits for the peer's WRITE instead of
	// polling its last byte.
	Metadata bool
	// Random draws each message's slot of the cycle buffer from this
	// generator, the same slot locally and remotely, instead of moving
	// through the buffer in order (bandwidth tests).
	Random *rand.Rand
	// FixedRemote keeps each QP's remote address where WorkerQP.Remote
	// says (atomics that all target one word).
	FixedRemote bool
	// Stop (the clock's time, 0: never) ends the posting: the next list
	// a QP posts after it is its last (bandwidth tests).
	Stop time.Duration
	// Rate, if positive, paces each QP to this many messages per second:
	// a thread of the clock makes one more due every 1/Rate, posted when
	// the QP's send queue has room (bandwidth tests, virtual time).
	Rate float64
	// RecvEvery makes send_bw's server post its receives from a thread of
	// the clock of their own: after the first rx_depth, one more on each
	// QP every RecvEvery while fewer than rx_depth are outstanding,
	// instead of one per receive completion (virtual time).
	RecvEvery time.Duration
	// Observer, if set, sees the loop's posts and completions.
	Observer Observer
}

// WorkerQP is one of a Worker's QPs, its region and three addresses:
// Local, where it sends from and READs into; Target, where it receives
// and where its peer's WRITEs land (0: Local); Remote, where its own
// requests go in the peer's region (of key RKey). write_lat in real
// bytes needs Target apart from Local, as perftest's halves are: each
// side marks the last byte of what it sends and polls the last byte of
// what it receives.
type WorkerQP struct {
	QP     *rnic.QP
	MR     *rnic.MR
	Local  uint64
	Target uint64
	Remote uint64
	RKey   uint32
}

// Observer sees a Worker's operations as its loop does them, on the
// clock's time (rnic.VirtualClock.Now; on the wall clock the time since
// the loop began). qp is the QP's index in WorkerConfig.QPs.
type Observer interface {
	// Posted: n work requests of QP qp were posted at at, the first from
	// local address addr (a latency test's sample is the time between
	// two posts, as perftest measures it).
	Posted(qp, n int, addr uint64, at time.Duration)
	// Rung: the post call of QP qp returned at at (the WQEs written, the
	// doorbell rung).
	Rung(qp int, at time.Duration)
	// Completed: n operations of QP qp are done, seen at at: retired by
	// a send completion (bandwidth tests, n up to the CQ moderation),
	// received (send_bw's server), or a round trip's answer seen
	// (latency tests).
	Completed(qp, n int, at time.Duration)
}

// RunWorker runs the thread's part of the test to its end: every
// operation of every QP completed, or the first completion in error (the
// error says which), or ctx ended. On a virtual clock it is called from a
// thread of the clock.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	p, err := cfg.params()
	if err != nil {
		return err
	}
	res := &resources{p: p, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ}
	for _, q := range cfg.QPs {
		target := q.Target
		if target == 0 {
			target = q.Local
		}
		res.qps = append(res.qps, &qpRes{qp: q.QP, mr: q.MR, buffSize: p.cycleBuffer, buf: q.Local, recv: target,
			my: Dest{VAddr: target}, rem: Dest{VAddr: q.Remote, RKey: q.RKey}})
	}
	s := &session{p: p, res: res, out: io.Discard, r: &Result{}}
	switch t, size := p.Test, p.Size; {
	case t == WriteLat:
		_, err = s.runWriteLat(ctx, size)
	case t == SendLat:
		var rs []*receiver
		if rs, err = s.postRecvs(size); err == nil {
			_, err = s.runSendLat(ctx, size, rs)
		}
	case !p.client:
		if t == SendBW {
			var rs []*receiver
			if rs, err = s.postRecvs(size); err == nil {
				_, err = s.runBWServer(ctx, size, rs)
			}
		}
	case t == ReadLat:
		_, err = s.runReadLat(ctx, size)
	default:
		_, err = s.runBW(ctx, size)
	}
	return err
}

// params checks the Worker's configuration and returns the loops'
// parameters: perftest's defaults and dependencies for its flags, then
// the Worker's additions.
func (cfg *WorkerConfig) params() (*params, error) {
	c := cfg.Config
	bad := func(format string, args ...any) (*params, error) {
		return nil, fmt.Errorf("perftest: worker: "+format, args...)
	}
	if !c.Test.Valid() {
		return bad("unknown test %d", int(c.Test))
	}
	lat := c.Test.Kind() == LAT
	switch {
	case c.Peer != "" || c.Open != nil || c.Listener != nil || c.ExchangeConn != nil || c.Local.IsValid():
		return bad("its QPs are connected by its caller: no exchange fields (Peer, Open, Listener, ExchangeConn, Local)")
	case c.All || c.Duration > 0 || c.RunInfinitely || c.Events || c.Duplex || c.Reversed || c.RateLimit > 0 || c.CPUUtil || c.OutJSON || c.Histogram || c.Unsorted || c.ReportCounters != "":
		return bad("-a, -D, --run_infinitely, -e, -b, --reversed, --rate_limit and the report's flags belong to a program (Run)")
	case len(cfg.QPs) == 0:
		return bad("no QPs")
	case lat && len(cfg.QPs) > 1:
		return bad("%s runs one QP; give each QP a worker of its own", c.Test)
	case c.Iters < 0:
		return bad("iterations %d: negative", c.Iters)
	case cfg.SendCQ == nil || cfg.RecvCQ == nil:
		return bad("SendCQ and RecvCQ are required")
	case c.Test.Verb() == VerbSend && cfg.SendCQ == cfg.RecvCQ:
		return bad("%s waits on its send and receive CQs separately: give it two", c.Test)
	case cfg.CycleBuffer < 0:
		return bad("cycle buffer %d: negative", cfg.CycleBuffer)
	case cfg.Rate < 0 || cfg.Stop < 0 || cfg.RecvEvery < 0:
		return bad("negative rate, stop time or receive period")
	case lat && (cfg.Random != nil || cfg.Rate > 0 || cfg.Stop > 0):
		return bad("%s is a ping-pong of one buffer: random offsets, a pace and a stop time are for bandwidth tests", c.Test)
	case cfg.RecvEvery > 0 && (c.Test != SendBW || cfg.Client):
		return bad("a receive period is send_bw's server's")
	case (cfg.Rate > 0 || cfg.RecvEvery > 0) && c.Clock == nil:
		return bad("a pace and a receive period run as threads of a virtual clock (Config.Clock)")
	}
	for i, q := range cfg.QPs {
		switch {
		case q.QP == nil || q.MR == nil:
			return bad("QP %d: QP and MR are required", i)
		case c.Test == WriteLat && !cfg.Metadata && (q.Target == 0 || q.Target == q.Local):
			return bad("write_lat in real bytes: QP %d needs a Target apart from Local (each side polls the last byte of what it receives)", i)
		}
	}
	c.QPs = len(cfg.QPs)
	p, err := c.params(true)
	if err != nil {
		return nil, err
	}
	if cfg.CycleBuffer > 0 {
		p.cycleBuffer = cfg.CycleBuffer
	}
	p.client, p.tcpClient = cfg.Client, cfg.Client
	p.noPeak = true // the observer has the time stamps
	p.observer = cfg.Observer
	if p.observer == nil {
		p.observer = noObserver{}
	}
	p.random, p.fixedRemote, p.metadata = cfg.Random, cfg.FixedRemote, cfg.Metadata
	p.rate, p.stop, p.recvEvery = cfg.Rate, cfg.Stop, cfg.RecvEvery
	if p.Test == SendBW && !p.client && p.postList > 1 {
		return nil, errors.New("perftest: worker: a post list is the sender's")
	}
	return p, nil
}

// noObserver is a Worker's observer when its caller gave none.
type noObserver struct{}

func (noObserver) Posted(int, int, uint64, time.Duration) {}
func (noObserver) Rung(int, time.Duration)                {}
func (noObserver) Completed(int, int, time.Duration)      {}
