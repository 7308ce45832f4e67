package rnic_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestLosslessIncast is the hardening issue's fourth defect: with no faults
// configured, link/mem dropped frames at the receiving NIC's bounded queue
// (rx_discards): RC recovered by retransmitting, while UC and UD lost
// messages that nobody asked to lose. Six NICs send to a seventh as fast as
// they can, over every transport; the receiver cannot keep up, and nothing
// may be lost: the senders are paused instead. With a finite buffer asked
// for (mem.WithBuffer) the same incast drops, and says so.
func TestLosslessIncast(t *testing.T) {
	for _, tc := range []struct {
		typ   rnic.QPType
		lossy bool
	}{
		{rnic.UD, false}, {rnic.UC, false}, {rnic.RC, false}, {rnic.UD, true},
	} {
		name := fmt.Sprint(tc.typ)
		if tc.lossy {
			name += "/WithBuffer(0)"
		}
		t.Run(name, func(t *testing.T) {
			checkGoroutines(t)
			var opts []mem.Option
			if tc.lossy {
				opts = append(opts, mem.WithBuffer(0))
			}
			lost, discards, retrans := runIncast(t, tc.typ, 6, 4000, opts...)
			t.Logf("lost %d messages, rx_discards %d, %d packets retransmitted", lost, discards, retrans)
			switch {
			case tc.lossy && lost == 0:
				t.Errorf("a lossy incast lost nothing (rx_discards %d): the test does not overload the receiver", discards)
			case !tc.lossy && (lost != 0 || discards != 0 || retrans != 0):
				t.Errorf("lost %d messages, rx_discards %d, retransmitted %d packets on a fault-free link", lost, discards, retrans)
			}
		})
	}
}

