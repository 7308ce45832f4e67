package perftest

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/sim/vclock"
)

// A Worker runs perftest's loop on QPs its caller connected: here two
// devices of one virtual clock, a QP pair per index, each QP's buffer a
// slice of one region per side (real bytes, so that the data can be
// checked).

// workerPair is both sides of a Worker test.
type workerPair struct {
	vc       *rnic.VirtualClock
	cli, srv workerSide
}

type workerSide struct {
	dev            *rnic.Device
	mr             *rnic.MR
	sendCQ, recvCQ *rnic.CQ
	qps            []WorkerQP
	obs            *recorder
}

// perQP is each QP's share of a side's region: a local half and a
// target half (write_lat needs them apart).
const perQP = 2 * 4096

// newWorkerPair connects nq QP pairs between two devices on a cx6 clock.
func newWorkerPair(t *testing.T, nq int) *workerPair {
	t.Helper()
	vc, err := vclock.New(vclock.Options{Profile: "cx6", Seed: 1, WatchWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	w := &workerPair{vc: vc}
	access := rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
	for i, s := range []*workerSide{&w.cli, &w.srv} {
		s.dev, err = rnic.Open(rnic.Options{Clock: vc, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
		if err != nil {
			t.Fatal(err)
		}
		pd, err := s.dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, nq*perQP)
		for k := range buf {
			buf[k] = byte(k*7 + i)
		}
		if s.mr, err = pd.RegMRIOVA(buf, uint64(i+1)<<32, access); err != nil {
			t.Fatal(err)
		}
		if s.sendCQ, err = s.dev.CreateCQ(4096); err != nil {
			t.Fatal(err)
		}
		if s.recvCQ, err = s.dev.CreateCQ(4096); err != nil {
			t.Fatal(err)
		}
		for q := range nq {
			qp, err := pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: s.sendCQ, RecvCQ: s.recvCQ,
				Cap: rnic.QPCap{MaxSendWR: 256, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 256}})
			if err != nil {
				t.Fatal(err)
			}
			base := s.mr.Addr() + uint64(q*perQP)
			s.qps = append(s.qps, WorkerQP{QP: qp, MR: s.mr, Local: base, Target: base + perQP/2})
		}
		s.obs = &recorder{}
	}
	cp := rnic.ConnParams{Access: access, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, MaxRdAtomic: 16, MaxDestRdAtomic: 16}
	for q := range nq {
		a, b := &w.cli.qps[q], &w.srv.qps[q]
		if err := a.QP.Connect(b.QP.Endpoint(cp), cp); err != nil {
			t.Fatal(err)
		}
		if err := b.QP.Connect(a.QP.Endpoint(cp), cp); err != nil {
			t.Fatal(err)
		}
		a.Remote, a.RKey = b.Target, w.srv.mr.RKey()
		b.Remote, b.RKey = a.Target, w.cli.mr.RKey()
	}
	return w
}

// config is side s's WorkerConfig for cfg.
func (w *workerPair) config(cfg Config, s *workerSide) WorkerConfig {
	cfg.Clock = w.vc
	return WorkerConfig{Config: cfg, Client: s == &w.cli, QPs: s.qps, SendCQ: s.sendCQ, RecvCQ: s.recvCQ, Observer: s.obs}
}

// run runs the client's and the server's workers (mod adjusts each) to
// their end.
func (w *workerPair) run(t *testing.T, cfg Config, mod func(*WorkerConfig)) {
	t.Helper()
	var cliErr, srvErr error
	err := w.vc.Run(func() {
		sc := w.config(cfg, &w.srv)
		srv := w.vc.Go(func() { srvErr = RunWorker(t.Context(), sc) })
		cc := w.config(cfg, &w.cli)
		if mod != nil {
			mod(&cc)
		}
		cliErr = RunWorker(t.Context(), cc)
		if err := srv.Wait(); err != nil {
			t.Errorf("server thread: %v", err)
		}
	})
	if err != nil || cliErr != nil || srvErr != nil {
		t.Fatalf("clock: %v\nclient: %v\nserver: %v", err, cliErr, srvErr)
	}
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	posts, rungs []time.Duration
	addrs        []uint64
	done         map[int]int
	last         time.Duration
}

func (r *recorder) Posted(qp, n int, addr uint64, at time.Duration) {
	r.posts, r.addrs = append(r.posts, at), append(r.addrs, addr)
}
func (r *recorder) Rung(qp int, at time.Duration) { r.rungs = append(r.rungs, at) }
func (r *recorder) Completed(qp, n int, at time.Duration) {
	if r.done == nil {
		r.done = map[int]int{}
	}
	r.done[qp] += n
	r.last = at
}

// TestWorker runs each test as two Workers and checks what the observer
// saw: every operation of every QP completed once (a signaled completion
// retires the CQ moderation's worth, the last fewer), a post per work
// request, and for the bandwidth tests the bytes at their target.
func TestWorker(t *testing.T) {
	for _, tc := range []struct {
		test        Test
		qps, cqMod  int
		iters, size int
	}{
		{WriteBW, 4, 7, 100, 1024}, // 100 is no multiple of 7: the last completion retires 2
		{ReadBW, 2, 1, 50, 512},
		{SendBW, 3, 4, 64, 256},
		{AtomicBW, 2, 1, 40, 8},
		{WriteLat, 1, 1, 30, 64},
		{ReadLat, 1, 1, 30, 64},
		{SendLat, 1, 1, 30, 64},
	} {
		t.Run(tc.test.String(), func(t *testing.T) {
			w := newWorkerPair(t, tc.qps)
			cfg := NewConfig(tc.test)
			cfg.Iters, cfg.Size, cfg.CQMod, cfg.Inline = tc.iters, tc.size, tc.cqMod, 0
			w.run(t, cfg, nil)
			if got := len(w.cli.obs.posts); got != tc.qps*tc.iters {
				t.Errorf("client: %d posts, want %d", got, tc.qps*tc.iters)
			}
			if len(w.cli.obs.rungs) != len(w.cli.obs.posts) {
				t.Errorf("client: %d posts rung, %d posted", len(w.cli.obs.rungs), len(w.cli.obs.posts))
			}
			for q := range tc.qps {
				if got := w.cli.obs.done[q]; got != tc.iters {
					t.Errorf("client QP %d: %d operations completed, want %d", q, got, tc.iters)
				}
			}
			if tc.test == SendBW {
				for q := range tc.qps {
					if got := w.srv.obs.done[q]; got != tc.iters {
						t.Errorf("server QP %d: %d messages received, want %d", q, got, tc.iters)
					}
				}
			}
			// The bytes: a WRITE's source is the client's local half,
			// its target the server's target half (and the reverse for
			// READ), message by message through the 4096-byte cycle
			// buffer.
			cb, sb := w.cli.mr.Bytes(), w.srv.mr.Bytes()
			var src, dst []byte
			switch tc.test {
			case WriteBW:
				src, dst = cb[:perQP/2], sb[perQP/2:perQP]
			case ReadBW:
				src, dst = sb[perQP/2:perQP], cb[:perQP/2]
			case SendBW:
				src, dst = cb[:tc.size], sb[perQP/2:perQP/2+tc.size]
			default:
				return
			}
			if n := min(len(src), tc.iters*tc.size); string(src[:n]) != string(dst[:n]) {
				t.Errorf("%v: the target's first %d bytes are not the source's", tc.test, n)
			}
		})
	}
}

// TestWorkerStop: after the stop time each QP posts one more list, its
// last (signaled); the loop ends when those complete.
func TestWorkerStop(t *testing.T) {
	w := newWorkerPair(t, 2)
	cfg := NewConfig(WriteBW)
	cfg.Iters, cfg.Size, cfg.CQMod, cfg.TxDepth = 1000000, 64, 8, 16
	stop := 20 * time.Microsecond
	w.run(t, cfg, func(c *WorkerConfig) { c.Stop = stop })
	o := w.cli.obs
	for q := range 2 {
		if n := o.done[q]; n == 0 || n >= cfg.Iters {
			t.Errorf("QP %d: %d operations, want some and fewer than %d", q, n, cfg.Iters)
		}
	}
	late := 0
	for _, at := range o.posts {
		if at >= stop {
			late++
		}
	}
	if late != 2 {
		t.Errorf("%d posts at or after the stop time, want one per QP", late)
	}
	if o.last < stop || o.last > stop+20*time.Microsecond {
		t.Errorf("last completion at %v, want shortly after the stop at %v", o.last, stop)
	}
}

// TestWorkerRate: paced at R messages per second per QP, n messages take
// about n/R, posted about 1/R apart.
func TestWorkerRate(t *testing.T) {
	w := newWorkerPair(t, 1)
	cfg := NewConfig(WriteBW)
	cfg.Iters, cfg.Size, cfg.CQMod = 50, 64, 1
	const rate = 1e6 // one per microsecond
	w.run(t, cfg, func(c *WorkerConfig) { c.Rate = rate })
	o := w.cli.obs
	if got := o.done[0]; got != 50 {
		t.Fatalf("%d operations, want 50", got)
	}
	for i := 1; i < len(o.posts); i++ {
		if d := o.posts[i] - o.posts[i-1]; d < 900*time.Nanosecond || d > 1100*time.Nanosecond {
			t.Fatalf("posts %d and %d are %v apart, want about 1 µs", i-1, i, d)
		}
	}
	if span := o.posts[len(o.posts)-1] - o.posts[0]; span < 48*time.Microsecond || span > 50*time.Microsecond {
		t.Errorf("50 posts spread over %v, want about 49 µs", span)
	}
}

// TestWorkerRandom: random offsets land on message slots of the cycle
// buffer, not in order.
func TestWorkerRandom(t *testing.T) {
	w := newWorkerPair(t, 1)
	cfg := NewConfig(WriteBW)
	cfg.Iters, cfg.Size, cfg.CQMod = 200, 100, 1
	w.run(t, cfg, func(c *WorkerConfig) { c.Random = rand.New(rand.NewPCG(1, 2)) })
	base := w.cli.qps[0].Local
	inOrder := true
	seen := map[uint64]bool{}
	for i, a := range w.cli.obs.addrs {
		off := a - base
		if off%128 != 0 || off+100 > 4096 { // 100 B rounded up to cache lines
			t.Fatalf("post %d at offset %d: not a 128-byte slot of the 4096-byte cycle buffer", i, off)
		}
		if i > 0 && off != (w.cli.obs.addrs[i-1]-base+128)%4096 {
			inOrder = false
		}
		seen[off] = true
	}
	if inOrder || len(seen) < 16 {
		t.Errorf("offsets in order %v, %d distinct of 32 slots", inOrder, len(seen))
	}
}

// TestWorkerRefuses: a configuration the loops cannot honour is refused,
// saying why.
func TestWorkerRefuses(t *testing.T) {
	w := newWorkerPair(t, 2)
	for _, tc := range []struct {
		name string
		mod  func(*WorkerConfig)
		want string
	}{
		{"bad test", func(c *WorkerConfig) { c.Test = 99 }, "unknown test"},
		{"exchange", func(c *WorkerConfig) { c.Peer = "10.0.0.2" }, "no exchange fields"},
		{"duration", func(c *WorkerConfig) { c.Duration = 3 }, "belong to a program"},
		{"no QPs", func(c *WorkerConfig) { c.QPs = nil }, "no QPs"},
		{"latency QPs", func(c *WorkerConfig) { c.Test = WriteLat }, "runs one QP"},
		{"no CQ", func(c *WorkerConfig) { c.SendCQ = nil }, "SendCQ and RecvCQ"},
		{"send one CQ", func(c *WorkerConfig) { c.Test, c.RecvCQ = SendBW, c.SendCQ }, "two"},
		{"negative rate", func(c *WorkerConfig) { c.Rate = -1 }, "negative"},
		{"latency stop", func(c *WorkerConfig) { c.Test, c.QPs, c.Stop = ReadLat, c.QPs[:1], time.Second }, "bandwidth tests"},
		{"recv every", func(c *WorkerConfig) { c.RecvEvery = time.Microsecond }, "send_bw's server"},
		{"rate off clock", func(c *WorkerConfig) { c.Rate, c.Clock = 1000, nil }, "virtual clock"},
		{"write_lat halves", func(c *WorkerConfig) {
			c.Test, c.QPs = WriteLat, []WorkerQP{c.QPs[0]}
			c.QPs[0].Target = 0
		}, "Target apart"},
		{"no MR", func(c *WorkerConfig) { c.QPs = []WorkerQP{{QP: c.QPs[0].QP}} }, "QP and MR"},
		{"perftest flag", func(c *WorkerConfig) { c.TxDepth = 100000 }, "tx depth"},
		{"post list", func(c *WorkerConfig) { c.PostList, c.Iters = 3, 100 }, "multiple of post list"},
	} {
		cfg := w.config(NewConfig(WriteBW), &w.cli)
		tc.mod(&cfg)
		if err := RunWorker(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: RunWorker = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
