package transport

import (
	"bytes"
	"runtime"
	"testing"
	"unsafe"
)

// TestQPContextSize keeps the QP context within its budget: 64 K idle QPs
// in well under 32 MiB (hardware QPCs are 256–375 bytes). Counters and
// READ recovery state are allocated when first used, so they are not part
// of it; growing the struct past the budget should be a decision, not an
// accident.
func TestQPContextSize(t *testing.T) {
	const budget = 448 // a Go size class: what one QP's allocation takes
	if n := unsafe.Sizeof(QP{}); n > budget {
		t.Errorf("QP context is %d bytes, budget %d", n, budget)
	}
}

// BenchmarkQPContextMemory reports what the NIC holds per idle QP
// (qpc_B/QP): the heap that 4096 RC QPs with one-entry queues take, less
// what their rings take alone (ring_B/QP: host memory, the WQEs the
// application posts, which a hardware QPC does not hold either).
func BenchmarkQPContextMemory(b *testing.B) {
	const n = 4096
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for range b.N {
		core, err := NewCore(CoreConfig{MaxQP: 2 * n, MaxCQ: 1, MaxMR: 1})
		if err != nil {
			b.Fatal(err)
		}
		cq := NewCQ(1, 16)
		qps := make([]*QP, n)
		rings := make([]any, 2*n)
		before := heap()
		for i := range qps {
			qpn, idx, ok := core.QPs.Alloc()
			if !ok {
				b.Fatal("QP table full")
			}
			qps[i], err = core.Engine.CreateQP(&QPInit{Type: RC, SendCQ: cq, RecvCQ: cq,
				Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}, qpn, idx)
			if err != nil {
				b.Fatal(err)
			}
		}
		withQPs := heap()
		for i := 0; i < n; i++ {
			rings[2*i], rings[2*i+1] = newSendRing(1, 1, 0, nil), newRecvRing(1, 1, nil)
		}
		ring := float64(heap()-withQPs) / n
		b.ReportMetric(float64(withQPs-before)/n-ring, "qpc_B/QP")
		b.ReportMetric(ring, "ring_B/QP")
		runtime.KeepAlive(qps)
		runtime.KeepAlive(rings)
	}
}

// TestResponderResourcesOnDemand: a connected QP holds no READ/atomic
// responder resources until a READ or atomic request arrives; then it has
// max_dest_rd_atomic of them, and the READ is answered.
func TestResponderResourcesOnDemand(t *testing.T) {
	p := newPair(t, nodeConfig{}, nodeConfig{})
	resp := &p.B.qp.resp
	if resp.res != nil || resp.resCap == 0 {
		t.Fatalf("connected QP: %d resources allocated, %d configured; want 0 and some", len(resp.res), resp.resCap)
	}
	p.A.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 64)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
	p.pump()
	if resp.res != nil {
		t.Fatalf("a WRITE allocated %d responder resources", len(resp.res))
	}
	fill(p.B.mem[8192:12288], 7)
	p.A.post(SendWR{WRID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{p.A.sge(4096, 4096)}, RemoteAddr: p.B.addr(8192), RKey: p.B.key})
	p.pump()
	if want := max(int(p.B.qp.attr.MaxDestRdAtomic), 1); len(resp.res) != want {
		t.Errorf("after a READ: %d responder resources, want %d", len(resp.res), want)
	}
	wcs := p.A.sendWCs()
	if len(wcs) != 2 || wcs[1].Status != WCSuccess || !bytes.Equal(p.A.mem[4096:8192], p.B.mem[8192:12288]) {
		t.Errorf("completions %+v; READ data equal: %v", wcs, bytes.Equal(p.A.mem[4096:8192], p.B.mem[8192:12288]))
	}
}
