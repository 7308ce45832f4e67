package rnic_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestFeatureUD: unreliable datagram (IBTA §9.8, §11.4.1.1). A receive
// buffer starts with 40 bytes for the GRH; on RoCEv2 over IPv4 its last 20
// bytes hold the IPv4 header (rdma-core's convention, ibv_wc(3)
// IBV_WC_GRH); ByteLen counts the 40 bytes; SrcQP names the sender. A
// datagram with the wrong Q_Key is silently dropped (C10-15); a send
// longer than the path MTU fails with IBV_WC_LOC_LEN_ERR and moves the QP
// to SQE (§10.3.1 "Send Queue Error"), from which Modify back to RTS
// recovers.
func TestFeatureUD(t *testing.T) {
	newUD := func(t *testing.T) (*pair, *rnic.AH, *guarded, *guarded) {
		p := newPair(t, pairOpts{typ: rnic.UD})
		ah := must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
		src := newGuarded(t, p.pda, 8192, rnic.AccessLocalWrite, 1)
		dst := newGuarded(t, p.pdb, 8192, rnic.AccessLocalWrite, 2)
		return p, ah, src, dst
	}
	const qkey = 0x11111111 // Connect's default

	t.Run("send-grh-srcqp", func(t *testing.T) {
		t.Parallel()
		p, ah, src, dst := newUD(t)
		for i, n := range []int{0, 1, 100, 1000, 4096} {
			copy(src.region(), pattern(i, n))
			must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: uint64(10 + i), SGL: []rnic.SGE{dst.mr.SGE(0, 40+4096)}}))
			op := rnic.WRSend
			if i%2 == 1 {
				op = rnic.WRSendWithImm
			}
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: op, Flags: rnic.SendSignaled, ImmData: 0xabcd0000 + uint32(i),
				SGL: []rnic.SGE{src.mr.SGE(0, n)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: qkey}))
			if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.WRID != uint64(i) || wc.Opcode != rnic.WCSend {
				t.Fatalf("send %d bytes: %+v", n, wc)
			}
			wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
			if wc.Status != rnic.WCSuccess || wc.WRID != uint64(10+i) || wc.Opcode != rnic.WCRecv {
				t.Fatalf("receive of %d bytes: %+v", n, wc)
			}
			if wc.Flags&rnic.WCWithGRH == 0 {
				t.Errorf("%d bytes: receive completion without IBV_WC_GRH", n)
			}
			if wc.ByteLen != uint32(n+40) {
				t.Errorf("%d bytes: ByteLen %d, want payload + 40 = %d", n, wc.ByteLen, n+40)
			}
			if wc.SrcQP != p.qpa.QPN() || wc.QPNum != p.qpb.QPN() {
				t.Errorf("%d bytes: SrcQP %#x QPNum %#x, want %#x %#x", n, wc.SrcQP, wc.QPNum, p.qpa.QPN(), p.qpb.QPN())
			}
			if imm := op == rnic.WRSendWithImm; imm != (wc.Flags&rnic.WCWithImm != 0) || (imm && wc.ImmData != 0xabcd0000+uint32(i)) {
				t.Errorf("%d bytes: immediate flags %v data %#x", n, wc.Flags, wc.ImmData)
			}
			ip := dst.region()[20:40]
			if ip[0] != 0x45 || ip[9] != 17 {
				t.Errorf("%d bytes: GRH area bytes 20..40 are not an IPv4/UDP header: % x", n, ip)
			}
			// The source address is checked in grh-source-address.
			if d := netip.AddrFrom4([4]byte(ip[16:20])); d != netip.MustParseAddr("10.0.0.2") {
				t.Errorf("%d bytes: GRH IPv4 dst %v, want 10.0.0.2", n, d)
			}
			if tl := int(binary.BigEndian.Uint16(ip[2:4])); tl < 20+8+12+8+n {
				t.Errorf("%d bytes: IPv4 total length %d too small", n, tl)
			}
			if !bytes.Equal(dst.region()[40:40+n], pattern(i, n)) {
				t.Errorf("%d bytes: payload differs", n)
			}
			dst.guardsIntact(t, "receive buffer")
		}
	})

	t.Run("grh-source-address", func(t *testing.T) {
		t.Parallel()
		p, ah, src, dst := newUD(t)
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{dst.mr.SGE(0, 40+100)}}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(0, 100)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: qkey}))
		waitWC(t, p.cqa, 1, 5*time.Second)
		waitWC(t, p.cqb, 1, 5*time.Second)
		ip := dst.region()[20:40]
		// The GRH's source is the sender's GID, from which the receiver
		// builds a reply AH (ibv_create_ah_from_wc / ibv_init_ah_from_wc).
		if s := netip.AddrFrom4([4]byte(ip[12:16])); s != netip.MustParseAddr("10.0.0.1") {
			t.Errorf("GRH IPv4 source %v, want the sender's address 10.0.0.1", s)
		}
	})

	t.Run("qkey", func(t *testing.T) {
		t.Parallel()
		p, ah, src, dst := newUD(t)
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{dst.mr.SGE(0, 200)}}))
		// Wrong Q_Key: the send completes (UD is unacknowledged), the
		// datagram is dropped and the receive WQE stays posted.
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(0, 100)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: 0x22222222}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
			t.Fatalf("send with a wrong Q_Key: %+v", wc)
		}
		quiet(t, p.cqb, 20*time.Millisecond, "datagram with a wrong Q_Key")
		if n := counter(t, p.b, "rx_bad_qkey"); n != 1 {
			t.Errorf("rx_bad_qkey = %d, want 1", n)
		}
		dst.unchanged(t, "receive buffer after a wrong Q_Key")
		// High bit set in the WR's Q_Key: the QP's own Q_Key is used
		// (IBTA §10.2.5, C10-?? "controlled Q_Key").
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 2, Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(0, 100)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: 0x80000000}))
		waitWC(t, p.cqa, 1, 5*time.Second)
		wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
		if wc.WRID != 1 || wc.Status != rnic.WCSuccess || wc.ByteLen != 140 {
			t.Errorf("datagram with the QP's Q_Key: %+v", wc)
		}
		// Unknown destination QPN: dropped and counted.
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 2, SGL: []rnic.SGE{dst.mr.SGE(0, 200)}}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 3, Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(0, 10)}, AH: ah, RemoteQPN: p.qpb.QPN() + 1000, RemoteQKey: qkey}))
		waitWC(t, p.cqa, 1, 5*time.Second)
		quiet(t, p.cqb, 20*time.Millisecond, "datagram to an unknown QPN")
		if n := counter(t, p.b, "rx_unknown_qpn"); n != 1 {
			t.Errorf("rx_unknown_qpn = %d, want 1", n)
		}
	})

	t.Run("longer-than-mtu", func(t *testing.T) {
		t.Parallel()
		p, ah, src, dst := newUD(t)
		mtu := p.a.Attr().ActiveMTU.Bytes()
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{dst.mr.SGE(0, 8192)}}))
		must0(t, p.qpa.PostSend(
			rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, mtu+1)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: qkey},
			rnic.SendWR{WRID: 2, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 10)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: qkey}))
		wcs := waitWC(t, p.cqa, 2, 5*time.Second)
		if wcs[0].WRID != 1 || wcs[0].Status != rnic.WCLocLenErr {
			t.Errorf("send of MTU+1 = %d bytes: %+v (%v), want LOC_LEN_ERR", mtu+1, wcs[0], wcs[0].Status)
		}
		if wcs[1].WRID != 2 || wcs[1].Status != rnic.WCWRFlushErr {
			t.Errorf("the send after it: %+v (%v), want WR_FLUSH_ERR (QP in SQE)", wcs[1], wcs[1].Status)
		}
		waitState(t, p.qpa, rnic.QPSSQE)
		quiet(t, p.cqb, 20*time.Millisecond, "nothing was sent")
		// SQE → RTS recovers the send queue.
		must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSRTS}, rnic.QPAttrState))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 3, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, mtu)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: qkey}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.WRID != 3 || wc.Status != rnic.WCSuccess {
			t.Fatalf("send after SQE→RTS: %+v", wc)
		}
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.WRID != 1 || wc.Status != rnic.WCSuccess || wc.ByteLen != uint32(mtu+40) {
			t.Fatalf("receive after SQE→RTS: %+v", wc)
		}
	})

	t.Run("receive-buffer-too-small", func(t *testing.T) {
		// The 40 GRH bytes count: a WQE of 40+n-1 bytes cannot take an
		// n-byte datagram (IBV_WC_LOC_LEN_ERR on the receive).
		t.Parallel()
		p, ah, src, dst := newUD(t)
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{dst.mr.SGE(0, 40+99)}}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 100)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: qkey}))
		waitWC(t, p.cqa, 1, 5*time.Second)
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.WRID != 1 || wc.Status != rnic.WCLocLenErr {
			t.Errorf("receive: %+v (%v), want LOC_LEN_ERR", wc, wc.Status)
		}
		if i := firstDiff(dst.all[guardLen+139:], dst.orig[guardLen+139:]); i >= 0 {
			t.Errorf("receive buffer written past its 139 bytes")
		}
	})
}

