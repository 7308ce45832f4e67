package rnic_test

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// pair is two devices on an in-process link, each with a PD, a CQ and a
// connected QP.
type pair struct {
	t        testing.TB
	pa, pb   *mem.Port
	a, b     *rnic.Device
	pda, pdb *rnic.PD
	cqa, cqb *rnic.CQ
	qpa, qpb *rnic.QP
	witness  *witness // pairOpts.witness
}

type pairOpts struct {
	typ     rnic.QPType
	mtu     rnic.MTU
	fa, fb  mem.Faults
	cap     rnic.QPCap
	conn    rnic.ConnParams
	devOpts rnic.Options
	// wrapA, if set, wraps device a's link (a test link in front of it).
	wrapA func(link.Link) link.Link
	// witness, if set, records both NICs' frames (see linkExhaustedRetries).
	witness *witness
}

func newPair(t testing.TB, o pairOpts) *pair {
	t.Helper()
	if o.typ == 0 {
		o.typ = rnic.RC
	}
	if o.cap.MaxSendWR == 0 {
		o.cap = rnic.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}
	}
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), o.fa, o.fb)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, pa: pa, pb: pb, witness: o.witness}
	// RNIC_TRACE=1 keeps the engines' trace and prints its tail and the
	// QPs' state when the test fails.
	var trace func(string)
	if os.Getenv("RNIC_TRACE") != "" {
		var mu sync.Mutex
		var lines []string
		trace = func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			mu.Lock()
			for _, l := range lines[max(0, len(lines)-100):] {
				t.Log(l)
			}
			mu.Unlock()
			t.Log(rnic.DebugState(p.qpa) + rnic.DebugState(p.qpb))
		})
	}
	open := func(l *mem.Port, name string) *rnic.Device {
		opts := o.devOpts
		opts.Link, opts.Name = l, name
		if name == "a" && o.wrapA != nil {
			opts.Link = o.wrapA(l)
		}
		if o.witness != nil {
			opts.Link = o.witness.wrap(name[0], opts.Link)
		}
		if opts.Trace == nil && trace != nil {
			opts.Trace = func(s string) { trace(name + ": " + s) }
		}
		d, err := rnic.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	p.a, p.b = open(pa, "a"), open(pb, "b")
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	p.pda, p.pdb = must(p.a.AllocPD()), must(p.b.AllocPD())
	p.cqa, p.cqb = must(p.a.CreateCQ(4096)), must(p.b.CreateCQ(4096))
	p.qpa = must(p.pda.CreateQP(rnic.QPInitAttr{Type: o.typ, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: o.cap}))
	p.qpb = must(p.pdb.CreateQP(rnic.QPInitAttr{Type: o.typ, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: o.cap}))
	cp := testConn(o.conn)
	if o.mtu != 0 {
		cp.MTU = o.mtu
	}
	pcb := cp
	pcb.PSN = cp.PSN + 0x123456&0xFFFFFF
	if err := p.qpa.Connect(p.qpb.Endpoint(pcb), cp); err != nil {
		t.Fatal(err)
	}
	if err := p.qpb.Connect(p.qpa.Endpoint(cp), pcb); err != nil {
		t.Fatal(err)
	}
	return p
}

// linkExhausted reports whether wc is a RETRY_EXC_ERR that the pair's
// witness shows the link caused (see linkExhaustedRetries); a
// RETRY_EXC_ERR the NIC caused fails the test.
func (p *pair) linkExhausted(t testing.TB, wc rnic.WC) bool {
	t.Helper()
	if wc.Status != rnic.WCRetryExcErr || p.witness == nil {
		return false
	}
	ok, why := p.witness.linkExhaustedRetries()
	if !ok {
		t.Fatalf("completion %+v, and not the link's doing: %s\ncounters a %v\nb %v", wc, why, interesting(p.a), interesting(p.b))
	}
	t.Logf("the link exhausted the retries (%s)", why)
	return true
}

// remoteRights are the QP access flags the test helpers grant when a test
// leaves ConnParams.Access zero (which grants none): the tests exercise
// every operation in both directions.
const remoteRights = rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic

// testConn returns cp with every remote right granted if it grants none.
func testConn(cp rnic.ConnParams) rnic.ConnParams {
	if cp.Access == 0 {
		cp.Access = remoteRights
	}
	return cp
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// waitWC waits for n completions on cq.
func waitWC(t testing.TB, cq *rnic.CQ, n int, timeout time.Duration) []rnic.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := make([]rnic.WC, 0, n)
	buf := make([]rnic.WC, 64)
	for len(out) < n {
		k, err := cq.Wait(ctx, buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("waiting for %d completions, got %d: %v (%+v)\ncounters of its device: %v", n, len(out), err, out, interesting(cq.Device()))
		}
		out = append(out, buf[:k]...)
	}
	return out
}

// checkGoroutines fails the test if goroutines started during it are still
// running after its cleanups (devices closed), allowing a short grace
// period for goroutines that are on their way out.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d running, %d before the test\n%s", n, before, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// interesting returns a device's non-zero counters, for failure messages.
func interesting(d *rnic.Device) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range d.Counters() {
		if c.Value != 0 {
			m[c.Name] = c.Value
		}
	}
	return m
}
