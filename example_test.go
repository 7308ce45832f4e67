package rnic_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// Two NICs joined by an in-process link: on each a protection domain, a
// memory region, a completion queue and a reliable-connection QP; the
// QPs are connected, and A writes into B's memory with RDMA WRITE.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		log.Fatal(err)
	}
	a, err := rnic.Open(rnic.Options{Link: pa, Name: "a"}) // a owns pa now, and closes it
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := rnic.Open(rnic.Options{Link: pb, Name: "b"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	qcap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	pdA, _ := a.AllocPD()
	pdB, _ := b.AllocPD()
	src, _ := pdA.RegMR([]byte("hello, remote memory"), 0) // 0: local read only
	dst, _ := pdB.RegMR(make([]byte, 64), rnic.AccessLocalWrite|rnic.AccessRemoteWrite)
	cqA, _ := a.CreateCQ(16)
	cqB, _ := b.CreateCQ(16)
	qpA, _ := pdA.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqA, RecvCQ: cqA, Cap: qcap})
	qpB, _ := pdB.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqB, RecvCQ: cqB, Cap: qcap})

	// RESET → INIT → RTR → RTS. B lets A write; A grants B nothing.
	if err := qpA.Connect(qpB.Endpoint(rnic.ConnParams{}), rnic.ConnParams{}); err != nil {
		log.Fatal(err)
	}
	if err := qpB.Connect(qpA.Endpoint(rnic.ConnParams{}), rnic.ConnParams{Access: rnic.AccessRemoteWrite}); err != nil {
		log.Fatal(err)
	}

	// B would send dst.Remote() to A out of band (see Exchange).
	remote := dst.Remote()
	err = qpA.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, src.Len())}, RemoteAddr: remote.Addr, RKey: remote.RKey})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]rnic.WC, 1)
	if _, err := cqA.Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("WR %d: %v, %v\n", wc[0].WRID, wc[0].Opcode, wc[0].Status)
	fmt.Printf("B's memory: %q\n", bytes.TrimRight(dst.Bytes(), "\x00"))
	// Output:
	// WR 1: rdma-write, success
	// B's memory: "hello, remote memory"
}

// side is one NIC of the examples' pair.
type side struct {
	dev *rnic.Device
	pd  *rnic.PD
	cq  *rnic.CQ
	qp  *rnic.QP
}

// examplePair is Example's set-up: two NICs over an in-process link, an
// RC QP on each, connected, each granting its peer the rights given.
func examplePair(access rnic.Access) (a, b side, closeAll func()) {
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		log.Fatal(err)
	}
	open := func(l *mem.Port, name string) side {
		dev, err := rnic.Open(rnic.Options{Link: l, Name: name})
		if err != nil {
			log.Fatal(err)
		}
		s := side{dev: dev}
		s.pd, _ = dev.AllocPD()
		s.cq, _ = dev.CreateCQ(64)
		s.qp, err = s.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	a, b = open(pa, "a"), open(pb, "b")
	cp := rnic.ConnParams{Access: access}
	if err := a.qp.Connect(b.qp.Endpoint(cp), cp); err != nil {
		log.Fatal(err)
	}
	if err := b.qp.Connect(a.qp.Endpoint(cp), cp); err != nil {
		log.Fatal(err)
	}
	return a, b, func() { a.dev.Close(); b.dev.Close() }
}

// wait returns the next completion of cq.
func wait(cq *rnic.CQ) rnic.WC {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]rnic.WC, 1)
	if _, err := cq.Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	return wc[0]
}

// RDMA READ: A reads B's memory into its own, without B's CPU.
func Example_read() {
	a, b, closeAll := examplePair(rnic.AccessRemoteRead)
	defer closeAll()
	theirs, _ := b.pd.RegMR([]byte("B's data"), rnic.AccessRemoteRead)
	mine, _ := a.pd.RegMR(make([]byte, 8), rnic.AccessLocalWrite) // the NIC writes it
	r := theirs.Remote()
	err := a.qp.PostSend(rnic.SendWR{WRID: 7, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mine.SGE(0, 8)}, RemoteAddr: r.Addr, RKey: r.RKey})
	if err != nil {
		log.Fatal(err)
	}
	wc := wait(a.cq)
	fmt.Printf("%v %v, %d bytes: %q\n", wc.Opcode, wc.Status, wc.ByteLen, mine.Bytes())
	// Output:
	// rdma-read success, 8 bytes: "B's data"
}

