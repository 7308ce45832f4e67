package rnic_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/link/udp"
)

// Closing and destroying (issue 9, item 3): after Device.Close every call
// on the device and on each of its objects returns an error wrapping
// ErrClosed instead of pretending (PostSend returned nil) or hanging
// (cq.Wait blocked forever); a second Close, Dealloc, Dereg or Destroy is
// an error wrapping ErrClosed for every object type; a link carries one
// device, and Device.Close closes it.

// objects is one device with one object of every kind.
type objects struct {
	p   *pair
	dev *rnic.Device
	pd  *rnic.PD
	mr  *rnic.MR
	mw  *rnic.MW
	cq  *rnic.CQ // used by no QP, so that it can be destroyed
	qp  *rnic.QP // connected RC QP (p.qpa)
	ud  *rnic.QP // UD QP in RTS
	srq *rnic.SRQ
	ah  *rnic.AH
}

func newObjects(t *testing.T) *objects {
	p := newPair(t, pairOpts{})
	o := &objects{p: p, dev: p.a, pd: p.pda, qp: p.qpa}
	o.mr = must(o.pd.RegMR(make([]byte, 4096), rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessMWBind))
	o.mw = must(o.pd.AllocMW(rnic.MWType2))
	o.cq = must(o.dev.CreateCQ(16))
	o.srq = must(o.pd.CreateSRQ(rnic.SRQInitAttr{MaxWR: 16, MaxSGE: 1}))
	o.ah = must(o.pd.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
	o.ud = must(o.pd.CreateQP(rnic.QPInitAttr{Type: rnic.UD, SendCQ: p.cqa, RecvCQ: p.cqa,
		Cap: rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	must0(t, o.ud.Connect(rnic.Endpoint{}, rnic.ConnParams{}))
	return o
}

// calls returns every operation on the objects, each returning its error.
// Accessors of fixed properties are not operations (see accessors).
func (o *objects) calls() map[string]func() error {
	bg := context.Background()
	buf := make([]byte, 64)
	wcs := make([]rnic.WC, 4)
	qpAttr := rnic.QPInitAttr{Type: rnic.RC, SendCQ: o.cq, RecvCQ: o.cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	err1 := func(_ any, err error) error { return err }
	m := map[string]func() error{
		"Device.AllocPD":       func() error { return err1(o.dev.AllocPD()) },
		"Device.CreateCQ":      func() error { return err1(o.dev.CreateCQ(4)) },
		"Device.GetAsyncEvent": func() error { return err1(o.dev.GetAsyncEvent(bg)) },
		"Device.Close":         o.dev.Close,
		"Device.Publish":       o.dev.Publish,
		"PD.RegMR":             func() error { return err1(o.pd.RegMR(buf, 0)) },
		"PD.RegMRIOVA":         func() error { return err1(o.pd.RegMRIOVA(buf, 0x1000, 0)) },
		"PD.RegMRPageSize":     func() error { return err1(o.pd.RegMRPageSize(buf, 0x1000, 0, 4096)) },
		"PD.RegMRMetadata":     func() error { return err1(o.pd.RegMRMetadata(0x1000, 4096, 0, 0)) },
		"PD.AllocMW":           func() error { return err1(o.pd.AllocMW(rnic.MWType1)) },
		"PD.AdviseMR":          func() error { return o.pd.AdviseMR(rnic.AdvisePrefetch, []rnic.SGE{o.mr.SGE(0, 8)}) },
		"PD.CreateQP":          func() error { return err1(o.pd.CreateQP(qpAttr)) },
		"PD.CreateSRQ":         func() error { return err1(o.pd.CreateSRQ(rnic.SRQInitAttr{MaxWR: 1})) },
		"PD.CreateAH": func() error {
			return err1(o.pd.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(o.p.b.GID(rnic.AddrGIDIndex))}))
		},
		"PD.Dealloc":   o.pd.Dealloc,
		"MR.ReadAt":    func() error { return err1(o.mr.ReadAt(buf, 0)) },
		"MR.WriteAt":   func() error { return err1(o.mr.WriteAt(buf, 0)) },
		"MR.Dereg":     o.mr.Dereg,
		"MW.Dealloc":   o.mw.Dealloc,
		"CQ.Poll":      func() error { return err1(o.cq.Poll(wcs)) },
		"CQ.Wait":      func() error { return err1(o.cq.Wait(bg, wcs)) },
		"CQ.ReqNotify": func() error { return o.cq.ReqNotify(false) },
		"CQ.Resize":    func() error { return o.cq.Resize(8) },
		"CQ.Destroy":   o.cq.Destroy,
		"QP.Modify":    func() error { return o.qp.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState) },
		"QP.Query":     func() error { _, _, err := o.qp.Query(); return err },
		"QP.Connect":   func() error { return o.qp.Connect(o.p.qpb.Endpoint(rnic.ConnParams{}), rnic.ConnParams{}) },
		"QP.PostSend": func() error {
			return o.qp.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{o.mr.SGE(0, 8)}})
		},
		"QP.PostSend(AH)": func() error {
			return o.ud.PostSend(rnic.SendWR{Opcode: rnic.WRSend, AH: o.ah, RemoteQPN: 1, SGL: []rnic.SGE{o.mr.SGE(0, 8)}})
		},
		"QP.PostRecv":  func() error { return o.qp.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{o.mr.SGE(0, 8)}}) },
		"QP.Destroy":   o.qp.Destroy,
		"SRQ.PostRecv": func() error { return o.srq.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{o.mr.SGE(0, 8)}}) },
		"SRQ.Arm":      func() error { return o.srq.Arm(1) },
		"SRQ.Destroy":  o.srq.Destroy,
		"AH.Destroy":   o.ah.Destroy,
	}
	for name, f := range platformCalls(o) {
		m[name] = f
	}
	return m
}

