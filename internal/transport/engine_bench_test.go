package transport

import (
	"testing"

	"github.com/rnic/rnic/wire"
)

// BenchmarkEnginePair measures the protocol engine's cost per packet, both
// sides together, on one goroutine: A sends 1 MiB RDMA WRITEs (MTU 4096)
// to B, frames move straight from one outbox to the other engine. No
// link, no goroutines: what is left is translation, DMA, headers, ICRC
// and the protocol work. b.SetBytes makes the MB/s the single-core rate.
// "icrc" computes and checks every ICRC; "offload" leaves them out and
// has the ATU's micro-TLB and page choice, as the wall-clock NICs on an intact link
// (link/mem) do: the same work as the root package's
// BenchmarkWriteBW/1MiB, which runs each engine on its own goroutine.
func BenchmarkEnginePair(b *testing.B) {
	for _, mode := range []string{"icrc", "offload"} {
		b.Run(mode, func(b *testing.B) { benchEnginePair(b, mode == "offload") })
	}
}

func benchEnginePair(b *testing.B, icrcOffload bool) {
	const size = 1 << 20
	p := newPair(b, nodeConfig{pathMTU: wire.MTU4096, memSize: 2 * size, sqDepth: 64, icrcOffload: icrcOffload, utlb: icrcOffload},
		nodeConfig{pathMTU: wire.MTU4096, memSize: 2 * size, icrcOffload: icrcOffload, utlb: icrcOffload})
	move := func(from, to *node) int {
		out := from.e.Outbox()
		n := len(out)
		if n > 0 {
			to.e.Receive(0, out)
			from.e.ClearOutbox()
		}
		return n
	}
	wr := SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, size)}, RemoteAddr: p.B.addr(size), RKey: p.B.key}
	wcs := make([]WC, 4)
	one := func() {
		if _, err := p.A.qp.PostSend([]SendWR{wr}); err != nil {
			b.Fatal(err)
		}
		for {
			p.A.e.Run(0, 64)
			move(p.A, p.B)
			p.B.e.Run(0, 64)
			move(p.B, p.A)
			if k := p.A.scq.Poll(wcs); k > 0 {
				if wcs[0].Status != WCSuccess {
					b.Fatalf("%+v", wcs[0])
				}
				return
			}
		}
	}
	one()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		one()
	}
}

// BenchmarkEnginePairSmall is the engine's floor under the simulator's
// small-message workload: 64 B signaled RDMA WRITEs, 16 posted at a time,
// one packet per Run as the simulated NIC calls it, frames moved straight
// between the engines. ns/pkt counts every frame both sent (the WRITEs
// and the ACKs); the simulator cannot run faster than this per packet.
func BenchmarkEnginePairSmall(b *testing.B) {
	const size, batch = 64, 16
	p := newPair(b, nodeConfig{pathMTU: wire.MTU4096, memSize: 4096, sqDepth: 64},
		nodeConfig{pathMTU: wire.MTU4096, memSize: 4096})
	move := func(from, to *node) {
		if out := from.e.Outbox(); len(out) > 0 {
			to.e.Receive(0, out)
			from.e.ClearOutbox()
		}
	}
	wrs := make([]SendWR, batch)
	for i := range wrs {
		wrs[i] = SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(i*size, size)}, RemoteAddr: p.B.addr(i * size), RKey: p.B.key}
	}
	wcs := make([]WC, batch)
	round := func() {
		if _, err := p.A.qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		for done := 0; done < batch; {
			for p.A.e.Run(0, 1) {
				move(p.A, p.B)
			}
			move(p.A, p.B)
			for p.B.e.Run(0, 1) {
				move(p.B, p.A)
			}
			move(p.B, p.A)
			k := p.A.scq.Poll(wcs)
			for _, wc := range wcs[:k] {
				if wc.Status != WCSuccess {
					b.Fatalf("%+v", wc)
				}
			}
			done += k
		}
	}
	round()
	pkts := func() uint64 { return p.A.e.Counters()[TxPackets] + p.B.e.Counters()[TxPackets] }
	start := pkts()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		round()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts()-start), "ns/pkt")
}