// SEND with immediate data: the receiver posts a receive first; its
// completion carries the 32-bit immediate (host order) and the length.
func Example_sendRecvImmediate() {
	a, b, closeAll := examplePair(0) // SEND needs no remote right
	defer closeAll()
	inbox, _ := b.pd.RegMR(make([]byte, 64), rnic.AccessLocalWrite)
	msg, _ := a.pd.RegMR([]byte("ping"), 0)
	if err := b.qp.PostRecv(rnic.RecvWR{WRID: 100, SGL: []rnic.SGE{inbox.SGE(0, inbox.Len())}}); err != nil {
		log.Fatal(err)
	}
	err := a.qp.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSendWithImm, Flags: rnic.SendSignaled,
		ImmData: 0xC0FFEE, SGL: []rnic.SGE{msg.SGE(0, msg.Len())}})
	if err != nil {
		log.Fatal(err)
	}
	rc := wait(b.cq)
	fmt.Printf("B: WR %d %v, %d bytes %q, immediate %#x (flags %v)\n",
		rc.WRID, rc.Opcode, rc.ByteLen, inbox.Bytes()[:rc.ByteLen], rc.ImmData, rc.Flags)
	sc := wait(a.cq)
	fmt.Printf("A: WR %d %v %v\n", sc.WRID, sc.Opcode, sc.Status)
	// Output:
	// B: WR 100 recv, 4 bytes "ping", immediate 0xc0ffee (flags imm)
	// A: WR 1 send success
}

// Atomics: fetch-and-add and compare-and-swap on a 64-bit word of B's
// memory. Each returns the word's original value in A's 8-byte SGE.
//
// Byte order: the 64-bit word at RemoteAddr is read and written in the
// responder's host byte order, as the CPU sees it, and the original value
// lands in the local SGE in the requester's host byte order: use
// binary.NativeEndian on both sides (rnic does what Linux Soft-RoCE does).
// On the wire the operands and the original value travel big-endian
// (IBTA AtomicETH, AtomicAckETH), which is all the specification fixes;
// hardware differs in memory: ConnectX HCAs return the fetched value
// big-endian, which is why Open MPI and UCX swap it there.
func Example_atomics() {
	a, b, closeAll := examplePair(rnic.AccessRemoteAtomic)
	defer closeAll()
	counter := make([]byte, 8) // 8-byte aligned, as atomics need
	binary.NativeEndian.PutUint64(counter, 41)
	word, _ := b.pd.RegMR(counter, rnic.AccessLocalWrite|rnic.AccessRemoteAtomic)
	orig, _ := a.pd.RegMR(make([]byte, 8), rnic.AccessLocalWrite)
	r := word.Remote()
	atomic := func(wr rnic.SendWR) uint64 {
		wr.Flags, wr.SGL, wr.RemoteAddr, wr.RKey = rnic.SendSignaled, []rnic.SGE{orig.SGE(0, 8)}, r.Addr, r.RKey
		if err := a.qp.PostSend(wr); err != nil {
			log.Fatal(err)
		}
		if wc := wait(a.cq); wc.Status != rnic.WCSuccess {
			log.Fatal(wc.Status)
		}
		return binary.NativeEndian.Uint64(orig.Bytes())
	}
	was := atomic(rnic.SendWR{Opcode: rnic.WRAtomicFetchAndAdd, CompareAdd: 1})
	fmt.Println("fetch-and-add 1: was", was, "now", binary.NativeEndian.Uint64(word.Bytes()))
	was = atomic(rnic.SendWR{Opcode: rnic.WRAtomicCmpAndSwp, CompareAdd: 42, Swap: 7})
	fmt.Println("compare 42, swap 7: was", was, "now", binary.NativeEndian.Uint64(word.Bytes()))
	was = atomic(rnic.SendWR{Opcode: rnic.WRAtomicCmpAndSwp, CompareAdd: 42, Swap: 9})
	fmt.Println("compare 42, swap 9: was", was, "now", binary.NativeEndian.Uint64(word.Bytes()))
	// Output:
	// fetch-and-add 1: was 41 now 42
	// compare 42, swap 7: was 42 now 7
	// compare 42, swap 9: was 7 now 7
}