// runIncast has senders NICs send n 1 KiB messages each to one receiving
// NIC (SENDs on UD, WRITEs with immediate on UC and RC, one QP per sender)
// and returns how many messages did not arrive, the receiver's
// rx_discards and the senders' retransmitted packets.
func runIncast(t *testing.T, typ rnic.QPType, senders, n int, opts ...mem.Option) (lost int, discards, retrans uint64) {
	t.Helper()
	const size, depth = 256, 128
	sw := mem.NewSwitch()
	open := func(i int) (*rnic.Device, *rnic.PD) {
		port, err := sw.Port(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), mem.Faults{}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		d, err := rnic.Open(rnic.Options{Link: port})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d, must(d.AllocPD())
	}
	rdev, rpd := open(0)
	conn := rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite, Timeout: losslessTimeout()}
	rbuf := make([]byte, senders*size)
	rmr := must(rpd.RegMR(rbuf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	rcq := must(rdev.CreateCQ(senders * n))
	type flow struct {
		dev  *rnic.Device
		cq   *rnic.CQ
		qp   *rnic.QP
		peer *rnic.QP
		ah   *rnic.AH
		mr   *rnic.MR
	}
	flows := make([]flow, senders)
	for i := range flows {
		f := &flows[i]
		var pd *rnic.PD
		f.dev, pd = open(i + 1)
		f.cq = must(f.dev.CreateCQ(2 * depth))
		cp := rnic.QPCap{MaxSendWR: depth, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
		f.qp = must(pd.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: f.cq, RecvCQ: f.cq, Cap: cp}))
		rcap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: uint32(n), MaxSendSGE: 1, MaxRecvSGE: 1}
		f.peer = must(rpd.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: rcq, RecvCQ: rcq, Cap: rcap}))
		if err := f.qp.Connect(f.peer.Endpoint(conn), conn); err != nil {
			t.Fatal(err)
		}
		if err := f.peer.Connect(f.qp.Endpoint(conn), conn); err != nil {
			t.Fatal(err)
		}
		if typ == rnic.UD {
			f.ah = must(pd.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(rdev.GID(rnic.AddrGIDIndex))}))
		}
		f.mr = must(pd.RegMR(make([]byte, size), rnic.AccessLocalWrite))
		for j := range n {
			sge := rmr.SGE(i*size, size)
			if typ == rnic.UD {
				// A UD receive takes the GRH in front of the message;
				// every receive lands in the same place.
				sge = rmr.SGE(0, min(len(rbuf), size+40))
			}
			if err := f.peer.PostRecv(rnic.RecvWR{WRID: uint64(j), SGL: []rnic.SGE{sge}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for i := range flows {
		f := &flows[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{f.mr.SGE(0, size)}}
			switch typ {
			case rnic.UD:
				wr.AH, wr.RemoteQPN, wr.RemoteQKey = f.ah, f.peer.QPN(), 0x11111111
			default:
				wr.Opcode, wr.RemoteAddr, wr.RKey = rnic.WRRDMAWriteWithImm, rmr.Addr()+uint64(i*size), rmr.RKey()
			}
			wcs := make([]rnic.WC, depth)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			inflight := 0
			for posted := 0; posted < n || inflight > 0; {
				for posted < n && inflight < depth {
					wr.WRID, wr.Flags = uint64(posted), rnic.SendSignaled
					if err := f.qp.PostSend(wr); err != nil {
						errs <- err
						return
					}
					posted++
					inflight++
				}
				k, err := f.cq.Wait(ctx, wcs)
				if err != nil {
					errs <- fmt.Errorf("sender %d: %v after %d posted, %d in flight", i, err, posted, inflight)
					return
				}
				for _, wc := range wcs[:k] {
					if wc.Status != rnic.WCSuccess {
						errs <- fmt.Errorf("sender %d: %v", i, wc.Status)
						return
					}
				}
				inflight -= k
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// What was going to arrive has arrived once the receiver is idle.
	got := 0
	wcs := make([]rnic.WC, 256)
	for idle := 0; idle < 20; {
		k := must(rcq.Poll(wcs))
		for _, wc := range wcs[:k] {
			if wc.Status != rnic.WCSuccess {
				t.Fatalf("receiver: %v", wc.Status)
			}
		}
		got += k
		if k == 0 {
			idle++
			time.Sleep(5 * time.Millisecond)
		} else {
			idle = 0
		}
	}
	for _, c := range rdev.Counters() {
		if c.Name == "rx_discards" {
			discards = c.Value
		}
	}
	for _, f := range flows {
		for _, c := range f.dev.Counters() {
			if c.Name == "roce_retrans_packets" {
				retrans += c.Value
			}
		}
	}
	return senders*n - got, discards, retrans
}

// TestLosslessAllToAll has four NICs each send READs and WRITEs of 64 KiB
// to every other at once, so that each is a requester, a responder, and a
// receiver of more than it can take: a pause must never deadlock two NICs
// that wait for each other (requests are held, responses and ACKs still
// go), and nothing is lost or sent twice.
func TestLosslessAllToAll(t *testing.T) {
	checkGoroutines(t)
	const nics, size, depth, ops = 4, 64 << 10, 16, 60
	sw := mem.NewSwitch()
	type node struct {
		dev *rnic.Device
		pd  *rnic.PD
		mr  *rnic.MR
	}
	nodes := make([]node, nics)
	for i := range nodes {
		port, err := sw.Port(netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}), mem.Faults{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := rnic.Open(rnic.Options{Link: port})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		pd := must(d.AllocPD())
		nodes[i] = node{dev: d, pd: pd, mr: must(pd.RegMR(make([]byte, 2*nics*size),
			rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessRemoteRead))}
	}
	conn := rnic.ConnParams{Access: rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead, Timeout: losslessTimeout()}
	var wg sync.WaitGroup
	errs := make(chan error, nics*nics)
	for i := range nodes {
		for j := range nodes {
			if i == j {
				continue
			}
			a, b := &nodes[i], &nodes[j]
			cq := must(a.dev.CreateCQ(2 * depth))
			qcap := rnic.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
			qa := must(a.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: qcap}))
			bcq := must(b.dev.CreateCQ(2))
			qb := must(b.pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: bcq, RecvCQ: bcq, Cap: qcap}))
			if err := qa.Connect(qb.Endpoint(conn), conn); err != nil {
				t.Fatal(err)
			}
			if err := qb.Connect(qa.Endpoint(conn), conn); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				wcs := make([]rnic.WC, depth)
				inflight := 0
				for posted := 0; posted < ops || inflight > 0; {
					for posted < ops && inflight < depth {
						wr := rnic.SendWR{WRID: uint64(posted), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
							SGL: []rnic.SGE{a.mr.SGE(j*size, size)}, RemoteAddr: b.mr.Addr() + uint64((nics+i)*size), RKey: b.mr.RKey()}
						if posted%2 == 1 {
							wr.Opcode, wr.SGL[0] = rnic.WRRDMARead, a.mr.SGE((nics+j)*size, size)
						}
						if err := qa.PostSend(wr); err != nil {
							errs <- err
							return
						}
						posted++
						inflight++
					}
					k, err := cq.Wait(ctx, wcs)
					if err != nil {
						errs <- fmt.Errorf("QP %d→%d: %v with %d in flight", i, j, err, inflight)
						return
					}
					for _, wc := range wcs[:k] {
						if wc.Status != rnic.WCSuccess {
							errs <- fmt.Errorf("QP %d→%d: %v", i, j, wc.Status)
							return
						}
					}
					inflight -= k
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, n := range nodes {
		if m := interesting(n.dev); m["rx_discards"] != 0 || m["roce_retrans_packets"] != 0 || m["local_ack_timeout_err"] != 0 {
			t.Errorf("NIC %d: rx_discards %d, roce_retrans_packets %d, local_ack_timeout_err %d", i,
				m["rx_discards"], m["roce_retrans_packets"], m["local_ack_timeout_err"])
		}
	}
}

// losslessTimeout is the local ACK timeout of the lossless tests' RC QPs:
// 1 s, or 4.3 s under the race detector. A saturated fabric's queues take
// a while to drain, more so when the engines are slowed (the race detector
// slows the ICRC to a few thousand frames a second) or a loaded machine
// takes their processors away for tens of milliseconds: the default of
// 67 ms would then time out frames that are only queued, not lost.
func losslessTimeout() int {
	if raceEnabled {
		return 20
	}
	return 18
}
