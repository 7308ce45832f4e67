package transport

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rnic/rnic/internal/hw/bus"
)

// TestGatherBurst: a requester that gathers a burst of packets' payloads
// with one DMA access (SetGatherBurst, as a NIC serving other processes
// does) puts the same frames on the wire, byte for byte, as one that
// gathers packet by packet, and bills the same DMA reads; the data
// arrives. Messages of many packets, SGLs whose SGEs end inside a packet,
// a last packet shorter than the MTU, immediate data, SENDs and UC.
func TestGatherBurst(t *testing.T) {
	type msg struct {
		op   WROpcode
		sgl  [][2]int // (offset, length) of each SGE in A's region
		roff int      // WRITE: offset in B's region
	}
	for _, tc := range []struct {
		name  string
		typ   QPType
		burst int
		msgs  []msg
	}{
		{"WRITE of 64 packets", RC, 16, []msg{{op: WRRDMAWrite, sgl: [][2]int{{0, 65536}}}}},
		{"WRITE, SGEs inside packets", RC, 16, []msg{{op: WRRDMAWrite, sgl: [][2]int{{100, 1500}, {5000, 3}, {9000, 7777}}, roff: 40}}},
		{"WRITE with immediate, odd length", RC, 5, []msg{{op: WRRDMAWriteWithImm, sgl: [][2]int{{1, 10001}}, roff: 3}}},
		{"SENDs", RC, 64, []msg{{op: WRSend, sgl: [][2]int{{0, 3000}}}, {op: WRSend, sgl: [][2]int{{4096, 1024}}}, {op: WRSend, sgl: [][2]int{{8192, 2049}, {20000, 7}}}}},
		{"UC WRITE", UC, 16, []msg{{op: WRRDMAWrite, sgl: [][2]int{{0, 20000}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var host *countingBus
			run := func(burst int) (*pair, []frameRec) {
				cfg := nodeConfig{qpType: tc.typ}
				host = &countingBus{Local: new(bus.Local)}
				ca := cfg
				ca.host = host
				p := newPair(t, ca, cfg)
				if burst > 0 {
					p.A.e.SetGatherBurst(burst)
					if p.A.e.gatherBurst != burst {
						t.Fatalf("SetGatherBurst(%d) on a Local bus left %d", burst, p.A.e.gatherBurst)
					}
				}
				fill(p.A.mem, 7)
				for i, m := range tc.msgs {
					if m.op == WRSend {
						p.B.postRecv(p.B.recvWR(uint64(i), 16384*i%len(p.B.mem), 16384))
					}
				}
				p.B.postRecv(p.B.recvWR(99, 0, 16)) // the immediate's
				for i, m := range tc.msgs {
					wr := SendWR{WRID: uint64(i), Opcode: m.op, Flags: SendSignaled, RemoteAddr: p.B.addr(m.roff), RKey: p.B.key, ImmData: 0xfeed}
					for _, s := range m.sgl {
						wr.SGL = append(wr.SGL, p.A.sge(s[0], s[1]))
					}
					p.A.post(wr)
				}
				p.pump()
				if wcs := p.A.sendWCs(); tc.typ == RC && len(wcs) != len(tc.msgs) {
					t.Fatalf("burst %d: %d completions, want %d: %v", burst, len(wcs), len(tc.msgs), wcs)
				}
				return p, p.ab.log
			}
			_, want := run(0)
			perPacket := host.gathers
			p, got := run(tc.burst)
			if host.gatherVs == 0 || host.gathers+host.gatherVs >= perPacket {
				t.Errorf("with bursts: %d gathers and %d vectored ones, where packet by packet took %d gathers", host.gathers, host.gatherVs, perPacket)
			}
			if len(got) != len(want) {
				t.Fatalf("burst: %d frames, packet by packet %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i].bytes, want[i].bytes) {
					t.Fatalf("frame %d differs: burst %v, packet by packet %v", i, got[i], want[i])
				}
			}
			if tc.msgs[0].op == WRRDMAWrite && len(tc.msgs[0].sgl) == 1 {
				s := tc.msgs[0].sgl[0]
				if !bytes.Equal(p.B.mem[tc.msgs[0].roff:tc.msgs[0].roff+s[1]], p.A.mem[s[0]:s[0]+s[1]]) {
					t.Error("the WRITE's data did not arrive")
				}
			}
		})
	}
}

// TestGatherBurstFault: a page of the message that vanishes under the DMA
// fails the burst's one access; the requester then sends packet by packet
// up to the faulting one and completes the WQE with a local protection
// error, exactly as without bursts: the same frames, the same completion.
func TestGatherBurstFault(t *testing.T) {
	const off, n = 8192, 4096 // the failing pages of A's region: packets 8-11 of the WRITE
	run := func(burst int) ([]frameRec, []WC, uint64) {
		h := newFailingHost(off, off+n)
		p := newPair(t, nodeConfig{host: h}, nodeConfig{})
		p.A.e.SetGatherBurst(burst)
		if p.A.e.gatherBurst != burst {
			t.Fatalf("SetGatherBurst(%d) on a fault-injecting Local bus left %d", burst, p.A.e.gatherBurst)
		}
		fill(p.A.mem, 3)
		h.armed.Store(true)
		p.A.post(SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 32768)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
		p.pump()
		return p.ab.log, p.A.sendWCs(), p.A.counter(HostMemErrors)
	}
	want, wantWC, _ := run(0)
	for _, burst := range []int{4, 16} {
		t.Run(fmt.Sprint("burst=", burst), func(t *testing.T) {
			got, wc, faults := run(burst)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("frames differ:\nburst:\n%v\npacket by packet:\n%v", got, want)
			}
			expectWCs(t, wc, wantWC...)
			if len(wc) != 1 || wc[0].Status != WCLocProtErr {
				t.Errorf("completions %v, want one local protection error", wc)
			}
			if faults != 1 {
				t.Errorf("host_mem_errors %d, want 1 (the faulting packet's)", faults)
			}
		})
	}
	// Fault injection over a bus without a vectored gather: no bursts.
	h := &bus.Faulty{Mapper: plainMapper{new(bus.Local)}, Fail: func(bus.Extent) bool { return false }}
	p := newPair(t, nodeConfig{host: h}, nodeConfig{})
	if p.A.e.SetGatherBurst(16); p.A.e.gatherBurst != 0 {
		t.Errorf("SetGatherBurst on a bus without GatherV left %d", p.A.e.gatherBurst)
	}
}

// plainMapper hides Local's GatherV.
type plainMapper struct{ l *bus.Local }

func (m plainMapper) Gather(dst []byte, src []bus.Extent) (int, error)  { return m.l.Gather(dst, src) }
func (m plainMapper) Scatter(dst []bus.Extent, src []byte) (int, error) { return m.l.Scatter(dst, src) }
func (m plainMapper) Atomic(x bus.Extent, op bus.AtomicOp, a, b uint64) (uint64, error) {
	return m.l.Atomic(x, op, a, b)
}
func (m plainMapper) Map(buf []byte) (bus.Space, error) { return m.l.Map(buf) }
func (m plainMapper) Unmap(sp bus.Space) error          { return m.l.Unmap(sp) }

// countingBus counts the DMA reads of the program's memory by kind.
type countingBus struct {
	*bus.Local
	gathers, gatherVs   int
	scatters, scatterVs int
}

func (c *countingBus) Gather(dst []byte, src []bus.Extent) (int, error) {
	c.gathers++
	return c.Local.Gather(dst, src)
}

func (c *countingBus) GatherV(dsts [][]byte, src []bus.Extent) (int, error) {
	c.gatherVs++
	return c.Local.GatherV(dsts, src)
}

// TestReadResponseBurst: a responder that reads a burst of READ
// responses' payloads with one DMA access sends the same responses, byte
// for byte, as one that reads packet by packet; a page that vanishes
// under the READ answers with the same access error either way.
func TestReadResponseBurst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		off, n    int // the READ: B's region [off, off+n) into A's [0, n)
		failFrom  uint64
		wantWC    WCStatus
		minBursts int
	}{
		{"64 KiB", 0, 65536, 0, WCSuccess, 4},
		{"odd length", 7, 10001, 0, WCSuccess, 1},
		{"two packets", 100, 1025, 0, WCSuccess, 1},
		{"a page gone", 0, 32768, 16384, WCRemAccessErr, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(burst int) ([]frameRec, []WC, *countingBus, *pair) {
				cb, host, fh := countingHost(tc.failFrom)
				p := newPair(t, nodeConfig{}, nodeConfig{host: host})
				p.B.e.SetGatherBurst(burst)
				fill(p.B.mem, 5)
				if fh != nil {
					fh.armed.Store(true)
				}
				p.A.post(SendWR{WRID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, tc.n)}, RemoteAddr: p.B.addr(tc.off), RKey: p.B.key})
				p.pump()
				return p.ba.log, p.A.sendWCs(), cb, p
			}
			want, wantWC, _, _ := run(0)
			got, wc, cb, p := run(16)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("frames differ:\nburst:\n%v\npacket by packet:\n%v", got, want)
			}
			for i := range got {
				if !bytes.Equal(got[i].bytes, want[i].bytes) {
					t.Fatalf("frame %d differs: burst %v, packet by packet %v", i, got[i], want[i])
				}
			}
			expectWCs(t, wc, wantWC...)
			if len(wc) != 1 || wc[0].Status != tc.wantWC {
				t.Errorf("completions %v, want one with %v", wc, tc.wantWC)
			}
			if cb.gatherVs < tc.minBursts {
				t.Errorf("%d vectored gathers, want %d or more", cb.gatherVs, tc.minBursts)
			}
			if tc.wantWC == WCSuccess && !bytes.Equal(p.A.mem[:tc.n], p.B.mem[tc.off:tc.off+tc.n]) {
				t.Error("the READ's data did not arrive")
			}
		})
	}
}

