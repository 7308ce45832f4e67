package transport

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/testpeer"
)

// TestPeerProcess is the peer process of TestOtherProcessMemory.
func TestPeerProcess(t *testing.T) { testpeer.Serve(t) }

// TestOtherProcessMemory: a region of another process registered at a
// NIC (as the verbs device registers a program's memory: a bus space of
// the process, the MPT and MTT over it) serves as an RDMA WRITE's target,
// a READ's source and an atomic's target when the NIC is the responder,
// and as a WRITE's source and a READ's destination when it is the
// requester. When the process has exited, the same WRITE completes with a
// remote access error, counted in host_mem_errors; nothing else breaks.
func TestOtherProcessMemory(t *testing.T) {
	peer := testpeer.Start(t, "TestPeerProcess")
	proc, err := bus.OpenProcess(peer.Pid())
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	defer proc.Close()
	host := new(bus.Local)
	p := newPair(t, nodeConfig{}, nodeConfig{host: host})
	sp, err := host.MapProcess(proc, peer.Addr, testpeer.Len)
	if err != nil {
		t.Fatal(err)
	}
	const iova = 1 << 40
	key, err := p.B.atu.RegMR(atu.MRSpec{PD: testPD, Space: sp, Length: testpeer.Len, IOVA: iova,
		Access: atu.LocalWrite | atu.RemoteWrite | atu.RemoteRead | atu.RemoteAtomic})
	if err != nil {
		t.Fatal(err)
	}
	fill(p.A.mem, 3)

	// The NIC as responder: WRITE 10,000 bytes (10 packets at MTU 1024)
	// into the process, READ 8 KiB of it back, fetch-and-add a word.
	p.A.post(
		SendWR{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 10000)}, RemoteAddr: iova + 5000, RKey: key},
		SendWR{WRID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{p.A.sge(20000, 8192)}, RemoteAddr: iova + 200000, RKey: key},
		SendWR{WRID: 3, Opcode: WRAtomicFetchAndAdd, Flags: SendSignaled, SGL: []SGE{p.A.sge(40000, 8)}, RemoteAddr: iova + 300000, RKey: key, CompareAdd: 7},
	)
	p.pump()
	expectWCs(t, p.A.sendWCs(), WC{WRID: 1, Opcode: WCRDMAWrite}, WC{WRID: 2, Opcode: WCRDMARead}, WC{WRID: 3, Opcode: WCFetchAdd})
	if got := peer.Dump(t, 5000, 10000); !bytes.Equal(got, p.A.mem[:10000]) {
		t.Error("the WRITE's data in the other process differs")
	}
	for i, b := range p.A.mem[20000 : 20000+8192] {
		if b != testpeer.Byte(200000+i) {
			t.Fatalf("READ byte %d: %#x, want %#x", i, b, testpeer.Byte(200000+i))
		}
	}
	var w [8]byte
	for i := range w {
		w[i] = testpeer.Byte(300000 + i)
	}
	orig := binary.NativeEndian.Uint64(w[:])
	if got := binary.NativeEndian.Uint64(p.A.mem[40000:]); got != orig {
		t.Errorf("fetch-and-add returned %#x, want %#x", got, orig)
	}
	if got := binary.NativeEndian.Uint64(peer.Dump(t, 300000, 8)); got != orig+7 {
		t.Errorf("the word after fetch-and-add: %#x, want %#x", got, orig+7)
	}

	// The NIC as requester: a WRITE from the process's memory to A, a
	// READ from A into the process's memory.
	p.B.post(
		SendWR{WRID: 11, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{{Addr: iova + 600000, Length: 6000, LKey: key}}, RemoteAddr: p.A.addr(50000), RKey: p.A.key},
		SendWR{WRID: 12, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{{Addr: iova + 700000, Length: 3000, LKey: key}}, RemoteAddr: p.A.addr(0), RKey: p.A.key},
	)
	p.pump()
	expectWCs(t, p.B.sendWCs(), WC{WRID: 11, Opcode: WCRDMAWrite}, WC{WRID: 12, Opcode: WCRDMARead})
	for i, b := range p.A.mem[50000 : 50000+6000] {
		if b != testpeer.Byte(600000+i) {
			t.Fatalf("byte %d WRITTEN from the process: %#x, want %#x", i, b, testpeer.Byte(600000+i))
		}
	}
	if got := peer.Dump(t, 700000, 3000); !bytes.Equal(got, p.A.mem[:3000]) {
		t.Error("the READ's data in the other process differs")
	}

	// The process exits: its region fails the next DMA, the work request
	// completes with an error, the NIC goes on.
	peer.Exit()
	p.A.post(SendWR{WRID: 4, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{p.A.sge(0, 100)}, RemoteAddr: iova, RKey: key})
	p.pump()
	expectWCs(t, p.A.sendWCs(), WC{WRID: 4, Status: WCRemAccessErr, Opcode: WCRDMAWrite})
	if n := p.B.counter(HostMemErrors); n != 1 {
		t.Errorf("host_mem_errors %d, want 1", n)
	}
}
