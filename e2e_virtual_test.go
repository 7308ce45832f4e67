package rnic_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/sim/vclock"
)

// The public API in virtual time: one program, written once against the
// API, run on the wall clock (link/mem) and on a VirtualClock (the NICs as
// timing models of a hardware profile). Both runs must give the same data
// and the same completions; two virtual runs with one seed must give
// byte-identical traces, virtual timestamps included.

// vprogram is the program: a client thread posts WRITEs, READs, SENDs
// and atomics and waits for each batch, a server thread answers each SEND
// with a SEND of its own. It returns what it saw, as text.
// goThread starts a thread of the program and returns a function that
// waits for its end.
func vprogram(t testing.TB, a, b *rnic.Device, goThread func(func()) (join func()), now func() time.Duration) (string, string) {
	pda, pdb := must(a.AllocPD()), must(b.AllocPD())
	cqa, cqb := must(a.CreateCQ(256)), must(b.CreateCQ(256))
	qcap := rnic.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	qpa := must(pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: qcap}))
	qpb := must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, Cap: qcap}))
	cp := rnic.ConnParams{Access: remoteRights, PSN: 100}
	must0(t, qpa.Connect(qpb.Endpoint(cp), cp))
	must0(t, qpb.Connect(qpa.Endpoint(cp), cp))

	const size = 64 << 10
	all := rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
	src, dst := pattern(7, size), make([]byte, size)
	back, msg, reply := make([]byte, size), make([]byte, 4096), make([]byte, 4096)
	mrSrc, mrBack, mrReply := must(pda.RegMR(src, all)), must(pda.RegMR(back, all)), must(pda.RegMR(reply, all))
	mrDst, mrMsg := must(pdb.RegMR(dst, all)), must(pdb.RegMR(msg, all))
	words := make([]byte, 16)
	mrWords := must(pdb.RegMR(words, all))
	results := make([]byte, 8*16)
	mrResults := must(pda.RegMR(results, all))

	// Each thread keeps its own log: how the two interleave is the
	// clock's business (and on the wall clock, the scheduler's).
	var log, slog, timed strings.Builder
	record := func(l *strings.Builder, wcs []rnic.WC) {
		for _, wc := range wcs {
			fmt.Fprintf(l, "wrid %d %v %v len %d imm %#x\n", wc.WRID, wc.Opcode, wc.Status, wc.ByteLen, wc.ImmData)
			if now != nil {
				fmt.Fprintf(&timed, "%v wrid %d\n", now(), wc.WRID)
			}
		}
	}
	wait := func(cq *rnic.CQ, n int) []rnic.WC {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out := make([]rnic.WC, 0, n)
		buf := make([]rnic.WC, 16)
		for len(out) < n {
			k, err := cq.Wait(ctx, buf[:min(len(buf), n-len(out))])
			if err != nil {
				t.Errorf("wait for %d completions: %v", n, err)
				return out
			}
			out = append(out, buf[:k]...)
		}
		return out
	}
	// poll busy-polls, as perftest does.
	poll := func(cq *rnic.CQ, n int) []rnic.WC {
		out := make([]rnic.WC, 0, n)
		buf := make([]rnic.WC, 16)
		for spins := 0; len(out) < n; spins++ {
			k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
			if err != nil || spins > 50_000_000 {
				t.Errorf("poll for %d completions: %v (%d polls)", n, err, spins)
				return out
			}
			out = append(out, buf[:k]...)
		}
		return out
	}

	const rounds = 4
	// The server: a receive per client SEND, answered with a SEND.
	join := goThread(func() {
		for i := range rounds {
			must0(t, qpb.PostRecv(rnic.RecvWR{WRID: uint64(500 + i), SGL: []rnic.SGE{mrMsg.SGE(0, 4096)}}))
		}
		for i := range rounds {
			wcs := poll(cqb, 1)
			record(&slog, wcs)
			n := int(wcs[0].ByteLen)
			for j := range n {
				msg[j] ^= 0xff
			}
			must0(t, qpb.PostSend(rnic.SendWR{WRID: uint64(600 + i), Opcode: rnic.WRSendWithImm, Flags: rnic.SendSignaled,
				ImmData: uint32(i), SGL: []rnic.SGE{mrMsg.SGE(0, n)}}))
			record(&slog, poll(cqb, 1))
		}
	})

	for i := range rounds {
		off := i * (size / rounds)
		n := size / rounds
		must0(t, qpa.PostRecv(rnic.RecvWR{WRID: uint64(400 + i), SGL: []rnic.SGE{mrReply.SGE(0, 4096)}}))
		must0(t, qpa.PostSend(
			rnic.SendWR{WRID: uint64(10*i + 1), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mrSrc.SGE(off, n)}, RemoteAddr: mrDst.Addr() + uint64(off), RKey: mrDst.RKey()},
			rnic.SendWR{WRID: uint64(10*i + 2), Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mrBack.SGE(off, n)}, RemoteAddr: mrDst.Addr() + uint64(off), RKey: mrDst.RKey()},
			rnic.SendWR{WRID: uint64(10*i + 3), Opcode: rnic.WRAtomicFetchAndAdd, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mrResults.SGE(16*i, 8)}, RemoteAddr: mrWords.Addr(), RKey: mrWords.RKey(), CompareAdd: 3},
			rnic.SendWR{WRID: uint64(10*i + 4), Opcode: rnic.WRAtomicCmpAndSwp, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mrResults.SGE(16*i+8, 8)}, RemoteAddr: mrWords.Addr() + 8, RKey: mrWords.RKey(),
				CompareAdd: uint64(i), Swap: uint64(i + 1)},
			rnic.SendWR{WRID: uint64(10*i + 5), Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mrSrc.SGE(off, 1000+i)}}))
		record(&log, wait(cqa, 6)) // five sends and the server's reply
	}
	join() // the server's last completion comes after the client's last reply
	fmt.Fprintf(&log, "server:\n%sdst %x\nback %x\nreply %x\nwords %x\nresults %x\n",
		slog.String(), sha256.Sum256(dst), sha256.Sum256(back), sha256.Sum256(reply), words, results)
	if !slices.Equal(dst, src) || !slices.Equal(back, src) {
		t.Errorf("WRITE/READ data differ from the source")
	}
	if got := binary.NativeEndian.Uint64(words); got != 3*rounds {
		t.Errorf("fetch-and-add total %d, want %d", got, 3*rounds)
	}
	return log.String(), timed.String()
}