func (c *countingBus) Scatter(dst []bus.Extent, src []byte) (int, error) {
	c.scatters++
	return c.Local.Scatter(dst, src)
}

func (c *countingBus) ScatterV(dst []bus.Extent, srcs [][]byte) (int, error) {
	c.scatterVs++
	return c.Local.ScatterV(dst, srcs)
}

// TestPlaceBurst: a responder that places the payloads of a run of
// received WRITE packets with one DMA access (SetPlaceBurst, as a NIC
// serving other processes does) leaves the same bytes in its memory,
// sends the same ACKs, byte for byte, and completes the same work as one
// that places packet by packet, with fewer accesses. Messages of many
// packets, two in a row, odd offsets and lengths, immediate data, UC, a
// SEND between WRITEs (its completion reveals the WRITE before it), and
// a link that duplicates and reorders frames.
func TestPlaceBurst(t *testing.T) {
	type msg struct {
		op         WROpcode
		loff, roff int
		n          int
	}
	for _, tc := range []struct {
		name  string
		typ   QPType
		burst int
		msgs  []msg
		fates map[int]fate
	}{
		{"WRITE of 16 packets", RC, 64, []msg{{WRRDMAWrite, 0, 0, 65536}}, nil},
		{"two WRITEs, small bursts", RC, 3, []msg{{WRRDMAWrite, 0, 0, 20000}, {WRRDMAWrite, 20000, 30001, 9000}}, nil},
		{"WRITE with immediate, odd", RC, 64, []msg{{WRRDMAWriteWithImm, 1, 3, 10001}}, nil},
		{"WRITE, SEND, WRITE", RC, 64, []msg{{WRRDMAWrite, 0, 0, 12288}, {WRSend, 12288, 0, 100}, {WRRDMAWrite, 16384, 40000, 8193}}, nil},
		{"UC WRITE", UC, 64, []msg{{WRRDMAWrite, 0, 0, 20000}}, nil},
		{"SEND of 5 packets", RC, 64, []msg{{WRSend, 3, 0, 18000}}, nil},
		{"UC SEND", UC, 2, []msg{{WRSend, 0, 0, 9000}}, nil},
		{"duplicated and reordered", RC, 64, []msg{{WRRDMAWrite, 0, 0, 32768}}, map[int]fate{2: dup, 5: hold, 6: dup}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var host *countingBus
			run := func(burst int) (*pair, []frameRec) {
				cfg := nodeConfig{qpType: tc.typ}
				host = &countingBus{Local: new(bus.Local)}
				cb := cfg
				cb.host = host
				p := newPair(t, cfg, cb)
				if burst > 0 {
					p.B.e.SetPlaceBurst(burst)
					if p.B.e.place.max != burst {
						t.Fatalf("SetPlaceBurst(%d) on a Local bus left %d", burst, p.B.e.place.max)
					}
				}
				for i, f := range tc.fates {
					p.ab.set(f, i)
				}
				fill(p.A.mem, 9)
				p.B.postRecv(p.B.recvWR(98, 40000, 20000)) // the SEND's
				p.B.postRecv(p.B.recvWR(99, 0, 16))        // the immediate's
				for i, m := range tc.msgs {
					p.A.post(SendWR{WRID: uint64(i), Opcode: m.op, Flags: SendSignaled, SGL: []SGE{p.A.sge(m.loff, m.n)},
						RemoteAddr: p.B.addr(m.roff), RKey: p.B.key, ImmData: 0xbeef})
				}
				p.pump()
				return p, p.ba.log
			}
			want, wantAcks := run(0)
			perPacket := host.scatters
			got, gotAcks := run(tc.burst)
			if host.scatterVs == 0 || host.scatters+host.scatterVs >= perPacket {
				t.Errorf("with bursts: %d scatters and %d vectored ones, where packet by packet took %d scatters", host.scatters, host.scatterVs, perPacket)
			}
			if !bytes.Equal(got.B.mem, want.B.mem) {
				t.Fatalf("B's memory differs (first at %d)", firstDiffBytes(got.B.mem, want.B.mem))
			}
			for _, m := range tc.msgs {
				if m.op != WRSend && !bytes.Equal(got.B.mem[m.roff:m.roff+m.n], got.A.mem[m.loff:m.loff+m.n]) {
					t.Errorf("the WRITE to %d did not arrive", m.roff)
				}
			}
			if fmt.Sprint(gotAcks) != fmt.Sprint(wantAcks) {
				t.Errorf("B's frames differ:\nburst:\n%v\npacket by packet:\n%v", gotAcks, wantAcks)
			}
			sent := got.A.sendWCs()
			expectWCs(t, sent, want.A.sendWCs()...)
			expectWCs(t, got.B.recvWCs(), want.B.recvWCs()...)
			if tc.typ == RC && len(sent) != len(tc.msgs) {
				t.Errorf("%d send completions, want %d", len(sent), len(tc.msgs))
			}
		})
	}
}

