package transport

import (
	"testing"

	"github.com/rnic/rnic/wire"
)

// TestQPResources: the QP listing reports each QP's state and the PSNs it
// has reached: after n single-packet WRITEs, A's sq_psn and B's rq_psn
// are n past the starting PSN; a QP still in RESET is listed in RESET; a
// destroyed QP is not listed.
func TestQPResources(t *testing.T) {
	const start = wire.PSN(0xfffffe) // the PSNs wrap on the way
	p := newPair(t, nodeConfig{sqPSN: start, rqPSN: 100}, nodeConfig{sqPSN: 100})
	idle := p.A.createQP(RC, nil)
	gone := p.A.createQP(UD, nil)
	p.A.e.DestroyQP(gone)
	const n = 5
	for i := range n {
		p.A.post(SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 64)},
			RemoteAddr: p.B.addr(0), RKey: p.B.key})
	}
	p.pump()
	if got := len(p.A.sendWCs()); got != n {
		t.Fatalf("%d completions, want %d", got, n)
	}
	a := p.A.e.QPResources(nil)
	b := p.B.e.QPResources(nil)
	want := []QPResource{
		{QPN: p.A.qp.QPN, Type: RC, State: QPSRTS, Port: 1, PD: testPD, SQPSN: start.Add(n), RQPSN: 100, DestQPN: p.B.qp.QPN},
		{QPN: idle.QPN, Type: RC, State: QPSReset, Port: 1, PD: testPD},
	}
	if len(a) != len(want) || a[0] != want[0] || a[1] != want[1] {
		t.Errorf("A's QPs:\n%+v\nwant\n%+v", a, want)
	}
	if len(b) != 1 || b[0].RQPSN != start.Add(n) || b[0].SQPSN != 100 || b[0].DestQPN != p.A.qp.QPN {
		t.Errorf("B's QPs: %+v; want rq_psn %v, sq_psn 100", b, start.Add(n))
	}
}