// accessors are the methods that describe an object rather than act on
// it: they keep answering after Close (Counters with the final counts).
var accessors = []string{
	"Device.Name", "Device.Attr", "Device.Netdev", "Device.GID", "Device.GIDTable", "Device.GIDType", "Device.Counters", "Device.Counter",
	"PD.Handle", "PD.Device",
	"MR.LKey", "MR.RKey", "MR.Addr", "MR.Len", "MR.Bytes", "MR.Access", "MR.PD", "MR.SGE", "MR.CheckedSGE", "MR.Remote",
	"MW.RKey", "MW.Type", "MW.NextRKey",
	"CQ.Device", "CQ.Handle", "CQ.Depth", "CQ.Events",
	"QP.QPN", "QP.Type", "QP.State", "QP.PD", "QP.Endpoint", "QP.Counters",
	"SRQ.Limit", "SRQ.Posted",
	"AH.Attr", "AH.PD",
}

// TestCloseEveryMethodDecided fails when an object gains a method that
// neither the ErrClosed table nor the accessor list covers: each new
// method must decide what it does after Close.
func TestCloseEveryMethodDecided(t *testing.T) {
	o := newObjects(t)
	known := map[string]bool{}
	for name := range o.calls() {
		known[strings.TrimSuffix(name, "(AH)")] = true
	}
	for _, name := range accessors {
		known[name] = true
	}
	for _, v := range []any{o.dev, o.pd, o.mr, o.mw, o.cq, o.qp, o.srq, o.ah} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumMethod() {
			name := typ.Elem().Name() + "." + typ.Method(i).Name
			if !known[name] {
				t.Errorf("%s is neither an operation that fails after Close (objects.calls) nor an accessor", name)
			}
		}
	}
}

// bounded runs f and fails the test if it does not return within 5 s: a
// call on a closed device must not hang.
func bounded(t *testing.T, name string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s on a closed device did not return", name)
		return nil
	}
}