// TestPlaceBurstFault: a page of the target that vanishes under the DMA
// fails the burst's one access; the responder then places payload by
// payload, and the packet that cannot be written answers with a remote
// access error NAK at its PSN, exactly as without bursts: the same
// frames from B, the same completion at A, one host_mem_error, and the
// bytes before the faulting packet placed.
func TestPlaceBurstFault(t *testing.T) {
	const off, n = 16384, 4096 // the failing page of B's region: packet 4 of the message
	for _, tc := range []struct {
		op     WROpcode
		wantWC WCStatus
	}{{WRRDMAWrite, WCRemAccessErr}, {WRSend, WCRemOpErr}} {
		var recvs []WC // B's receive completions of the last run
		run := func(burst int) ([]frameRec, []WC, uint64, []byte) {
			h := newFailingHost(off, off+n)
			p := newPair(t, nodeConfig{}, nodeConfig{host: h})
			p.B.e.SetPlaceBurst(burst)
			if p.B.e.place.max != burst {
				t.Fatalf("SetPlaceBurst(%d) on a fault-injecting Local bus left %d", burst, p.B.e.place.max)
			}
			fill(p.A.mem, 4)
			p.B.postRecv(p.B.recvWR(7, 0, 32768))
			h.armed.Store(true)
			p.A.post(SendWR{WRID: 1, Opcode: tc.op, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 32768)}, RemoteAddr: p.B.addr(0), RKey: p.B.key})
			p.pump()
			recvs = p.B.recvWCs()
			return p.ba.log, p.A.sendWCs(), p.B.counter(HostMemErrors), bytes.Clone(p.B.mem[:off])
		}
		want, wantWC, _, wantMem := run(0)
		wantRecvs := recvs
		for _, burst := range []int{4, 64} {
			t.Run(fmt.Sprint(tc.op, "/burst=", burst), func(t *testing.T) {
				got, wc, faults, mem := run(burst)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("B's frames differ:\nburst:\n%v\npacket by packet:\n%v", got, want)
				}
				expectWCs(t, wc, wantWC...)
				if len(wc) != 1 || wc[0].Status != tc.wantWC {
					t.Errorf("completions %v, want one %v", wc, tc.wantWC)
				}
				if faults != 1 {
					t.Errorf("host_mem_errors %d, want 1 (the faulting packet's)", faults)
				}
				if !bytes.Equal(mem, wantMem) {
					t.Error("the bytes before the faulting page differ from packet by packet's")
				}
				expectWCs(t, recvs, wantRecvs...)
			})
		}
	}
	// A bus without a vectored scatter: no bursts.
	h := &bus.Faulty{Mapper: plainMapper{new(bus.Local)}, Fail: func(bus.Extent) bool { return false }}
	p := newPair(t, nodeConfig{}, nodeConfig{host: h})
	if p.B.e.SetPlaceBurst(16); p.B.e.place.max != 0 {
		t.Errorf("SetPlaceBurst on a bus without ScatterV left %d", p.B.e.place.max)
	}
}