// A shared receive queue: two QPs on B take their receives from one SRQ,
// so B posts buffers once for all its peers.
func Example_sharedReceiveQueue() {
	a, b, closeAll := examplePair(0)
	defer closeAll()
	srq, err := b.pd.CreateSRQ(rnic.SRQInitAttr{MaxWR: 8, MaxSGE: 1})
	if err != nil {
		log.Fatal(err)
	}
	pool, _ := b.pd.RegMR(make([]byte, 4*64), rnic.AccessLocalWrite)
	for i := range 4 {
		if err := srq.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{pool.SGE(i*64, 64)}}); err != nil {
			log.Fatal(err)
		}
	}
	// A second connection, whose B side uses the SRQ too.
	qcap := rnic.QPCap{MaxSendWR: 4, MaxSendSGE: 1}
	qa2, _ := a.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: a.cq, RecvCQ: a.cq, Cap: qcap})
	qb2, _ := b.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Cap: qcap})
	qa3, _ := a.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: a.cq, RecvCQ: a.cq, Cap: qcap})
	qb3, _ := b.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Cap: qcap})
	for _, q := range [][2]*rnic.QP{{qa2, qb2}, {qa3, qb3}} {
		if err := q[0].Connect(q[1].Endpoint(rnic.ConnParams{}), rnic.ConnParams{}); err != nil {
			log.Fatal(err)
		}
		if err := q[1].Connect(q[0].Endpoint(rnic.ConnParams{}), rnic.ConnParams{}); err != nil {
			log.Fatal(err)
		}
	}
	msgs, _ := a.pd.RegMR([]byte("via qp2via qp3"), 0)
	qa2.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{msgs.SGE(0, 7)}})
	qa3.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{msgs.SGE(7, 7)}})
	var got []string
	for range 2 {
		wc := wait(b.cq)
		off := int(wc.WRID) * 64 // the WR says which buffer the SRQ gave
		got = append(got, fmt.Sprintf("QP %#x received %q", wc.QPNum, pool.Bytes()[off:off+int(wc.ByteLen)]))
	}
	slices.Sort(got) // the two connections race
	for _, s := range got {
		fmt.Println(s)
	}
	fmt.Println("receives left in the SRQ:", srq.Posted())
	// Output:
	// QP 0x12 received "via qp2"
	// QP 0x13 received "via qp3"
	// receives left in the SRQ: 2
}

// An error completion: a WRITE with a wrong rkey is refused by the peer
// (NAK remote access error). The work request completes with
// WCRemAccessErr, the QP enters the error state, and what was posted
// after it is flushed.
func Example_remoteAccessError() {
	a, b, closeAll := examplePair(rnic.AccessRemoteWrite)
	defer closeAll()
	dst, _ := b.pd.RegMR(make([]byte, 64), rnic.AccessLocalWrite|rnic.AccessRemoteWrite)
	src, _ := a.pd.RegMR(make([]byte, 64), 0)
	r := dst.Remote()
	wrong := rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{src.SGE(0, 64)}, RemoteAddr: r.Addr, RKey: r.RKey ^ 0xFF00}
	next := wrong
	next.WRID, next.RKey = 2, r.RKey
	if err := a.qp.PostSend(wrong, next); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		wc := wait(a.cq)
		fmt.Printf("WR %d: %v (status %d)\n", wc.WRID, wc.Status, wc.Status)
	}
	fmt.Println("QP state:", a.qp.State())
	// Output:
	// WR 1: remote access error (status 10)
	// WR 2: Work Request Flushed Error (status 5)
	// QP state: ERR
}

// Exchanging connection details: each side sends its endpoint and the
// regions the peer may use over any net.Conn (here an in-memory pipe; in
// practice a TCP connection), then connects to what it received.
func ExampleExchange() {
	a, b, closeAll := examplePair(0) // (examplePair's QPs are connected; fresh ones are used here)
	defer closeAll()
	newQP := func(s side) *rnic.QP {
		qp, err := s.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		return qp
	}
	qa, qb := newQP(a), newQP(b)
	buf, _ := b.pd.RegMR(make([]byte, 4096), rnic.AccessLocalWrite|rnic.AccessRemoteWrite)
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	done := make(chan error)
	go func() { // B's program
		cp := rnic.ConnParams{PSN: 0x4000, Access: rnic.AccessRemoteWrite}
		peer, err := rnic.Exchange(ctx, cb, rnic.PeerInfo{Endpoint: qb.Endpoint(cp), Regions: []rnic.RemoteRegion{buf.Remote()}})
		if err == nil {
			err = qb.Connect(peer.Endpoint, cp)
		}
		done <- err
	}()
	cp := rnic.ConnParams{PSN: 0x1000}
	peer, err := rnic.Exchange(ctx, ca, rnic.PeerInfo{Endpoint: qa.Endpoint(cp)})
	if err != nil {
		log.Fatal(err)
	}
	if err := qa.Connect(peer.Endpoint, cp); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("A got:", peer.Endpoint)
	fmt.Println("regions:", len(peer.Regions), "of", peer.Regions[0].Len, "bytes")
	// Output:
	// A got: gid=::ffff:10.0.0.2 qpn=0x12 psn=0x4000
	// regions: 1 of 4096 bytes
}
