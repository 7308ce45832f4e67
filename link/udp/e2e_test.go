package udp_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

// TestNICOverUDP runs two rnic devices over two links on v4a and v4b,
// port 4791 (the NIC sends to 4791 whatever the link binds),
// connects RC QPs, writes 1 MiB, reads it back, and checks the data and
// the devices' ICRC counters: with raw receive every frame's ICRC is
// verified (rx_icrc_unverified 0); without it every frame is counted as
// unverified; never an ICRC error.
func TestNICOverUDP(t *testing.T) {
	if !portFree(v4a, wire.UDPPort) || !portFree(v4b, wire.UDPPort) {
		t.Skipf("port %d is taken on %v or %v: the NIC sends to %d, so this test needs it", wire.UDPPort, v4a, v4b, wire.UDPPort)
	}
	for _, raw := range []udp.RawMode{udp.RawAuto, udp.RawOff} {
		for _, loss := range []float64{0, 0.01} {
			t.Run(fmt.Sprintf("raw=%v/loss=%v", raw, loss), func(t *testing.T) {
				nicOverUDP(t, udp.Options{Raw: raw, Faults: udp.Faults{Seed: 1, Loss: loss}})
			})
		}
	}
}

func nicOverUDP(t *testing.T, o udp.Options) {
	checkGoroutines(t)
	open := func(addr netip.Addr, name string) (*udp.Link, *rnic.Device) {
		lo := o
		lo.Addr = addr
		l, err := udp.Open(lo)
		if err != nil {
			t.Fatal(err)
		}
		d, err := rnic.Open(rnic.Options{Link: l, Name: name})
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return l, d
	}
	la, da := open(v4a, "a")
	lb, db := open(v4b, "b")
	pda, pdb := must(da.AllocPD()), must(db.AllocPD())
	cqa, cqb := must(da.CreateCQ(256)), must(db.CreateCQ(256))
	qcap := rnic.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}
	qpa := must(pda.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqa, RecvCQ: cqa, Cap: qcap}))
	qpb := must(pdb.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqb, RecvCQ: cqb, Cap: qcap}))
	remote := rnic.AccessRemoteWrite | rnic.AccessRemoteRead // the test WRITEs and READs
	pa, pb := rnic.ConnParams{PSN: 100, Access: remote}, rnic.ConnParams{PSN: 0xABCDEF, Access: remote}
	if err := qpa.Connect(qpb.Endpoint(pb), pa); err != nil {
		t.Fatal(err)
	}
	if err := qpb.Connect(qpa.Endpoint(pa), pb); err != nil {
		t.Fatal(err)
	}

	const size = 1 << 20
	src, dst, back := make([]byte, size), make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i*131 + i>>12)
	}
	mrSrc := must(pda.RegMR(src, rnic.AccessLocalWrite))
	mrBack := must(pda.RegMR(back, rnic.AccessLocalWrite))
	mrDst := must(pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite|rnic.AccessRemoteRead))

	post := func(wr rnic.SendWR) {
		t.Helper()
		if err := qpa.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		wc := make([]rnic.WC, 1)
		if n, err := cqa.Wait(ctx, wc); err != nil || n != 1 || wc[0].Status != rnic.WCSuccess {
			t.Fatalf("%v: completion %+v, %v; counters a %v b %v; link a %+v b %+v",
				wr.Opcode, wc[0], err, nonZero(da), nonZero(db), la.Stats(), lb.Stats())
		}
	}
	post(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mrSrc.SGE(0, size)}, RemoteAddr: mrDst.Addr(), RKey: mrDst.RKey()})
	got := make([]byte, size)
	if _, err := mrDst.ReadAt(got, 0); err != nil || !bytes.Equal(got, src) {
		t.Fatal("RDMA WRITE: data differs")
	}
	post(rnic.SendWR{WRID: 2, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mrBack.SGE(0, size)}, RemoteAddr: mrDst.Addr(), RKey: mrDst.RKey()})
	if _, err := mrBack.ReadAt(got, 0); err != nil || !bytes.Equal(got, src) {
		t.Fatal("RDMA READ: data differs")
	}

	for _, dev := range []struct {
		d *rnic.Device
		l *udp.Link
	}{{da, la}, {db, lb}} {
		rx, _ := dev.d.Counter("rx_packets")
		unverified, _ := dev.d.Counter("rx_icrc_unverified")
		bad, _ := dev.d.Counter("rx_icrc_encapsulated")
		t.Logf("%s: rx_packets %d rx_icrc_unverified %d rx_icrc_encapsulated %d; link %+v",
			dev.d.Name(), rx, unverified, bad, dev.l.Stats())
		if rx == 0 || bad != 0 {
			t.Errorf("%s: %d packets received, %d ICRC errors", dev.d.Name(), rx, bad)
		}
		if dev.l.ICRCVerified() && unverified != 0 {
			t.Errorf("%s: raw receive, yet %d frames unverified", dev.d.Name(), unverified)
		}
		if !dev.l.ICRCVerified() && unverified == 0 {
			t.Errorf("%s: rebuilt IPv4 headers, yet no frame counted unverified", dev.d.Name())
		}
		if s := dev.l.Stats(); s.Mismatch+s.Malformed+s.Oversize+s.SendErrors != 0 {
			t.Errorf("%s: the link refused NIC frames: %+v", dev.d.Name(), s)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func nonZero(d *rnic.Device) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range d.Counters() {
		if c.Value != 0 {
			m[c.Name] = c.Value
		}
	}
	return m
}