// TestFeatureUC: unreliable connected (IBTA §9.7.7): WRITE and SEND work;
// with loss, a message is delivered whole or not at all — the responder
// drops the rest of a message whose packet was lost and resumes at the
// next FIRST/ONLY (§9.7.7.2.3), never completing a partial receive.
func TestFeatureUC(t *testing.T) {
	t.Run("write-send", func(t *testing.T) {
		t.Parallel()
		p := newPair(t, pairOpts{typ: rnic.UC, mtu: rnic.MTU1024})
		src := newGuarded(t, p.pda, 10000, rnic.AccessLocalWrite, 1)
		dst := newGuarded(t, p.pdb, 10000, rnic.AccessLocalWrite|rnic.AccessRemoteWrite, 2)
		copy(src.region(), pattern(1, 10000))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{src.mr.SGE(0, 10000)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCRDMAWrite {
			t.Fatalf("UC WRITE: %+v", wc)
		}
		// UC has no ACKs: the WRITE completes when sent. A 0-byte SEND
		// behind it (same QP, in order) tells when the responder is done.
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 4}))
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 9, Opcode: rnic.WRSend, Flags: rnic.SendSignaled}))
		waitWC(t, p.cqa, 1, 5*time.Second)
		if wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]; wc.WRID != 4 || wc.Status != rnic.WCSuccess {
			t.Fatalf("marker SEND: %+v", wc)
		}
		if !bytes.Equal(dst.region(), src.region()) {
			t.Fatal("UC WRITE data differs")
		}
		dst.guardsIntact(t, "WRITE target")

		rb := newGuarded(t, p.pdb, 10000, rnic.AccessLocalWrite, 3)
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 5, SGL: []rnic.SGE{rb.mr.SGE(0, 10000)}}))
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 6}))
		must0(t, p.qpa.PostSend(
			rnic.SendWR{WRID: 2, Opcode: rnic.WRSendWithImm, ImmData: 42, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(100, 7000)}},
			rnic.SendWR{WRID: 3, Opcode: rnic.WRRDMAWriteWithImm, ImmData: 43, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{src.mr.SGE(0, 3000)}, RemoteAddr: dst.mr.Addr() + 5000, RKey: dst.mr.RKey()}))
		waitWC(t, p.cqa, 2, 5*time.Second)
		wcs := waitWC(t, p.cqb, 2, 5*time.Second)
		if wc := wcs[0]; wc.WRID != 5 || wc.Status != rnic.WCSuccess || wc.ByteLen != 7000 || wc.ImmData != 42 {
			t.Errorf("UC SEND receive: %+v", wc)
		}
		if wc := wcs[1]; wc.WRID != 6 || wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCRecvRDMAWithImm || wc.ByteLen != 3000 || wc.ImmData != 43 {
			t.Errorf("UC WRITE_WITH_IMM receive: %+v", wc)
		}
		if !bytes.Equal(rb.region()[:7000], src.region()[100:7100]) {
			t.Error("UC SEND data differs")
		}
		if !bytes.Equal(dst.region()[5000:8000], src.region()[:3000]) {
			t.Error("UC WRITE_WITH_IMM data differs")
		}
		// READ and atomics are RC only (IBTA Table 38).
		if err := p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRRDMARead, SGL: []rnic.SGE{src.mr.SGE(0, 8)}, RemoteAddr: dst.mr.Addr(), RKey: dst.mr.RKey()}); err == nil {
			t.Error("RDMA READ posted on a UC QP")
		}
	})

	for _, fc := range []struct {
		name string
		f    mem.Faults
	}{
		{"loss10%", mem.Faults{Seed: 1, Loss: 0.10}},
		{"loss10%-reorder-dup", mem.Faults{Seed: 2, Loss: 0.10, Reorder: 0.05, Duplicate: 0.05}},
	} {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { ucLossy(t, fc.f) })
		})
	}
}

