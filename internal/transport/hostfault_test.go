package transport

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/rnic/rnic/internal/hw/bus"
)

// failingHost is a DMA bus over the program's memory whose accesses to
// [from, to) of a node's main region fail while armed, as if its pages had
// vanished under the NIC (the region's translation stays valid).
type failingHost struct {
	*bus.Faulty
	armed    atomic.Bool
	from, to uint64
}

func newFailingHost(from, to uint64) *failingHost {
	h := &failingHost{from: from, to: to}
	h.Faulty = &bus.Faulty{Mapper: new(bus.Local), Fail: func(x bus.Extent) bool {
		return h.armed.Load() && x.Addr < h.to && x.Addr+uint64(x.Len) > h.from
	}}
	return h
}

// TestHostMemoryFaults: when the host bus fails a DMA behind a valid
// translation, the NIC completes the work request with the status a
// protection fault of that access gives (the one rxe gives when its copy
// fails): local protection error for the requester's own memory, remote
// access error (NAK) for the responder's; counted in host_mem_errors, the
// QP in error, nothing else touched, no panic.
func TestHostMemoryFaults(t *testing.T) {
	const off, n = 8192, 4096 // the failing pages of the main region
	for _, tc := range []struct {
		name     string
		onA      bool // the failing memory is the requester's
		wr       func(p *pair) SendWR
		want     WCStatus
		wcOp     WCOpcode
		untouchB bool // the responder's memory must not change
	}{
		{"WRITE source", true, func(p *pair) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{p.A.sge(off, n)}, RemoteAddr: p.B.addr(off), RKey: p.B.key}
		}, WCLocProtErr, WCRDMAWrite, true},
		{"WRITE target", false, func(p *pair) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{p.A.sge(off, n)}, RemoteAddr: p.B.addr(off), RKey: p.B.key}
		}, WCRemAccessErr, WCRDMAWrite, true},
		{"READ source", false, func(p *pair) SendWR {
			return SendWR{Opcode: WRRDMARead, SGL: []SGE{p.A.sge(0, n)}, RemoteAddr: p.B.addr(off), RKey: p.B.key}
		}, WCRemAccessErr, WCRDMARead, true},
		{"READ destination", true, func(p *pair) SendWR {
			return SendWR{Opcode: WRRDMARead, SGL: []SGE{p.A.sge(off, n)}, RemoteAddr: p.B.addr(0), RKey: p.B.key}
		}, WCLocProtErr, WCRDMARead, true},
		{"atomic target", false, func(p *pair) SendWR {
			return SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{p.A.sge(0, 8)}, RemoteAddr: p.B.addr(off), RKey: p.B.key, CompareAdd: 1}
		}, WCRemAccessErr, WCFetchAdd, true},
		{"atomic result", true, func(p *pair) SendWR {
			return SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{p.A.sge(off, 8)}, RemoteAddr: p.B.addr(0), RKey: p.B.key, CompareAdd: 1}
		}, WCLocProtErr, WCFetchAdd, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFailingHost(off, off+n)
			ca, cb := nodeConfig{}, nodeConfig{host: h}
			if tc.onA {
				ca, cb = nodeConfig{host: h}, nodeConfig{}
			}
			p := newPair(t, ca, cb)
			fill(p.A.mem, 3)
			fill(p.B.mem, 9)
			beforeA, beforeB := bytes.Clone(p.A.mem), bytes.Clone(p.B.mem)
			h.armed.Store(true)
			wr := tc.wr(p)
			wr.WRID, wr.Flags = 1, SendSignaled
			p.A.post(wr)
			p.pump()
			expectWCs(t, p.A.sendWCs(), WC{WRID: 1, Status: tc.want, Opcode: tc.wcOp})
			faulted := p.B
			if tc.onA {
				faulted = p.A
			}
			if got := faulted.counter(HostMemErrors); got != 1 {
				t.Errorf("host_mem_errors %d on the node whose memory failed, want 1", got)
			}
			if st := p.A.qp.State(); st != QPSErr {
				t.Errorf("requester QP in %v, want ERR", st)
			}
			if !bytes.Equal(p.A.mem[off:off+n], beforeA[off:off+n]) {
				t.Error("the requester's failing pages changed")
			}
			if tc.untouchB && !bytes.Equal(p.B.mem, beforeB) {
				t.Error("the responder's memory changed")
			}
		})
	}
}
