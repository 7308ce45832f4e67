package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/internal/queue"
	"github.com/rnic/rnic/internal/testpeer"
	"github.com/rnic/rnic/link/mem"
)

// TestHostQueuesPeer is the program of TestHostQueues, in another
// process: through the host interface only, it registers its region,
// creates a CQ and an RC QP whose rings it writes itself, prints
// "addr A qpn Q rkey K", reads "peer QPN GID RKEY ADDR", connects,
// WRITEs 4 KiB of its region to the peer and waits for the completion in
// its CQ ring, prints "done STATUS", then answers dumps.
func TestHostQueuesPeer(t *testing.T) {
	if !testpeer.IsPeer() {
		return // not a test: the program process TestHostQueues starts
	}
	fail := func(what string, err error) { fmt.Printf("error %s: %v\n", what, err); os.Exit(1) }
	x, err := hostif.Open(os.Getenv("RNIC_HOST_SOCK"))
	if err != nil {
		fail("open", err)
	}
	r, err := x.Call(hostif.OpAllocPD, nil)
	if err != nil {
		fail("alloc pd", err)
	}
	pd := r.U32()
	buf := testpeer.Region()
	addr := testpeer.Address(buf)
	r, err = x.Call(hostif.OpRegMR, func(m *hostif.Msg) {
		m.U32(pd).U64(addr).U64(uint64(len(buf))).U64(addr).U32(uint32(rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead))
	})
	if err != nil {
		fail("reg mr", err)
	}
	_, lkey, rkey := r.U32(), r.U32(), r.U32()
	cq, err := x.CreateCQ(64)
	if err != nil {
		fail("create cq", err)
	}
	qp, err := x.CreateQP(hostif.QPInit{PD: pd, SendCQ: cq.Handle, RecvCQ: cq.Handle, Type: uint8(rnic.RC),
		MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		fail("create qp", err)
	}
	fmt.Printf("addr %d qpn %d rkey %d\n", addr, qp.QPN, rkey)
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	var peerQPN, peerRKey uint32
	var gidHex string
	var peerAddr uint64
	if _, err := fmt.Sscanf(in.Text(), "peer %d %s %d %d", &peerQPN, &gidHex, &peerRKey, &peerAddr); err != nil {
		fail("peer line", err)
	}
	gid, _ := hex.DecodeString(gidHex)
	var a hostif.ModifyQP
	a.State, a.Port, a.Access = uint8(rnic.QPSInit), 1, uint32(rnic.AccessRemoteWrite|rnic.AccessRemoteRead)
	if err := qp.Modify(uint32(rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags), &a); err != nil {
		fail("INIT", err)
	}
	a = hostif.ModifyQP{State: uint8(rnic.QPSRTR), PathMTU: uint8(rnic.MTU1024), DestQPN: peerQPN, MaxDestRdAtomic: 1, MinRNRTimer: 12, SGIDIndex: 1, Port: 1}
	copy(a.DGID[:], gid)
	if err := qp.Modify(uint32(rnic.QPAttrState|rnic.QPAttrAV|rnic.QPAttrPathMTU|rnic.QPAttrDestQPN|rnic.QPAttrRQPSN|rnic.QPAttrMaxDestRdAtomic|rnic.QPAttrMinRNRTimer), &a); err != nil {
		fail("RTR", err)
	}
	a = hostif.ModifyQP{State: uint8(rnic.QPSRTS), Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	if err := qp.Modify(uint32(rnic.QPAttrState|rnic.QPAttrTimeout|rnic.QPAttrRetryCnt|rnic.QPAttrRNRRetry|rnic.QPAttrSQPSN|rnic.QPAttrMaxQPRdAtomic), &a); err != nil {
		fail("RTS", err)
	}
	w := queue.SendWQE{WRID: 42, Opcode: uint8(rnic.WRRDMAWrite), Flags: uint8(rnic.SendSignaled), NumSGE: 1, RemoteAddr: peerAddr, RKey: peerRKey}
	w.SGL[0] = queue.SGE{Addr: addr + 8192, Length: 4096, LKey: lkey}
	if err := qp.PostSend(&w); err != nil {
		fail("post", err)
	}
	var wc [4]queue.CQE
	deadline := time.Now().Add(10 * time.Second)
	for cq.Poll(wc[:1]) == 0 {
		if time.Now().After(deadline) {
			fail("poll", fmt.Errorf("no completion"))
		}
		time.Sleep(10 * time.Microsecond)
	}
	fmt.Printf("done %d wrid %d\n", wc[0].Status, wc[0].WRID)
	testpeer.Loop(buf)
}

// TestHostQueues: a program in another process, through the host
// interface alone — its WQEs written into the send ring the NIC shares
// with it, the doorbell a word of its doorbell page, its completion read
// from the CQ ring — runs an RDMA WRITE over link/mem to a QP of this
// process, and this process's WRITE lands in the program's registered
// memory.
func TestHostQueues(t *testing.T) {
	sw := mem.NewSwitch()
	pa := must(sw.Port(netip.MustParseAddr("10.9.1.1"), mem.Faults{}))
	pb := must(sw.Port(netip.MustParseAddr("10.9.1.2"), mem.Faults{}))
	a := must(rnic.Open(rnic.Options{Link: pa}))
	defer a.Close()
	b := must(rnic.Open(rnic.Options{Link: pb}))
	defer b.Close()
	sock, stop := serve(t, a)
	defer stop()

	pdb := must(b.AllocPD())
	dst := make([]byte, 64<<10)
	mrb := must(pdb.RegMR(dst, allAccess))
	cqb := must(b.CreateCQ(64))
	qpb := must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}))

	peer := testpeer.Start(t, "TestHostQueuesPeer", "RNIC_HOST_SOCK="+sock)
	var qpn, rkey uint32
	if _, err := fmt.Sscanf(peer.Line, "addr %d qpn %d rkey %d", new(uint64), &qpn, &rkey); err != nil {
		t.Fatalf("program said %q", peer.Line)
	}
	gidA := must(a.GID(rnic.AddrGIDIndex))
	cp := rnic.ConnParams{Access: remoteRights, MTU: rnic.MTU1024}
	must0(t, qpb.Connect(rnic.Endpoint{GID: gidA, QPN: qpn}, cp))
	gidB := must(b.GID(rnic.AddrGIDIndex))
	fmt.Fprintf(peer.Stdin(), "peer %d %s %d %d\n", qpb.QPN(), hex.EncodeToString(gidB[:]), mrb.RKey(), mrb.Addr()+1000)
	line := peer.ReadLine(t)
	var status, wrid uint32
	if _, err := fmt.Sscanf(line, "done %d wrid %d", &status, &wrid); err != nil || status != uint32(rnic.WCSuccess) || wrid != 42 {
		t.Fatalf("program: %q", line)
	}
	// Read through the MR: the NIC wrote dst, and this goroutine heard of
	// it from the program, not from the NIC.
	got := make([]byte, 4096)
	must(mrb.ReadAt(got, 1000))
	for i, v := range got {
		if v != testpeer.Byte(8192+i) {
			t.Fatalf("byte %d the program WROTE: %#x, want %#x", i, v, testpeer.Byte(8192+i))
		}
	}
	// This process WRITEs into the program's region.
	src := must(pdb.RegMR(bytes.Repeat([]byte("to the program "), 200), rnic.AccessLocalWrite))
	must0(t, qpb.PostSend(rnic.SendWR{WRID: 7, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, 3000)}, RemoteAddr: peer.Addr + 100000, RKey: rkey}))
	wc := make([]rnic.WC, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := cqb.Wait(ctx, wc); err != nil || n != 1 || wc[0].Status != rnic.WCSuccess {
		t.Fatalf("WRITE into the program: %v %+v", err, wc[0])
	}
	if got := peer.Dump(t, 100000, 3000); !bytes.Equal(got, src.Bytes()[:3000]) {
		t.Fatal("the WRITE into the program's region differs")
	}
}

