package rnic_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// Benchmarks over link/mem, each beside the physical reference measured in
// the same run: copy() of the same sizes. Run with
//
//	go test -run '^$' -bench . -benchtime 2s .
//
// WriteBW keeps up to benchDepth WRITEs in flight (perftest's tx depth)
// and reports MB/s, the copy() rate of the same message size, and their
// ratio. WriteLat is one signaled 8-byte WRITE and its completion at a
// time: the round trip of a WRITE and its ACK.

const benchDepth = 64

func BenchmarkWriteBW(b *testing.B) { benchBW(b, rnic.WRRDMAWrite) }

// BenchmarkReadBW is WriteBW with READs: a READs b's region into its own
// (b's NIC reads and sends, a's places), at most the QP's 16 outstanding.
func BenchmarkReadBW(b *testing.B) { benchBW(b, rnic.WRRDMARead) }

func benchBW(b *testing.B, op rnic.WROpcode) {
	for _, size := range []int{64, 4 << 10, 64 << 10, 1 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			p := newPair(b, pairOpts{cap: rnic.QPCap{MaxSendWR: benchDepth * 2, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
				conn: rnic.ConnParams{Access: rnic.AccessRemoteWrite | rnic.AccessRemoteRead, MaxRdAtomic: 16, MaxDestRdAtomic: 16}})
			src := make([]byte, size)
			dst := make([]byte, size)
			mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
			mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessRemoteRead))
			wr := rnic.SendWR{Opcode: op, SGL: []rnic.SGE{mra.SGE(0, size)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}
			wcs := make([]rnic.WC, benchDepth)
			ctx := context.Background()
			// Every 16th WRITE is signaled (as perftest's cq_mod); a
			// completion retires it and the unsignaled ones before it.
			const sigEvery = 16
			post := func(i int) {
				wr.WRID = uint64(i)
				wr.Flags = 0
				if i%sigEvery == sigEvery-1 {
					wr.Flags = rnic.SendSignaled
				}
				if err := p.qpa.PostSend(wr); err != nil {
					b.Fatal(err)
				}
			}
			run := func(n int) {
				inflight, posted := 0, 0
				for posted < n || inflight > 0 {
					for posted < n && inflight < benchDepth {
						post(posted)
						posted++
						inflight++
					}
					k, err := p.cqa.Wait(ctx, wcs)
					if err != nil {
						b.Fatal(err)
					}
					for _, wc := range wcs[:k] {
						if wc.Status != rnic.WCSuccess {
							b.Fatalf("completion %+v", wc)
						}
					}
					inflight -= k * sigEvery
				}
			}
			run(4 * sigEvery) // warm up: caches, pools
			n := b.N
			n = (n + sigEvery - 1) / sigEvery * sigEvery
			// The reference is measured on both sides of the run and the
			// better kept: a neighbour's noise during one measurement
			// must not flatter the ratio (one run saw copy() at 32 GB/s
			// instead of 80).
			before := copyRate(size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			run(n)
			el := time.Since(start)
			b.StopTimer()
			rate := float64(size) * float64(n) / el.Seconds() / 1e6
			cp := max(before, copyRate(size))
			b.ReportMetric(cp, "copy_MB/s")
			b.ReportMetric(rate/cp, "ratio")
		})
	}
}

