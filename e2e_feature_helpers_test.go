package rnic_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// Helpers shared by the TestFeature... tests (e2e_feature_*_test.go).

// xopts extends pairOpts with what newPair cannot set: the depth of each
// device's CQ and the QPs' creation attributes.
type xopts struct {
	pairOpts
	cqeA, cqeB int                    // CQ depths (4096 if 0)
	initA      func(*rnic.QPInitAttr) // adjusts a's QP before creation
	initB      func(*rnic.QPInitAttr)
}

// newPairX is newPair with the extra options of xopts.
func newPairX(t testing.TB, x xopts) *pair {
	t.Helper()
	o := x.pairOpts
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
	p := &pair{t: t, pa: pa, pb: pb}
	open := func(l *mem.Port, name string) *rnic.Device {
		opts := o.devOpts
		opts.Link, opts.Name = l, name
		d, err := rnic.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	p.a, p.b = open(pa, "a"), open(pb, "b")
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	p.pda, p.pdb = must(p.a.AllocPD()), must(p.b.AllocPD())
	cqe := func(n int) int {
		if n == 0 {
			return 4096
		}
		return n
	}
	p.cqa, p.cqb = must(p.a.CreateCQ(cqe(x.cqeA))), must(p.b.CreateCQ(cqe(x.cqeB)))
	ia := rnic.QPInitAttr{Type: o.typ, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: o.cap}
	ib := rnic.QPInitAttr{Type: o.typ, SendCQ: p.cqb, RecvCQ: p.cqb, Cap: o.cap}
	if x.initA != nil {
		x.initA(&ia)
	}
	if x.initB != nil {
		x.initB(&ib)
	}
	p.qpa = must(p.pda.CreateQP(ia))
	p.qpb = must(p.pdb.CreateQP(ib))
	cp := testConn(o.conn)
	if o.mtu != 0 {
		cp.MTU = o.mtu
	}
	pcb := cp
	pcb.PSN = (cp.PSN + 0x123456) & 0xFFFFFF
	if err := p.qpa.Connect(p.qpb.Endpoint(pcb), cp); err != nil {
		t.Fatal(err)
	}
	if err := p.qpb.Connect(p.qpa.Endpoint(cp), pcb); err != nil {
		t.Fatal(err)
	}
	return p
}

// allAccess is every right a region can grant to a peer.
const allAccess = rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic

// guarded is a buffer with a registered middle and guard bands around it
// that no operation may touch.
type guarded struct {
	all  []byte // guard | region | guard
	orig []byte // all, as it was filled
	mr   *rnic.MR
}

const guardLen = 64

// newGuarded registers n bytes (8-byte aligned, with guardLen bytes of
// guard on each side) filled with a pattern derived from seed.
func newGuarded(t testing.TB, pd *rnic.PD, n int, access rnic.Access, seed byte) *guarded {
	t.Helper()
	g := &guarded{all: make([]byte, n+2*guardLen)}
	for i := range g.all {
		g.all[i] = seed + byte(i*7)
	}
	g.orig = bytes.Clone(g.all)
	mr, err := pd.RegMR(g.all[guardLen:guardLen+n], access)
	if err != nil {
		t.Fatal(err)
	}
	g.mr = mr
	return g
}

// region returns the registered bytes.
func (g *guarded) region() []byte { return g.all[guardLen : len(g.all)-guardLen] }

// unchanged fails the test if any byte (region or guard) changed.
func (g *guarded) unchanged(t testing.TB, what string) {
	t.Helper()
	if i := firstDiff(g.all, g.orig); i >= 0 {
		t.Errorf("%s: byte %d (offset %d from the region) changed: %#x, was %#x", what, i, i-guardLen, g.all[i], g.orig[i])
	}
}

// guardsIntact fails the test if a guard band changed.
func (g *guarded) guardsIntact(t testing.TB, what string) {
	t.Helper()
	n := len(g.all)
	if i := firstDiff(g.all[:guardLen], g.orig[:guardLen]); i >= 0 {
		t.Errorf("%s: guard byte %d before the region changed", what, guardLen-i)
	}
	if i := firstDiff(g.all[n-guardLen:], g.orig[n-guardLen:]); i >= 0 {
		t.Errorf("%s: guard byte %d after the region changed", what, i)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// pattern returns n bytes that identify (tag, offset).
func pattern(tag, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(tag*131 + i*7 + i>>8)
	}
	return b
}

// waitEvent waits for an asynchronous event on d that satisfies match and
// returns it; events that do not match are collected for the failure
// message (and returned in the second result).
func waitEvent(t testing.TB, d *rnic.Device, timeout time.Duration, what string, match func(rnic.AsyncEvent) bool) (rnic.AsyncEvent, []rnic.AsyncEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var other []rnic.AsyncEvent
	for {
		ev, err := d.GetAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("device %s: no %s event within %v (other events: %s)", d.Name(), what, timeout, evString(other))
		}
		if match(ev) {
			return ev, other
		}
		other = append(other, ev)
	}
}

// waitQPEvent waits for an event of type typ about qp.
func waitQPEvent(t testing.TB, d *rnic.Device, qp *rnic.QP, typ rnic.EventType) {
	t.Helper()
	waitEvent(t, d, 3*time.Second, fmt.Sprintf("%q for QP %#x", typ, qp.QPN()), func(ev rnic.AsyncEvent) bool {
		return ev.QP == qp && ev.Type == typ
	})
}

// drainEvents returns the events that arrive on d within d.
func drainEvents(d *rnic.Device, wait time.Duration) []rnic.AsyncEvent {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var evs []rnic.AsyncEvent
	for {
		ev, err := d.GetAsyncEvent(ctx)
		if err != nil {
			return evs
		}
		evs = append(evs, ev)
	}
}

func evString(evs []rnic.AsyncEvent) string {
	if len(evs) == 0 {
		return "none"
	}
	var s []string
	for _, ev := range evs {
		x := ev.Type.String()
		if ev.QP != nil {
			x += fmt.Sprintf(" qp %#x", ev.QP.QPN())
		}
		if ev.SRQ != nil {
			x += " srq"
		}
		if ev.CQ != nil {
			x += fmt.Sprintf(" cq %d", ev.CQ.Handle())
		}
		s = append(s, x)
	}
	return strings.Join(s, ", ")
}

// quiet fails the test if a completion arrives on cq within d.
func quiet(t testing.TB, cq *rnic.CQ, d time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	wc := make([]rnic.WC, 8)
	if n, err := cq.Wait(ctx, wc); err == nil {
		t.Fatalf("%s: unexpected completions %+v", what, wc[:n])
	}
}

// waitState waits until qp's state is want (the NIC changes it on its own
// goroutine, possibly just after writing the completion that reports why).
func waitState(t testing.TB, qp *rnic.QP, want rnic.QPState) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for qp.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("QP %#x is in %v, want %v", qp.QPN(), qp.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if a, _ := query(t, qp); a.State != want {
		t.Fatalf("QP %#x: Query says %v, State() says %v", qp.QPN(), a.State, want)
	}
}

// counter returns a device counter that must exist.
func counter(t testing.TB, d *rnic.Device, name string) uint64 {
	t.Helper()
	v, ok := d.Counter(name)
	if !ok {
		t.Fatalf("device %s has no counter %q", d.Name(), name)
	}
	return v
}

// qpCounter returns a QP counter that must exist.
func qpCounter(t testing.TB, qp *rnic.QP, name string) uint64 {
	t.Helper()
	for _, c := range qp.Counters() {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("QP %#x has no counter %q", qp.QPN(), name)
	return 0
}

// errContains fails unless err is non-nil and its text contains every
// substring (the API's errors name the problem).
func errContains(t testing.TB, err error, what string, subs ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not mention %q", what, err, s)
		}
	}
}

// flushCheck posts a valid WRITE on qp, which is in ERR, and checks that
// it completes with WR_FLUSH_ERR (IBTA 10.7.3.1 / 11.6.2: a QP in the
// Error state completes every WR with "flushed").
func flushCheck(t testing.TB, qp *rnic.QP, cq *rnic.CQ, wrid uint64, mr *rnic.MR, rmr *rnic.MR) {
	t.Helper()
	if err := qp.PostSend(rnic.SendWR{WRID: wrid, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mr.SGE(0, 8)}, RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}); err != nil {
		t.Fatalf("PostSend on a QP in ERR: %v (libibverbs accepts it and flushes)", err)
	}
	wc := waitWC(t, cq, 1, 3*time.Second)[0]
	if wc.WRID != wrid || wc.Status != rnic.WCWRFlushErr || wc.QPNum != qp.QPN() {
		t.Fatalf("WR posted on the QP in ERR completed as %+v, want WRID %d WR_FLUSH_ERR", wc, wrid)
	}
}

// query returns qp's attributes, failing the test if Query fails.
func query(t testing.TB, qp *rnic.QP) (rnic.QPAttr, rnic.QPInitAttr) {
	t.Helper()
	a, ia, err := qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	return a, ia
}
