package rnic_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/udp"
)

// TestUDPReceiveHoldsBack floods a NIC over link/udp with UD SENDs: its
// engine cannot keep up with the sender, and the frames it has no room for
// stay in the link (and the socket's buffer behind it) instead of being
// dropped at its receive queue, where 555 of 16,000 were before. What still
// can be lost is the kernel's socket buffer overflowing (8 MiB asked for;
// KernelDrops counts it), which a UD sender that outruns its receiver for
// long enough will cause: the test allows it and reports it.
func TestUDPReceiveHoldsBack(t *testing.T) {
	open := func(a string) (*rnic.Device, *udp.Link) {
		l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr(a)})
		if err != nil {
			t.Skip(err)
		}
		d := must(rnic.Open(rnic.Options{Link: l}))
		t.Cleanup(func() { d.Close() })
		return d, l
	}
	sd, _ := open("127.0.0.31")
	rd, rl := open("127.0.0.32")
	spd, rpd := must(sd.AllocPD()), must(rd.AllocPD())
	scq, rcq := must(sd.CreateCQ(1024)), must(rd.CreateCQ(1<<16))
	const n, size = 16000, 1024
	sq := must(spd.CreateQP(rnic.QPInitAttr{Type: rnic.UD, SendCQ: scq, RecvCQ: scq, Cap: rnic.QPCap{MaxSendWR: 256, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	rq := must(rpd.CreateQP(rnic.QPInitAttr{Type: rnic.UD, SendCQ: rcq, RecvCQ: rcq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: n, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	cp := rnic.ConnParams{}
	if err := sq.Connect(rnic.Endpoint{}, cp); err != nil {
		t.Fatal(err)
	}
	if err := rq.Connect(rnic.Endpoint{}, cp); err != nil {
		t.Fatal(err)
	}
	rmr := must(rpd.RegMR(make([]byte, size+40), rnic.AccessLocalWrite))
	for i := range n {
		if err := rq.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{rmr.SGE(0, size+40)}}); err != nil {
			t.Fatal(err)
		}
	}
	smr := must(spd.RegMR(make([]byte, size), rnic.AccessLocalWrite))
	ah := must(spd.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(rd.GID(rnic.AddrGIDIndex))}))
	wr := rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{smr.SGE(0, size)}, AH: ah, RemoteQPN: rq.QPN(), RemoteQKey: 0x11111111}
	wcs := make([]rnic.WC, 256)
	inflight := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	for posted := 0; posted < n || inflight > 0; {
		for posted < n && inflight < 256 {
			if err := sq.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			posted++
			inflight++
		}
		k, err := scq.Wait(ctx, wcs)
		if err != nil {
			t.Fatal(err)
		}
		inflight -= k
	}
	el := time.Since(start)
	got := 0
	for idle := 0; idle < 40 && got < n; {
		k := must(rcq.Poll(wcs))
		if k == 0 {
			idle++
			time.Sleep(5 * time.Millisecond)
		}
		got += k
	}
	st := rl.Stats()
	t.Logf("sent %d in %v (%.0f/s), received %d; rx_discards %d, kernel drops %d", n, el, n/el.Seconds(), got, interesting(rd)["rx_discards"], st.KernelDrops)
	if d := interesting(rd)["rx_discards"]; d != 0 {
		t.Errorf("the NIC dropped %d frames at its receive queue", d)
	}
	if got+int(st.KernelDrops) != n {
		t.Errorf("%d of %d messages arrived and the kernel dropped %d: %d lost elsewhere", got, n, st.KernelDrops, n-got-int(st.KernelDrops))
	}
}