// BenchmarkUnreliableBW is WriteBW for UC WRITEs and UD SENDs, whose
// frames carry references to the sender's memory in process and whose
// work completes once the receiver consumed them (not when sent): the
// pipeline holds benchDepth messages, every 16th signaled. The UD
// receiver's queue is kept full from its completions.
func BenchmarkUnreliableBW(b *testing.B) {
	for _, c := range []struct {
		typ  rnic.QPType
		size int
	}{{rnic.UC, 4 << 10}, {rnic.UC, 64 << 10}, {rnic.UD, 4 << 10}} {
		b.Run(fmt.Sprintf("%v/%s", c.typ, sizeName(c.size)), func(b *testing.B) {
			const recvs = 256
			p := newPair(b, pairOpts{typ: c.typ, cap: rnic.QPCap{MaxSendWR: benchDepth * 2, MaxRecvWR: recvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
			src, dst := make([]byte, c.size), make([]byte, 40+c.size)
			mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
			mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
			wr := rnic.SendWR{Opcode: rnic.WRRDMAWrite, SGL: []rnic.SGE{mra.SGE(0, c.size)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}
			recv := rnic.RecvWR{SGL: []rnic.SGE{mrb.SGE(0, 40+c.size)}}
			if c.typ == rnic.UD {
				ah := must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
				wr = rnic.SendWR{Opcode: rnic.WRSend, SGL: wr.SGL, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: 0x11111111}
				for range recvs {
					must0(b, p.qpb.PostRecv(recv))
				}
			}
			wcs, rwcs := make([]rnic.WC, benchDepth), make([]rnic.WC, 64)
			const sigEvery = 16
			run := func(n int) {
				inflight, posted := 0, 0
				for posted < n || inflight > 0 {
					for posted < n && inflight < benchDepth {
						wr.WRID, wr.Flags = uint64(posted), 0
						if posted%sigEvery == sigEvery-1 {
							wr.Flags = rnic.SendSignaled
						}
						must0(b, p.qpa.PostSend(wr))
						posted++
						inflight++
					}
					k := must(p.cqa.Poll(wcs))
					for _, wc := range wcs[:k] {
						if wc.Status != rnic.WCSuccess {
							b.Fatalf("completion %+v", wc)
						}
					}
					inflight -= k * sigEvery
					if c.typ == rnic.UD {
						k := must(p.cqb.Poll(rwcs))
						for range k {
							must0(b, p.qpb.PostRecv(recv))
						}
					}
				}
			}
			run(4 * sigEvery)
			n := (b.N + sigEvery - 1) / sigEvery * sigEvery
			rxName := "rx_write_requests"
			if c.typ == rnic.UD {
				rxName = "rx_send_requests"
			}
			rx0 := counter(b, p.b, rxName)
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			b.ResetTimer()
			run(n)
			b.StopTimer()
			// UC and UD may lose what a receiver cannot take: the share
			// of the messages that arrived is reported beside the rate
			// (the responder counts a message's requests once).
			b.ReportMetric(float64(counter(b, p.b, rxName)-rx0)/float64(n), "delivered")
		})
	}
}

func BenchmarkWriteLat(b *testing.B) {
	for _, mode := range []string{"poll", "wait"} {
		b.Run(mode, func(b *testing.B) { benchWriteLat(b, mode) })
	}
}

func benchWriteLat(b *testing.B, mode string) {
	p := newPair(b, pairOpts{cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	src := make([]byte, 8)
	dst := make([]byte, 8)
	mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
	mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	wr := rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled, SGL: []rnic.SGE{mra.SGE(0, 8)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}
	wcs := make([]rnic.WC, 1)
	once := func() {
		if err := p.qpa.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		if mode == "poll" {
			// Busy-poll, as perftest does.
			for {
				n, err := p.cqa.Poll(wcs)
				if err != nil {
					b.Fatal(err)
				}
				if n > 0 {
					break
				}
			}
		} else if _, err := p.cqa.Wait(context.Background(), wcs); err != nil {
			b.Fatal(err)
		}
		if wcs[0].Status != rnic.WCSuccess {
			b.Fatalf("completion %+v", wcs[0])
		}
	}
	for i := 0; i < 1000; i++ {
		once()
	}
	// ns/op is the mean, which a rare stall of milliseconds moves (a busy
	// poller keeps a CPU, and the OS may take the engine's thread off the
	// other); the median is the typical round trip.
	rtts := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		once()
		rtts[i] = time.Since(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(median(rtts).Nanoseconds()), "p50_ns")
	b.ReportMetric(float64(percentile(rtts, 0.99).Nanoseconds()), "p99_ns")
	b.ReportMetric(float64(slices.Max(rtts).Nanoseconds())/1e3, "max_usec")
	b.ReportMetric(copyNs(8), "copy_ns")
}

func median(d []time.Duration) time.Duration { return percentile(d, 0.5) }

// percentile returns the q-quantile of d (0 < q < 1), d unchanged.
func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// BenchmarkIdleQPMemory reports the memory per idle QP: with 128-entry
// send and receive queues (the rings live in "host memory": the WQEs the
// application posts), and with one-entry queues, which leaves the QP
// context (QPC) the NIC itself keeps.
func BenchmarkIdleQPMemory(b *testing.B) {
	for _, depth := range []uint32{128, 1} {
		b.Run(fmt.Sprintf("queues%d", depth), func(b *testing.B) {
			const n = 4096
			for i := 0; i < b.N; i++ {
				pa, _, err := mem.Pipe(netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"), mem.Faults{}, mem.Faults{})
				if err != nil {
					b.Fatal(err)
				}
				dev := must(rnic.Open(rnic.Options{Link: pa}))
				pd := must(dev.AllocPD())
				cq := must(dev.CreateCQ(16))
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				qps := make([]*rnic.QP, n)
				for j := range qps {
					qps[j] = must(pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq,
						Cap: rnic.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}}))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/QP")
				runtime.KeepAlive(qps)
				dev.Close()
			}
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// copyRate measures copy() of size-byte messages between two buffers, in
// MB/s: the memory system's rate for the same job without a NIC. It is the
// best of five rounds, so that a noisy neighbour does not flatter the NIC.
func copyRate(size int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	n := max(1, (64<<20)/size)
	best := 0.0
	for range 5 {
		start := time.Now()
		for i := 0; i < n; i++ {
			copy(dst, src)
		}
		best = max(best, float64(size)*float64(n)/time.Since(start).Seconds()/1e6)
	}
	return best
}

// copyNs measures one copy() of size bytes, in ns (best of five rounds).
func copyNs(size int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	const n = 1 << 20
	best := 0.0
	for r := range 5 {
		start := time.Now()
		for i := 0; i < n; i++ {
			copy(dst, src[:size])
		}
		ns := float64(time.Since(start).Nanoseconds()) / n
		if r == 0 || ns < best {
			best = ns
		}
	}
	return best
}
