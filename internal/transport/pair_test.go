package transport

// End-to-end scenarios through the test wire: a mixed workload under
// seeded loss, duplication and reordering (IBTA §9.7 reliable connection:
// every message is delivered exactly once and in order, whatever the
// network does; §9.4.5: an atomic is executed exactly once).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rnic/rnic/wire"
)

// TestPairFaults runs SENDs, WRITEs, READs and FETCH_ADDs from A to B
// while the wire drops, duplicates and reorders frames in both directions
// (seeded, deterministic), then checks every byte and every completion,
// and that each FETCH_ADD was applied exactly once.
func TestPairFaults(t *testing.T) {
	const msgs = 24
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			p := newPair(t, nodeConfig{timeout: 6, retryCnt: 7, pathMTU: wire.MTU512, maxRdAtomic: 3, sqPSN: wire.PSN(rng.Uint32() & wire.PSNMask)},
				nodeConfig{pathMTU: wire.MTU512, maxDestRdAtomic: 3, minRNRTimer: 1, sqPSN: 0xFFFFFE})
			fate := func(i int, pk *wire.Packet) fate {
				switch r := rng.IntN(100); {
				case r < 8:
					return drop
				case r < 12:
					return dup
				case r < 18:
					return hold
				}
				return deliver
			}
			p.ab.filter, p.ba.filter = fate, fate
			fill(p.A.mem[:32768], byte(seed))
			fill(p.B.mem[32768:], byte(seed+1))
			binary.NativeEndian.PutUint64(p.B.mem[60000:], 1000)
			type exp struct {
				wc  WC
				dst []byte // where the data must end up
				src []byte
			}
			var want []exp
			adds := uint64(0)
			for i := range msgs {
				size := rng.IntN(2000) + 1
				off := (i * 1024) % 24000
				id := uint64(i + 1)
				switch i % 4 {
				case 0:
					roff := 24576 + (i/4)*2048 // a distinct receive buffer per SEND
					p.B.postRecv(p.B.recvWR(id, roff, 2048))
					p.A.post(SendWR{WRID: id, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{p.A.sge(off, size)}})
					want = append(want, exp{wc: WC{WRID: id, Status: WCSuccess, Opcode: WCSend}, dst: p.B.mem[roff : roff+size], src: p.A.mem[off : off+size]})
				case 1:
					p.A.post(SendWR{WRID: id, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(off, size)}, RemoteAddr: p.B.addr(off), RKey: p.B.key})
					want = append(want, exp{wc: WC{WRID: id, Status: WCSuccess, Opcode: WCRDMAWrite}, dst: p.B.mem[off : off+size], src: p.A.mem[off : off+size]})
				case 2:
					roff := 40000 + (i*512)%16000
					loff := 32768 + (i/4)*4096 // a distinct local buffer per READ
					p.A.post(SendWR{WRID: id, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{p.A.sge(loff, size)}, RemoteAddr: p.B.addr(roff), RKey: p.B.key})
					want = append(want, exp{wc: WC{WRID: id, Status: WCSuccess, Opcode: WCRDMARead},
						dst: p.A.mem[loff : loff+size], src: p.B.mem[roff : roff+size]})
				case 3:
					add := uint64(i)
					adds += add
					p.A.post(SendWR{WRID: id, Opcode: WRAtomicFetchAndAdd, Flags: SendSignaled, SGL: []SGE{p.A.sge(30000+i*8, 8)}, RemoteAddr: p.B.addr(60000), RKey: p.B.key, CompareAdd: add})
					want = append(want, exp{wc: WC{WRID: id, Status: WCSuccess, Opcode: WCFetchAdd}})
				}
				if i%6 == 5 {
					p.pump()
				}
			}
			p.settle(2000)
			got := p.A.sendWCs()
			var wcs []WC
			for _, w := range want {
				wcs = append(wcs, w.wc)
			}
			if len(got) != len(wcs) {
				t.Fatalf("%d completions, want %d:\n%s\nA: %s\nB: %s", len(got), len(wcs), wcString(got), p.A.e.DebugState(p.A.qp), p.B.e.DebugState(p.B.qp))
			}
			if t.Failed() || !wcsEqual(got, wcs) {
				t.Logf("A->B:\n%s\nB->A:\n%s", p.ab.ops(), p.ba.ops())
			}
			expectWCs(t, got, wcs...)
			for i, w := range want {
				if w.dst != nil && !bytes.Equal(w.dst, w.src) {
					t.Errorf("message %d (%v): data differs", i, w.wc.Opcode)
				}
			}
			if v := hostU64(p.B.mem[60000:]); v != 1000+adds {
				t.Errorf("atomic counter %d, want %d: a FETCH_ADD was lost or executed twice", v, 1000+adds)
			}
			// Each FETCH_ADD returned a distinct prior value (no replay
			// returned another's result).
			seen := map[uint64]bool{}
			for i := 3; i < msgs; i += 4 {
				v := hostU64(p.A.mem[30000+i*8:])
				if seen[v] || v < 1000 || v >= 1000+adds {
					t.Errorf("FETCH_ADD %d returned %d", i, v)
				}
				seen[v] = true
			}
			rwcs := p.B.recvWCs()
			if len(rwcs) != msgs/4 {
				t.Errorf("%d receive completions, want %d:\n%s", len(rwcs), msgs/4, wcString(rwcs))
			}
			for _, wc := range rwcs {
				if wc.Status != WCSuccess {
					t.Errorf("receive completion %+v", wc)
				}
			}
			if p.A.e.Query(p.A.qp).State != QPSRTS || p.B.e.Query(p.B.qp).State != QPSRTS {
				t.Errorf("QPs in %v / %v", p.A.e.Query(p.A.qp).State, p.B.e.Query(p.B.qp).State)
			}
		})
	}
}