// ucLossy sends 200 UC messages of 1..4 packets over a lossy link: the
// receiver gets whole messages, in order, or none. In a testing/synctest
// bubble, so that its wait for a quiet CQ is exact and free.
func ucLossy(t *testing.T, f mem.Faults) {
	const n = 200
	const slot = 4096
	p := newPair(t, pairOpts{typ: rnic.UC, mtu: rnic.MTU1024, fa: f,
		cap: rnic.QPCap{MaxSendWR: n, MaxRecvWR: n, MaxSendSGE: 1, MaxRecvSGE: 1}})
	src := make([]byte, n*slot)
	size := func(k int) int { return 8 + (k*997)%(slot-8) } // 1..4 packets
	for k := 0; k < n; k++ {
		b := src[k*slot:]
		copy(b[8:], pattern(k, size(k)-8))
		binary.LittleEndian.PutUint64(b, uint64(k))
	}
	dst := make([]byte, n*slot)
	ms := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
	md := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite))
	for i := 0; i < n; i++ {
		must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{md.SGE(i*slot, slot)}}))
	}
	for k := 0; k < n; k++ {
		must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(k), Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{ms.SGE(k*slot, size(k))}}))
	}
	for i, wc := range waitWC(t, p.cqa, n, 10*time.Second) {
		if wc.Status != rnic.WCSuccess || wc.WRID != uint64(i) {
			t.Fatalf("UC send completion %d: %+v", i, wc)
		}
	}
	// Collect receives until the CQ stays quiet.
	var got []rnic.WC
	buf := make([]rnic.WC, 64)
	for idle := 0; idle < 10; {
		k := must(p.cqb.Poll(buf))
		if k == 0 {
			idle++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		idle = 0
		got = append(got, buf[:k]...)
	}
	last := -1
	for i, wc := range got {
		if wc.Status != rnic.WCSuccess || wc.WRID != uint64(i) {
			t.Fatalf("receive completion %d: %+v (%v); want WQE %d, success", i, wc, wc.Status, i)
		}
		b := dst[i*slot : i*slot+int(wc.ByteLen)]
		if len(b) < 8 {
			t.Fatalf("receive %d: %d bytes, shorter than any message", i, wc.ByteLen)
		}
		k := int(binary.LittleEndian.Uint64(b))
		if k <= last || k >= n {
			t.Fatalf("receive %d holds message %d after message %d", i, k, last)
		}
		last = k
		if int(wc.ByteLen) != size(k) || !bytes.Equal(b[8:], pattern(k, size(k)-8)) {
			t.Fatalf("receive %d: message %d partial or corrupt (%d bytes, want %d)", i, k, wc.ByteLen, size(k))
		}
	}
	t.Logf("%d of %d messages delivered whole, the rest dropped; out_of_sequence %d", len(got), n, counter(t, p.b, "out_of_sequence"))
	if len(got) == 0 || len(got) == n {
		t.Errorf("%d of %d delivered with 10%% loss: the loss did not act as expected", len(got), n)
	}
}