// TestClosedDeviceRefusesEveryCall: after Close, every operation on the
// device and on every object it holds returns an error wrapping
// ErrClosed, without blocking.
func TestClosedDeviceRefusesEveryCall(t *testing.T) {
	o := newObjects(t)
	calls := o.calls()
	must0(t, o.dev.Close())
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range calls {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		err := bounded(t, name, calls[name])
		if !errors.Is(err, rnic.ErrClosed) {
			t.Errorf("%s after Close: %v, want an error wrapping ErrClosed", name, err)
			continue
		}
		if !strings.Contains(err.Error(), `device "a" was closed`) {
			t.Errorf("%s after Close: %q does not say the device was closed", name, err)
		}
	}
	if s := o.qp.State(); s != rnic.QPSErr {
		t.Errorf("QP.State after Close = %v, want ERR", s)
	}
	if len(o.dev.Counters()) == 0 {
		t.Error("Counters after Close: none, want the final counts")
	}
}

// TestCloseTwiceEveryObject: one rule for every object type. The first
// Close, Dealloc, Dereg or Destroy succeeds; the second returns an error
// wrapping ErrClosed, as os.File.Close does, so that a double free (two
// owners) is seen, and cleanup code that wants idempotence can test
// errors.Is(err, rnic.ErrClosed).
func TestCloseTwiceEveryObject(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, p *pair) func() error
	}{
		{"Device", func(t *testing.T, p *pair) func() error {
			pa, _ := must2(mem.Pipe(netip.MustParseAddr("10.7.0.1"), netip.MustParseAddr("10.7.0.2"), mem.Faults{}, mem.Faults{}))
			return must(rnic.Open(rnic.Options{Link: pa, Name: "twice"})).Close
		}},
		{"PD", func(t *testing.T, p *pair) func() error { return must(p.a.AllocPD()).Dealloc }},
		{"MR", func(t *testing.T, p *pair) func() error { return must(p.pda.RegMR(make([]byte, 64), 0)).Dereg }},
		{"MW", func(t *testing.T, p *pair) func() error { return must(p.pda.AllocMW(rnic.MWType1)).Dealloc }},
		{"CQ", func(t *testing.T, p *pair) func() error { return must(p.a.CreateCQ(4)).Destroy }},
		{"QP", func(t *testing.T, p *pair) func() error {
			return must(p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: p.cqa, RecvCQ: p.cqa, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})).Destroy
		}},
		{"SRQ", func(t *testing.T, p *pair) func() error {
			return must(p.pda.CreateSRQ(rnic.SRQInitAttr{MaxWR: 4})).Destroy
		}},
		{"AH", func(t *testing.T, p *pair) func() error {
			return must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))})).Destroy
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, pairOpts{})
			destroy := c.make(t, p)
			if err := destroy(); err != nil {
				t.Fatalf("first: %v", err)
			}
			err := destroy()
			if !errors.Is(err, rnic.ErrClosed) {
				t.Fatalf("second: %v, want an error wrapping ErrClosed", err)
			}
			t.Log(err)
		})
	}
}

