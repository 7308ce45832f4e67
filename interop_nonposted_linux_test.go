package rnic_test

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/udp"
)

// TestInteropNonPosted is rnic as the requester of ATOMIC WRITE and FLUSH
// against a responder of provider/tests/nonposted.c on another machine —
// Linux 6.12's rxe in the rxe-peer harness (scripts/interop.sh
// --nonposted runs it inside the harness's namespace). It is skipped
// unless RNIC_NONPOSTED_PEER (host:port of the responder's exchange) and
// RNIC_NONPOSTED_ADDR (this side's address) are set. RNIC_NONPOSTED_FLUSH=0
// leaves FLUSH out: Linux 6.12's rxe drops a conformant FLUSH (its
// rxe_opcode.c gives FLUSH no payload offset, so rxe_icrc_check covers
// the headers twice and the ICRC never matches; docs/verbs.md).
func TestInteropNonPosted(t *testing.T) {
	peer, addr := os.Getenv("RNIC_NONPOSTED_PEER"), os.Getenv("RNIC_NONPOSTED_ADDR")
	if peer == "" || addr == "" {
		t.Skip("skipped: an interop check against a responder on another machine (scripts/interop.sh --nonposted)")
	}
	l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr(addr)})
	must0(t, err)
	dev := must(rnic.Open(rnic.Options{Link: l}))
	defer dev.Close()
	pd := must(dev.AllocPD())
	cq := must(dev.CreateCQ(16))
	qp := must(pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	c, err := net.DialTimeout("tcp", peer, 10*time.Second)
	must0(t, err)
	defer c.Close()
	cp := rnic.ConnParams{MTU: rnic.MTU1024, PSN: 0x1234, Timeout: 18, MaxRdAtomic: 4, MaxDestRdAtomic: 4}
	me := qp.Endpoint(cp)
	// nonposted.c's exchange: qpn, psn, rkey, pad (u32), addr (u64), gid,
	// in network order.
	var b [40]byte
	binary.BigEndian.PutUint32(b[0:], me.QPN)
	binary.BigEndian.PutUint32(b[4:], uint32(me.PSN))
	copy(b[24:], me.GID[:])
	_, err = c.Write(b[:])
	must0(t, err)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.ReadFull(c, b[:])
	must0(t, err)
	var them rnic.Endpoint
	them.QPN, them.PSN = binary.BigEndian.Uint32(b[0:]), rnic.PSN(binary.BigEndian.Uint32(b[4:]))
	rkey, raddr := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint64(b[16:])
	copy(them.GID[:], b[24:40])
	must0(t, qp.Connect(them, cp))

	post := func(wr rnic.SendWR) rnic.WC {
		t.Helper()
		wr.Flags |= rnic.SendSignaled
		must0(t, qp.PostSend(wr))
		return waitWC(t, cq, 1, 60*time.Second)[0]
	}
	word := [8]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	if wc := post(rnic.SendWR{WRID: 1, Opcode: rnic.WRAtomicWrite, RemoteAddr: raddr + 64, RKey: rkey, CompareAdd: binary.NativeEndian.Uint64(word[:])}); wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCAtomicWrite {
		t.Fatalf("ATOMIC WRITE: %+v", wc)
	}
	if os.Getenv("RNIC_NONPOSTED_FLUSH") == "0" {
		_, err = c.Write([]byte{1})
		must0(t, err)
		t.Log("ATOMIC WRITE completed against the peer (FLUSH left out)")
		return
	}
	if wc := post(rnic.SendWR{WRID: 2, Opcode: rnic.WRFlush, RemoteAddr: raddr, RKey: rkey,
		Flush: rnic.FlushInfo{Length: 4096, Placement: rnic.FlushGlobal, Level: rnic.FlushRange}}); wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCFlush {
		t.Fatalf("FLUSH global, range: %+v", wc)
	}
	if wc := post(rnic.SendWR{WRID: 3, Opcode: rnic.WRFlush, RemoteAddr: raddr, RKey: rkey,
		Flush: rnic.FlushInfo{Placement: rnic.FlushGlobal, Level: rnic.FlushMR}}); wc.Status != rnic.WCSuccess || wc.Opcode != rnic.WCFlush {
		t.Fatalf("FLUSH global, region: %+v", wc)
	}
	// A persistent FLUSH of a region registered without the right: rxe
	// answers with a remote access error (the QP then fails: last).
	if wc := post(rnic.SendWR{WRID: 4, Opcode: rnic.WRFlush, RemoteAddr: raddr, RKey: rkey,
		Flush: rnic.FlushInfo{Length: 64, Placement: rnic.FlushPersistent}}); wc.Status == rnic.WCSuccess {
		t.Errorf("FLUSH persistent of a region without the right succeeded: %+v", wc)
	} else {
		t.Logf("FLUSH persistent: %v (as expected)", wc.Status)
	}
	_, err = c.Write([]byte{1})
	must0(t, err)
	t.Log("ATOMIC WRITE and FLUSH (range, region) completed against the peer")
}