func wcsEqual(a, b []WC) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].WRID != b[i].WRID || a[i].Status != b[i].Status {
			return false
		}
	}
	return true
}

// TestPairIPv6 runs a SEND, a WRITE and a READ between two nodes with IPv6
// GIDs (RoCEv2 over IPv6, IBTA A17.4.5): frames carry IPv6 headers, verify
// their ICRC and the data arrives.
func TestPairIPv6(t *testing.T) {
	a6, b6 := wire.GIDFromAddr(netip.MustParseAddr("fd00::1")), wire.GIDFromAddr(netip.MustParseAddr("fd00::2"))
	p := &pair{t: t, budget: 16, ab: dir{name: "A->B"}, ba: dir{name: "B->A"}}
	p.A = newNode(t, "A", a6, nodeConfig{})
	p.B = newNode(t, "B", b6, nodeConfig{})
	p.A.connect(b6, p.B.qp.QPN)
	p.B.connect(a6, p.A.qp.QPN)
	fill(p.A.mem[:3000], 1)
	fill(p.B.mem[8192:10192], 2)
	p.B.postRecv(p.B.recvWR(1, 0, 4096))
	p.A.post(SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 3000)}},
		SendWR{WRID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 3000)}, RemoteAddr: p.B.addr(4096), RKey: p.B.key},
		SendWR{WRID: 3, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{p.A.sge(4096, 2000)}, RemoteAddr: p.B.addr(8192), RKey: p.B.key})
	p.pump()
	expectWCs(t, p.A.sendWCs(), WC{WRID: 1, Status: WCSuccess, Opcode: WCSend}, WC{WRID: 2, Status: WCSuccess, Opcode: WCRDMAWrite},
		WC{WRID: 3, Status: WCSuccess, Opcode: WCRDMARead})
	if !bytes.Equal(p.B.mem[:3000], p.A.mem[:3000]) || !bytes.Equal(p.B.mem[4096:7096], p.A.mem[:3000]) || !bytes.Equal(p.A.mem[4096:6096], p.B.mem[8192:10192]) {
		t.Error("data differs")
	}
	for _, r := range p.ab.log {
		if pk := parse(t, r.bytes); !pk.IPv6 || pk.Src != a6 || pk.Dst != b6 {
			t.Fatalf("frame %v: IPv6 %v %v->%v", r, pk.IPv6, pk.Src, pk.Dst)
		}
	}
}