// TestRecvDoorbellLazy: a sleeping NIC is not woken by a program's
// receive doorbell (queue.NICAsleepSends: it takes receive WQEs from the
// ring when messages need them), unless one of the program's QPs is in
// the error state (queue.NICAsleep): a receive posted there is flushed at
// once, as a drain relies on.
func TestRecvDoorbellLazy(t *testing.T) {
	sw := mem.NewSwitch()
	a := must(rnic.Open(rnic.Options{Link: must(sw.Port(netip.MustParseAddr("10.9.2.1"), mem.Faults{}))}))
	defer a.Close()
	sock, stop := serve(t, a)
	defer stop()

	x := must(hostif.Open(sock))
	defer x.Close()
	r := must(x.Call(hostif.OpAllocPD, nil))
	pd := r.U32()
	buf := make([]byte, 4096)
	addr := testpeer.Address(buf)
	r = must(x.Call(hostif.OpRegMR, func(m *hostif.Msg) {
		m.U32(pd).U64(addr).U64(uint64(len(buf))).U64(addr).U32(uint32(rnic.AccessLocalWrite))
	}))
	_, lkey, _ := r.U32(), r.U32(), r.U32()
	cq := must(x.CreateCQ(16))
	qp := must(x.CreateQP(hostif.QPInit{PD: pd, SendCQ: cq.Handle, RecvCQ: cq.Handle, Type: uint8(rnic.RC),
		MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}))
	init := hostif.ModifyQP{State: uint8(rnic.QPSInit), Port: 1, Access: uint32(rnic.AccessLocalWrite)}
	must0(t, qp.Modify(uint32(rnic.QPAttrState|rnic.QPAttrPKeyIndex|rnic.QPAttrPort|rnic.QPAttrAccessFlags), &init))

	waitState := func(want uint32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); x.NICState() != want; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the NIC's state is %d, want %d", x.NICState(), want)
			}
		}
	}
	recv := func(wrid uint64) {
		t.Helper()
		w := queue.RecvWQE{WRID: wrid, NumSGE: 1}
		w.SGL[0] = queue.SGE{Addr: addr, Length: 64, LKey: lkey}
		must0(t, qp.PostRecv(&w))
	}
	var wc [4]queue.CQE
	flushed := func(wrid uint64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			if cq.Poll(wc[:1]) == 1 {
				if wc[0].WRID != wrid || wc[0].Status != uint32(rnic.WCWRFlushErr) {
					t.Fatalf("completion wrid %d status %d, want %d flushed", wc[0].WRID, wc[0].Status, wrid)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("receive %d was not flushed", wrid)
			}
		}
	}

	// Idle, no QP in error: the NIC parks in NICAsleepSends, and a
	// receive doorbell leaves it asleep.
	waitState(queue.NICAsleepSends)
	recv(1)
	time.Sleep(20 * time.Millisecond)
	if s := x.NICState(); s != queue.NICAsleepSends {
		t.Fatalf("after a receive doorbell the NIC's state is %d, want %d (asleep)", s, queue.NICAsleepSends)
	}
	if cq.Poll(wc[:1]) != 0 {
		t.Fatalf("a completion for a receive on a QP in INIT: %+v", wc[0])
	}

	// The QP to ERR: the control path wakes the NIC, which flushes the
	// receive and parks in NICAsleep, where the next receive doorbell
	// wakes it and is flushed.
	errAttr := hostif.ModifyQP{State: uint8(rnic.QPSErr)}
	must0(t, qp.Modify(uint32(rnic.QPAttrState), &errAttr))
	flushed(1)
	waitState(queue.NICAsleep)
	recv(2)
	flushed(2)

	// Back through RESET: NICAsleepSends again.
	reset := hostif.ModifyQP{State: uint8(rnic.QPSReset)}
	must0(t, qp.Modify(uint32(rnic.QPAttrState), &reset))
	waitState(queue.NICAsleepSends)
}