func TestVirtualClockSameProgram(t *testing.T) {
	// On the wall clock, over link/mem.
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := must(rnic.Open(rnic.Options{Link: pa, Name: "a"})), must(rnic.Open(rnic.Options{Link: pb, Name: "b"}))
	real, _ := vprogram(t, a, b, func(f func()) func() {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		return func() { <-done }
	}, nil)
	a.Close()
	b.Close()

	virtual := func(trace bool) (string, string, time.Duration) {
		var tr strings.Builder
		v, err := vclock.New(vclock.Options{Profile: "cx6-200g", Seed: 1, Trace: &tr})
		if err != nil {
			t.Fatal(err)
		}
		opts := func(name string) rnic.Options {
			o := rnic.Options{Clock: v, Name: name}
			if trace {
				o.Trace = func(s string) { fmt.Fprintf(&tr, "%v %s: %s\n", v.Now(), name, s) }
			}
			return o
		}
		a, b := must(rnic.Open(opts("a"))), must(rnic.Open(opts("b")))
		var out, timed string
		goThread := func(f func()) func() {
			th := v.Go(f)
			// Threads share variables freely (one runs at a time) and
			// order through the clock's waits.
			return func() { must0(t, th.Wait()) }
		}
		if err := v.Run(func() { out, timed = vprogram(t, a, b, goThread, v.Now) }); err != nil {
			t.Fatal(err)
		}
		return out, timed + tr.String(), v.Now()
	}
	got, tr1, end := virtual(true)
	if got != real {
		t.Errorf("virtual time and wall clock differ:\nvirtual:\n%s\nwall clock:\n%s", got, real)
	}
	t.Logf("virtual run ended at %v", end)
	_, tr2, end2 := virtual(true)
	if tr1 != tr2 || end != end2 {
		t.Errorf("two virtual runs with one seed differ (ended at %v and %v)", end, end2)
	}
	t.Logf("trace %d lines; the completions at:\n%s", strings.Count(tr1, "\n"), tr1[:strings.Index(tr1, "#")])
}

