package rnic_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

func TestOpsSmoke(t *testing.T) {
	p := newPair(t, pairOpts{})
	const n = 9000
	abuf := make([]byte, 2*n)
	bbuf := make([]byte, 2*n)
	for i := range abuf {
		abuf[i] = byte(i)
		bbuf[i] = byte(i * 3)
	}
	all := rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
	mra := must(p.pda.RegMR(abuf, all))
	mrb := must(p.pdb.RegMR(bbuf, all))

	// READ b[0:n] into a[n:2n]
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mra.SGE(n, n)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}))
	wc := waitWC(t, p.cqa, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || wc[0].Opcode != rnic.WCRDMARead || wc[0].ByteLen != n {
		t.Fatalf("read wc %+v", wc[0])
	}
	if !bytes.Equal(abuf[n:], bbuf[:n]) {
		t.Fatal("read data mismatch")
	}

	// SEND with immediate a[0:n] → b[n:2n]
	must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 99, SGL: []rnic.SGE{mrb.SGE(n, n)}}))
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 2, Opcode: rnic.WRSendWithImm, Flags: rnic.SendSignaled, ImmData: 0xdeadbeef,
		SGL: []rnic.SGE{mra.SGE(0, n)}}))
	wc = waitWC(t, p.cqa, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || wc[0].Opcode != rnic.WCSend {
		t.Fatalf("send wc %+v", wc[0])
	}
	wc = waitWC(t, p.cqb, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || wc[0].Opcode != rnic.WCRecv || wc[0].ByteLen != n || wc[0].ImmData != 0xdeadbeef || wc[0].Flags&rnic.WCWithImm == 0 || wc[0].WRID != 99 {
		t.Fatalf("recv wc %+v", wc[0])
	}
	if !bytes.Equal(bbuf[n:], abuf[:n]) {
		t.Fatal("send data mismatch")
	}

	// Atomics on b[64:72]
	binary.NativeEndian.PutUint64(bbuf[64:], 41)
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 3, Opcode: rnic.WRAtomicFetchAndAdd, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mra.SGE(128, 8)}, RemoteAddr: mrb.Addr() + 64, RKey: mrb.RKey(), CompareAdd: 1}))
	wc = waitWC(t, p.cqa, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || wc[0].Opcode != rnic.WCFetchAdd {
		t.Fatalf("faa wc %+v", wc[0])
	}
	if got := binary.NativeEndian.Uint64(abuf[128:]); got != 41 {
		t.Fatalf("faa orig %d", got)
	}
	if got := binary.NativeEndian.Uint64(bbuf[64:]); got != 42 {
		t.Fatalf("faa result %d", got)
	}
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 4, Opcode: rnic.WRAtomicCmpAndSwp, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mra.SGE(136, 8)}, RemoteAddr: mrb.Addr() + 64, RKey: mrb.RKey(), CompareAdd: 42, Swap: 7}))
	wc = waitWC(t, p.cqa, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || binary.NativeEndian.Uint64(abuf[136:]) != 42 || binary.NativeEndian.Uint64(bbuf[64:]) != 7 {
		t.Fatalf("cas wc %+v orig %d mem %d", wc[0], binary.NativeEndian.Uint64(abuf[136:]), binary.NativeEndian.Uint64(bbuf[64:]))
	}

	// WRITE with immediate
	must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 100}))
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 5, Opcode: rnic.WRRDMAWriteWithImm, ImmData: 5,
		SGL: []rnic.SGE{mra.SGE(0, 5000)}, RemoteAddr: mrb.Addr() + 1000, RKey: mrb.RKey()}))
	wc = waitWC(t, p.cqb, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || wc[0].Opcode != rnic.WCRecvRDMAWithImm || wc[0].ByteLen != 5000 || wc[0].ImmData != 5 {
		t.Fatalf("write imm recv wc %+v", wc[0])
	}
	if !bytes.Equal(bbuf[1000:6000], abuf[:5000]) {
		t.Fatal("write imm data mismatch")
	}
}

func must0(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