// TestUseAfterDestroy: an object that was destroyed refuses work with an
// error wrapping ErrClosed, on a device that is still open.
func TestUseAfterDestroy(t *testing.T) {
	o := newObjects(t)
	wcs := make([]rnic.WC, 1)
	must0(t, o.ah.Destroy())
	if err := o.ud.PostSend(rnic.SendWR{Opcode: rnic.WRSend, AH: o.ah, RemoteQPN: 1, SGL: []rnic.SGE{o.mr.SGE(0, 8)}}); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("PostSend with a destroyed AH: %v", err)
	}
	must0(t, o.cq.Destroy())
	if _, err := o.cq.Poll(wcs); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("Poll of a destroyed CQ: %v", err)
	}
	if _, err := o.cq.Wait(context.Background(), wcs); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("Wait on a destroyed CQ: %v", err)
	}
	must0(t, o.srq.Destroy())
	if err := o.srq.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{o.mr.SGE(0, 8)}}); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("PostRecv to a destroyed SRQ: %v", err)
	}
	must0(t, o.qp.Destroy())
	if err := o.qp.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{o.mr.SGE(0, 8)}}); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("PostSend on a destroyed QP: %v", err)
	}
	if err := o.qp.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{o.mr.SGE(0, 8)}}); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("PostRecv on a destroyed QP: %v", err)
	}
	must0(t, o.mr.Dereg())
	if _, err := o.mr.ReadAt(make([]byte, 8), 0); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("ReadAt of a deregistered MR: %v", err)
	}
	pd := must(o.dev.AllocPD())
	must0(t, pd.Dealloc())
	if _, err := pd.RegMR(make([]byte, 8), 0); !errors.Is(err, rnic.ErrClosed) {
		t.Errorf("RegMR in a deallocated PD: %v", err)
	}
}

