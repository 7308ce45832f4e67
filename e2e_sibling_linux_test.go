package rnic_test

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/udp"
)

// TestSiblingNICs: two NICs of one process on link/udp with Siblings set
// (as "rnic nic up --addr A --addr B" runs them) do RDMA between them with
// frames handed over in memory: WRITEs of 64 KiB, READs and SENDs land
// and complete, neither link makes a send system call, and every frame
// either receives is its sibling's.
func TestSiblingNICs(t *testing.T) {
	open := func(a string) *rnic.Device {
		l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr(a), Siblings: true})
		if err != nil {
			t.Skip(err)
		}
		d := must(rnic.Open(rnic.Options{Link: l}))
		t.Cleanup(func() { d.Close() })
		return d
	}
	da, db := open("127.0.0.33"), open("127.0.0.34")
	pa, pb := must(da.AllocPD()), must(db.AllocPD())
	ca, cb := must(da.CreateCQ(1024)), must(db.CreateCQ(1024))
	cp := rnic.QPCap{MaxSendWR: 128, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa := must(pa.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: ca, RecvCQ: ca, Cap: cp}))
	qb := must(pb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cb, RecvCQ: cb, Cap: cp}))
	conn := testConn(rnic.ConnParams{MTU: rnic.MTU4096})
	if err := qa.Connect(qb.Endpoint(conn), conn); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.Endpoint(conn), conn); err != nil {
		t.Fatal(err)
	}
	const size = 64 << 10
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	ma := must(pa.RegMR(src, rnic.AccessLocalWrite))
	back := must(pa.RegMR(make([]byte, size), rnic.AccessLocalWrite))
	mb := must(pb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessRemoteRead))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := func(cq *rnic.CQ, n int) {
		t.Helper()
		wcs := make([]rnic.WC, 16)
		for n > 0 {
			k, err := cq.Wait(ctx, wcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, wc := range wcs[:k] {
				if wc.Status != rnic.WCSuccess {
					t.Fatalf("completion %+v", wc)
				}
			}
			n -= k
		}
	}
	const writes = 200
	for i := range writes {
		must0(t, qa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{ma.SGE(0, size)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}))
		if i%64 == 63 {
			wait(ca, 64)
		}
	}
	wait(ca, writes%64)
	must0(t, qa.PostSend(rnic.SendWR{Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{back.SGE(0, size)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}))
	wait(ca, 1)
	must0(t, qb.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{mb.SGE(0, 64)}}))
	must0(t, qa.PostSend(rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{ma.SGE(0, 64)}}))
	wait(ca, 1)
	wait(cb, 1)
	if !bytes.Equal(dst[64:], src[64:]) || !bytes.Equal(back.Bytes(), src) || !bytes.Equal(dst[:64], src[:64]) {
		t.Fatal("the data did not land")
	}
	for _, d := range []*rnic.Device{da, db} {
		c := func(name string) uint64 {
			v, ok := d.Counter(name)
			if !ok {
				t.Fatalf("no counter %s", name)
			}
			return v
		}
		// No frame through the socket either way. (Its receive system
		// calls are not the test: anything on the machine may send a
		// datagram to port 4791, and a run of the whole tree once did.)
		if s, rx, sib := c("link_send_syscalls"), c("link_rx_frames"), c("link_sibling_rx_frames"); s != 0 || rx != sib {
			t.Errorf("%s: %d send system calls, %d frames received of which %d from the sibling: want no send and every frame from the sibling", d.Name(), s, rx, sib)
		}
		// Frames between siblings cross no wire: the NIC leaves their
		// ICRC out and takes them unchecked (link/udp is Intact with
		// Siblings), every one of them.
		// (The engine's and the link's counters are read at different
		// moments: compare the engine's with the engine's.)
		if tx, all, rx := c("tx_icrc_offloaded"), c("tx_packets"), c("rx_icrc_offloaded"); tx != all || rx == 0 {
			t.Errorf("%s: %d of %d frames sent without an ICRC, %d received so: want all, and some", d.Name(), tx, all, rx)
		}
		if c("link_sibling_tx_frames") == 0 || c("link_sibling_rx_frames") == 0 {
			t.Errorf("%s: %d frames to siblings, %d from them", d.Name(), c("link_sibling_tx_frames"), c("link_sibling_rx_frames"))
		}
		t.Logf("%s: %d frames to its sibling, %d from it, %d dropped by a full inbox", d.Name(),
			c("link_sibling_tx_frames"), c("link_sibling_rx_frames"), c("link_sibling_drops"))
	}
}