func firstDiffBytes(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPlaceBurstReads: a requester that places the payloads of a run of
// READ responses with one DMA access completes the same READs with the
// same bytes in its memory, sends the same frames, and takes fewer
// accesses than one that places packet by packet; a page of its own
// memory that vanishes fails the READ with a local protection error
// either way, one host_mem_error, the bytes before it placed.
func TestPlaceBurstReads(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reads    [][3]int // local offset, remote offset, length
		failFrom uint64
		want     WCStatus
	}{
		{"one of 64 KiB", [][3]int{{0, 0, 65536}}, 0, WCSuccess},
		{"three, odd", [][3]int{{1, 7, 10001}, {20000, 100, 4097}, {30000, 50000, 3}}, 0, WCSuccess},
		{"a page gone", [][3]int{{0, 0, 32768}}, 16384, WCLocProtErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(burst int) (*pair, []WC, *countingBus) {
				cb, host, fh := countingHost(tc.failFrom)
				p := newPair(t, nodeConfig{host: host}, nodeConfig{})
				p.A.e.SetPlaceBurst(burst)
				fill(p.B.mem, 6)
				if fh != nil {
					fh.armed.Store(true)
				}
				for i, r := range tc.reads {
					p.A.post(SendWR{WRID: uint64(i), Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{p.A.sge(r[0], r[2])}, RemoteAddr: p.B.addr(r[1]), RKey: p.B.key})
				}
				p.pump()
				return p, p.A.sendWCs(), cb
			}
			want, wantWC, perPacket := run(0)
			got, wc, bursts := run(64)
			if bursts.scatterVs == 0 || bursts.scatters+bursts.scatterVs >= perPacket.scatters {
				t.Errorf("with bursts: %d scatters and %d vectored ones, where packet by packet took %d scatters", bursts.scatters, bursts.scatterVs, perPacket.scatters)
			}
			expectWCs(t, wc, wantWC...)
			if len(wc) == 0 || wc[0].Status != tc.want {
				t.Errorf("completions %v, want the first %v", wc, tc.want)
			}
			if !bytes.Equal(got.A.mem, want.A.mem) {
				t.Errorf("A's memory differs (first at %d)", firstDiffBytes(got.A.mem, want.A.mem))
			}
			if fmt.Sprint(got.ab.log) != fmt.Sprint(want.ab.log) {
				t.Errorf("A's frames differ:\nburst:\n%v\npacket by packet:\n%v", got.ab.log, want.ab.log)
			}
			if g, w := got.A.counter(HostMemErrors), want.A.counter(HostMemErrors); g != w {
				t.Errorf("host_mem_errors %d, packet by packet %d", g, w)
			}
			if tc.want == WCSuccess {
				for _, r := range tc.reads {
					if !bytes.Equal(got.A.mem[r[0]:r[0]+r[2]], got.B.mem[r[1]:r[1]+r[2]]) {
						t.Errorf("the READ of %d bytes from %d did not arrive", r[2], r[1])
					}
				}
			}
		})
	}
}

// countingHost is a counting Local bus, behind a fault injection that
// fails the page at failFrom once armed if failFrom is not 0 (fh, nil
// otherwise); host is what the node takes.
func countingHost(failFrom uint64) (cb *countingBus, host bus.Mapper, fh *failingHost) {
	cb = &countingBus{Local: new(bus.Local)}
	if failFrom == 0 {
		return cb, cb, nil
	}
	fh = &failingHost{from: failFrom, to: failFrom + 4096}
	fh.Faulty = &bus.Faulty{Mapper: cb, Fail: func(x bus.Extent) bool {
		return fh.armed.Load() && x.Addr < fh.to && x.Addr+uint64(x.Len) > fh.from
	}}
	return cb, fh, fh
}