// waitBlocked waits until a goroutine is parked (select or channel
// receive) inside fn, so that the test exercises waking a sleeper rather
// than refusing a late caller.
func waitBlocked(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			if (strings.Contains(head, "[select") || strings.Contains(head, "[chan receive")) && strings.Contains(g, fn) {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("no goroutine blocked in %s", fn)
}

// TestCloseWakesWaiters: a Wait, a GetAsyncEvent and a receive from the
// completion channel, blocked with no deadline, return when the device
// closes, the first two with an error wrapping ErrClosed.
func TestCloseWakesWaiters(t *testing.T) {
	o := newObjects(t)
	wait := make(chan error, 1)
	go func() { _, err := o.p.cqa.Wait(context.Background(), make([]rnic.WC, 1)); wait <- err }()
	waitBlocked(t, "transport.(*CQ).Wait")
	event := make(chan error, 1)
	go func() { _, err := o.dev.GetAsyncEvent(context.Background()); event <- err }()
	waitBlocked(t, "rnic.(*Device).GetAsyncEvent")
	must0(t, o.cq.ReqNotify(false))
	channel := make(chan bool, 1)
	go func() { _, ok := <-o.cq.Events(); channel <- ok }()
	waitBlocked(t, "TestCloseWakesWaiters.func3")

	must0(t, o.dev.Close())
	for name, ch := range map[string]chan error{"Wait": wait, "GetAsyncEvent": event} {
		select {
		case err := <-ch:
			if !errors.Is(err, rnic.ErrClosed) {
				t.Errorf("%s woke with %v, want an error wrapping ErrClosed", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s still blocked after Close", name)
		}
	}
	select {
	case ok := <-channel:
		if ok {
			t.Error("the completion channel delivered an event at Close; want it closed")
		}
	case <-time.After(5 * time.Second):
		t.Error("a receive from the completion channel still blocked after Close")
	}
}

// TestDestroyWakesWait: destroying a CQ wakes a Wait blocked on it.
func TestDestroyWakesWait(t *testing.T) {
	p := newPair(t, pairOpts{})
	cq := must(p.a.CreateCQ(4))
	wait := make(chan error, 1)
	go func() { _, err := cq.Wait(context.Background(), make([]rnic.WC, 1)); wait <- err }()
	waitBlocked(t, "transport.(*CQ).Wait")
	must0(t, cq.Destroy())
	select {
	case err := <-wait:
		if !errors.Is(err, rnic.ErrClosed) || !strings.Contains(err.Error(), "destroyed") {
			t.Errorf("Wait woke with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still blocked after Destroy")
	}
}

// TestOpenOwnedLink: a second Open on a link a device owns, directly or
// through a wrapper, fails with an error naming the link and its owner,
// and leaves the owner working.
func TestOpenOwnedLink(t *testing.T) {
	cases := []struct {
		name          string
		first, second func(p *mem.Port) link.Link
	}{
		{"same-port", func(p *mem.Port) link.Link { return p }, func(p *mem.Port) link.Link { return p }},
		{"port-then-wrapper", func(p *mem.Port) link.Link { return p }, func(p *mem.Port) link.Link { return sniff.New(p, sniff.Options{}) }},
		{"wrapper-then-port", func(p *mem.Port) link.Link { return sniff.New(p, sniff.Options{}) }, func(p *mem.Port) link.Link { return p }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			pa, pb := must2(mem.Pipe(netip.MustParseAddr("10.6.0.1"), netip.MustParseAddr("10.6.0.2"), mem.Faults{}, mem.Faults{}))
			defer pb.Close()
			first := must(rnic.Open(rnic.Options{Link: c.first(pa), Name: "owner"}))
			defer first.Close()
			_, err := rnic.Open(rnic.Options{Link: c.second(pa), Name: "intruder"})
			if err == nil {
				t.Fatal("second Open on an owned link succeeded")
			}
			errContains(t, err, "second Open", `"intruder"`, "*mem.Port 10.6.0.1", `already owned by device "owner"`)
			t.Log(err)
			// The owner still has its link: it can still be used.
			if _, err := first.AllocPD(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCloseClosesLink: Device.Close closes its link, the same for every
// kind of link; Open refuses the closed link afterwards; an Open that
// fails leaves the link open and unowned.
func TestCloseClosesLink(t *testing.T) {
	type closedLink interface {
		link.Link
		Closed() bool
	}
	cases := []struct {
		name string
		open func(t *testing.T) (l link.Link, inner closedLink, errClosed error)
	}{
		{"mem", func(t *testing.T) (link.Link, closedLink, error) {
			pa, pb := must2(mem.Pipe(netip.MustParseAddr("10.5.0.1"), netip.MustParseAddr("10.5.0.2"), mem.Faults{}, mem.Faults{}))
			t.Cleanup(func() { pb.Close() })
			return pa, pa, mem.ErrClosed
		}},
		{"sniff(mem)", func(t *testing.T) (link.Link, closedLink, error) {
			pa, pb := must2(mem.Pipe(netip.MustParseAddr("10.5.1.1"), netip.MustParseAddr("10.5.1.2"), mem.Faults{}, mem.Faults{}))
			t.Cleanup(func() { pb.Close() })
			return sniff.New(pa, sniff.Options{}), pa, mem.ErrClosed
		}},
		{"udp", func(t *testing.T) (link.Link, closedLink, error) {
			l := must(udp.Open(udp.Options{Addr: netip.MustParseAddr("127.0.0.1"), Port: freeUDPPort(t), Raw: udp.RawOff}))
			return l, l, udp.ErrClosed
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			l, inner, errClosed := c.open(t)
			if _, err := rnic.Open(rnic.Options{Link: l, PageSize: 3}); err == nil {
				t.Fatal("Open with a bad page size succeeded")
			}
			if inner.Closed() {
				t.Fatal("a failed Open closed the link")
			}
			dev, err := rnic.Open(rnic.Options{Link: l, Name: "d"})
			if err != nil {
				t.Fatalf("Open after a failed Open: %v (the failure kept the link?)", err)
			}
			must0(t, dev.Close())
			if !inner.Closed() {
				t.Fatal("Device.Close did not close the link")
			}
			if err := l.Close(); !errors.Is(err, errClosed) {
				t.Errorf("closing the link after Device.Close: %v, want %v", err, errClosed)
			}
			_, err = rnic.Open(rnic.Options{Link: l, Name: "again"})
			if err == nil {
				t.Fatal("Open on a closed link succeeded")
			}
			errContains(t, err, "Open on a closed link", "is closed")
		})
	}
}

// freeUDPPort returns a UDP port that was free on 127.0.0.1 a moment ago.
func freeUDPPort(t *testing.T) uint16 {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}