// vpair is two connected RC QPs on devices of one virtual clock.
func vpair(t *testing.T, v *rnic.VirtualClock) (qpa, qpb *rnic.QP, cqa, cqb *rnic.CQ, pda, pdb *rnic.PD) {
	a, b := must(rnic.Open(rnic.Options{Clock: v})), must(rnic.Open(rnic.Options{Clock: v}))
	t.Cleanup(func() { a.Close(); b.Close() })
	pda, pdb = must(a.AllocPD()), must(b.AllocPD())
	cqa, cqb = must(a.CreateCQ(64)), must(b.CreateCQ(64))
	qcap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qpa = must(pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: qcap}))
	qpb = must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, Cap: qcap}))
	cp := rnic.ConnParams{Access: remoteRights}
	must0(t, qpa.Connect(qpb.Endpoint(cp), cp))
	must0(t, qpb.Connect(qpa.Endpoint(cp), cp))
	return
}

func newClock(t *testing.T) *rnic.VirtualClock {
	v, err := vclock.New(vclock.Options{Profile: "cx6-200g", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVirtualClockRules: what a virtual-time program may do and what it
// is told when it does not.
func TestVirtualClockRules(t *testing.T) {
	t.Run("deadlock", func(t *testing.T) {
		// A Wait for a completion that can never come: the program
		// stops with every thread waiting, and the Wait says so.
		v := newClock(t)
		_, _, cqa, _, _, _ := vpair(t, v)
		var werr error
		err := v.Run(func() { _, werr = cqa.Wait(context.Background(), make([]rnic.WC, 1)) })
		if !errors.Is(err, rnic.ErrDeadlock) || !errors.Is(werr, rnic.ErrDeadlock) {
			t.Fatalf("Run = %v, Wait = %v; want both to wrap ErrDeadlock", err, werr)
		}
	})
	t.Run("run-over", func(t *testing.T) {
		// A thread still waiting when main returns is told the run is
		// over; Run returns once it has.
		v := newClock(t)
		_, _, _, cqb, _, _ := vpair(t, v)
		var werr error
		err := v.Run(func() {
			v.Go(func() { _, werr = cqb.Wait(context.Background(), make([]rnic.WC, 1)) })
			must0(t, v.Sleep(time.Microsecond))
		})
		if err != nil || !errors.Is(werr, rnic.ErrRunOver) {
			t.Fatalf("Run = %v, the other thread's Wait = %v; want nil and ErrRunOver", err, werr)
		}
	})
	t.Run("sleep", func(t *testing.T) {
		// Sleep takes exactly its time; threads wake in time order, and
		// at one instant in the order they went to sleep.
		v := newClock(t)
		var order []string
		err := v.Run(func() {
			for i, d := range []time.Duration{3, 1, 2, 1} {
				v.Go(func() {
					must0(t, v.Sleep(d*time.Microsecond))
					order = append(order, fmt.Sprintf("%d@%v", i, v.Now()))
				})
			}
			must0(t, v.Sleep(10*time.Microsecond))
		})
		want := []string{"1@1µs", "3@1µs", "2@2µs", "0@3µs"}
		if err != nil || !slices.Equal(order, want) || v.Now() != 10*time.Microsecond {
			t.Fatalf("Run = %v, order %v at %v; want %v and 10µs", err, order, v.Now(), want)
		}
	})
	t.Run("join", func(t *testing.T) {
		// Thread.Wait returns when the thread's function has, at once if
		// it already has; waiting is a yield point like any other.
		v := newClock(t)
		var log []string
		err := v.Run(func() {
			a := v.Go(func() { must0(t, v.Sleep(5*time.Microsecond)); log = append(log, fmt.Sprintf("a@%v", v.Now())) })
			b := v.Go(func() { log = append(log, fmt.Sprintf("b@%v", v.Now())) })
			must0(t, a.Wait())
			log = append(log, fmt.Sprintf("joined a@%v", v.Now()))
			must0(t, b.Wait())
			log = append(log, fmt.Sprintf("joined b@%v", v.Now()))
		})
		want := []string{"b@0s", "a@5µs", "joined a@5µs", "joined b@5µs"}
		if err != nil || !slices.Equal(log, want) {
			t.Fatalf("Run = %v, log %v; want %v", err, log, want)
		}
	})
	t.Run("limit", func(t *testing.T) {
		// A program that would run forever ends at the limit: its waits
		// fail with ErrTimeLimit, and so does Run.
		v := newClock(t)
		v.SetLimit(50 * time.Microsecond)
		var werr error
		n := 0
		err := v.Run(func() {
			for {
				if werr = v.Sleep(time.Microsecond); werr != nil {
					return
				}
				n++
			}
		})
		if !errors.Is(err, rnic.ErrTimeLimit) || !errors.Is(werr, rnic.ErrTimeLimit) || n != 50 || v.Now() != 50*time.Microsecond {
			t.Fatalf("Run = %v, wait = %v after %d sleeps at %v; want ErrTimeLimit after 50 at 50µs", err, werr, n, v.Now())
		}
	})
	t.Run("busy-poll", func(t *testing.T) {
		// A Poll loop advances the clock by the profile's poll time per
		// call, so it ends, and sees the completion only once the model
		// says it reached host memory.
		v := newClock(t)
		qpa, _, cqa, _, pda, pdb := vpair(t, v)
		src := must(pda.RegMR(pattern(1, 64), rnic.AccessLocalWrite))
		dst := must(pdb.RegMR(make([]byte, 64), allAccess))
		polls := 0
		err := v.Run(func() {
			must0(t, qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{src.SGE(0, 64)}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}))
			wc := make([]rnic.WC, 1)
			for {
				n, err := cqa.Poll(wc)
				polls++
				if err != nil || n == 1 {
					must0(t, err)
					break
				}
			}
		})
		pollNs := time.Duration(vclock.Profile(v).Host.PollCQNs)
		postNs := time.Duration(vclock.Profile(v).Host.PostSendNs)
		if err != nil || time.Duration(polls)*pollNs+postNs != v.Now() {
			t.Fatalf("Run = %v; %d polls of %v after a post of %v, ending at %v", err, polls, pollNs, postNs, v.Now())
		}
		t.Logf("WRITE 64 B completion seen after %d polls, at %v", polls, v.Now())
	})
	t.Run("metadata", func(t *testing.T) {
		// A metadata-mode clock moves lengths: a 1 GiB region costs no
		// memory, WRITEs into it complete, and nothing pretends to have
		// bytes (RegMR is refused, ReadAt fails).
		v, err := vclock.New(vclock.Options{Profile: "cx6-200g", Metadata: true})
		must0(t, err)
		qpa, _, cqa, _, pda, pdb := vpair(t, v)
		if _, err := pda.RegMR(make([]byte, 64), 0); err == nil {
			t.Fatal("RegMR on a metadata clock succeeded")
		}
		src := must(pda.RegMRMetadata(1<<40, 1<<30, rnic.AccessLocalWrite, 2<<20))
		dst := must(pdb.RegMRMetadata(1<<40, 1<<30, allAccess, 0))
		if src.Len() != 1<<30 || src.Bytes() != nil || dst.Remote().Len != 1<<30 {
			t.Fatalf("Len %d, Bytes %v, Remote %+v", src.Len(), src.Bytes() != nil, dst.Remote())
		}
		if _, err := dst.ReadAt(make([]byte, 8), 0); err == nil {
			t.Fatal("ReadAt of a region without memory succeeded")
		}
		var wc []rnic.WC
		must0(t, v.Run(func() {
			for i := range 4 {
				must0(t, qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{src.SGE(i<<28, 1<<20)}, RemoteAddr: dst.Addr() + uint64(i)<<28, RKey: dst.RKey()}))
			}
			wc = waitN(t, cqa, 4)
		}))
		for i, c := range wc {
			if c.Status != rnic.WCSuccess || c.WRID != uint64(i) {
				t.Fatalf("completion %d: %+v", i, c)
			}
		}
		// 4 MiB at 200 Gb/s take at least 168 µs.
		if v.Now() < 168*time.Microsecond {
			t.Fatalf("4 MiB of WRITEs done at %v, faster than the line", v.Now())
		}
		w := newClock(t)
		wa, _, _, _, wpd, _ := vpair(t, w)
		if _, err := wpd.RegMRMetadata(0, 4096, 0, 0); err == nil {
			t.Fatal("RegMRMetadata on a clock with memory succeeded")
		}
		if _, err := w.WaitWrite(1, wa); err == nil {
			t.Fatal("WaitWrite without WatchWrites succeeded")
		}
	})
	t.Run("watch-writes", func(t *testing.T) {
		// WaitWrite returns when the WRITE's data is visible on the
		// target host, one poll after, and before the ACK brings the
		// writer its completion.
		v, err := vclock.New(vclock.Options{Profile: "cx6-200g", WatchWrites: true})
		must0(t, err)
		qpa, qpb, cqa, _, pda, pdb := vpair(t, v)
		src := must(pda.RegMR(pattern(3, 8192), rnic.AccessLocalWrite))
		dst := must(pdb.RegMR(make([]byte, 8192), allAccess))
		var seen, done time.Duration
		must0(t, v.Run(func() {
			v.Go(func() {
				if _, err := v.WaitWrite(1, qpb, qpa); err == nil {
					t.Error("WaitWrite on QPs of two devices succeeded")
				}
				if q, err := v.WaitWrite(8192, qpb); err != nil || q != qpb { // two WRITEs of 4 KiB
					t.Errorf("WaitWrite = %v, %v; want qpb", q, err)
				}
				seen = v.Now()
			})
			for i := range 2 {
				must0(t, qpa.PostSend(rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{src.SGE(i*4096, 4096)}, RemoteAddr: dst.Addr() + uint64(i*4096), RKey: dst.RKey()}))
			}
			waitN(t, cqa, 2)
			done = v.Now()
		}))
		if seen == 0 || seen >= done || !bytes.Equal(src.Bytes(), dst.Bytes()) {
			t.Fatalf("data seen at %v, completions at %v; data equal %v", seen, done, bytes.Equal(src.Bytes(), dst.Bytes()))
		}
		t.Logf("8 KiB visible at the target at %v, the writer's completions at %v", seen, done)
	})
	t.Run("outside-run", func(t *testing.T) {
		// Set-up and posting outside Run take no time; waiting there is
		// refused rather than hanging.
		v := newClock(t)
		_, _, cqa, _, _, _ := vpair(t, v)
		if _, err := cqa.Wait(context.Background(), make([]rnic.WC, 1)); err == nil {
			t.Fatal("Wait outside Run succeeded")
		}
		if err := v.Sleep(time.Microsecond); err == nil {
			t.Fatal("Sleep outside Run succeeded")
		}
		if v.Now() != 0 {
			t.Fatalf("clock at %v after set-up, want 0", v.Now())
		}
	})
	t.Run("options", func(t *testing.T) {
		v := newClock(t)
		pa, _, _ := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
		for _, o := range []rnic.Options{{Clock: v, Link: pa}, {Clock: v, Hardware: rnic.Hardware{DMAEngines: 2}}, {Clock: v, MTU: 9}} {
			if d, err := rnic.Open(o); err == nil {
				d.Close()
				t.Errorf("Open(%+v) succeeded", o)
			}
		}
		// A default address skips the ones devices were given.
		d1 := must(rnic.Open(rnic.Options{Clock: v, Addr: netip.MustParseAddr("10.0.0.1")}))
		d2 := must(rnic.Open(rnic.Options{Clock: v}))
		defer d1.Close()
		defer d2.Close()
		if g := must(d2.GID(1)); g != rnic.GIDFromAddr(netip.MustParseAddr("10.0.0.2")) {
			t.Errorf("second device's GID %v, want 10.0.0.2's", g)
		}
		if _, err := vclock.New(vclock.Options{Profile: "no-such-nic"}); err == nil {
			t.Error("an unknown profile was accepted")
		}
	})
}

// waitN waits for n completions of cq.
func waitN(t *testing.T, cq *rnic.CQ, n int) []rnic.WC {
	t.Helper()
	out := make([]rnic.WC, 0, n)
	wc := make([]rnic.WC, n)
	for len(out) < n {
		k, err := cq.Wait(context.Background(), wc[:n-len(out)])
		must0(t, err)
		out = append(out, wc[:k]...)
	}
	return out
}
