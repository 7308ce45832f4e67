package rnic_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

// TestFeatureGSI: QP1, the general services interface (IBTA §13.5.1), as
// the connection manager uses it: a UD QP numbered 1, one per device,
// that takes only the GSI Q_Key 0x80010000 (C13-7); a MAD from one
// device's QP1 reaches the other's with source QP 1. A datagram to QPN 1
// with another Q_Key is dropped and counted, as is one to QPN 1 of a
// device without QP1.
func TestFeatureGSI(t *testing.T) {
	t.Parallel()
	p := newPair(t, pairOpts{typ: rnic.UD})
	gsi := func(d *rnic.Device, pd *rnic.PD, cq *rnic.CQ) *rnic.QP {
		qp := must(pd.CreateQP(rnic.QPInitAttr{Type: rnic.GSI, SendCQ: cq, RecvCQ: cq,
			Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		if qp.QPN() != 1 || qp.Type() != rnic.GSI {
			t.Fatalf("GSI QP: QPN %#x type %v, want 1 GSI", qp.QPN(), qp.Type())
		}
		must0(t, qp.Connect(rnic.Endpoint{}, rnic.ConnParams{}))
		if a, _, err := qp.Query(); err != nil || a.QKey != 0x80010000 {
			t.Fatalf("GSI Q_Key %#x (%v), want 0x80010000", a.QKey, err)
		}
		return qp
	}
	ga := gsi(p.a, p.pda, p.cqa)

	// One QP1 per device; its Q_Key is fixed.
	if _, err := p.pda.CreateQP(rnic.QPInitAttr{Type: rnic.GSI, SendCQ: p.cqa, RecvCQ: p.cqa,
		Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err == nil || !strings.Contains(err.Error(), "QP1") {
		t.Errorf("second GSI QP: %v, want an error naming QP1", err)
	}
	if err := ga.Modify(&rnic.QPAttr{QKey: 0x11111111}, rnic.QPAttrQKey); err == nil {
		t.Error("QP1 took Q_Key 0x11111111")
	}

	src := newGuarded(t, p.pda, 4096, rnic.AccessLocalWrite, 1)
	dst := newGuarded(t, p.pdb, 4096, rnic.AccessLocalWrite, 2)
	ah := must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
	mad := bytes.Repeat([]byte{0xa5}, 256)
	copy(src.region(), mad)
	send := func(qp *rnic.QP, qkey uint32) {
		t.Helper()
		must0(t, qp.PostSend(rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{src.mr.SGE(0, 256)},
			AH: ah, RemoteQPN: 1, RemoteQKey: qkey}))
		if wc := waitWC(t, p.cqa, 1, 5*time.Second)[0]; wc.Status != rnic.WCSuccess {
			t.Fatalf("send: %+v", wc)
		}
	}
	// b has no QP1 yet: the datagram finds no QP.
	before := counter(t, p.b, "rx_unknown_qpn")
	send(ga, 0x80010000)
	waitFor(t, func() bool { return counter(t, p.b, "rx_unknown_qpn") > before })

	gb := gsi(p.b, p.pdb, p.cqb)
	must0(t, gb.PostRecv(rnic.RecvWR{WRID: 7, SGL: []rnic.SGE{dst.mr.SGE(0, 40+256)}}))
	// A user UD QP cannot reach QP1 with its own Q_Key.
	badBefore := counter(t, p.b, "rx_bad_qkey")
	send(p.qpa, 0x11111111)
	waitFor(t, func() bool { return counter(t, p.b, "rx_bad_qkey") > badBefore })

	send(ga, 0x80010000)
	wc := waitWC(t, p.cqb, 1, 5*time.Second)[0]
	if wc.Status != rnic.WCSuccess || wc.WRID != 7 || wc.SrcQP != 1 || wc.QPNum != 1 || wc.ByteLen != 40+256 {
		t.Fatalf("QP1 receive: %+v, want success from source QP 1, 296 bytes", wc)
	}
	if !bytes.Equal(dst.region()[40:40+256], mad) {
		t.Error("MAD bytes differ")
	}
	dst.guardsIntact(t, "QP1 receive buffer")

	// Destroyed, QP1 can be made again.
	must0(t, gb.Destroy())
	gsi(p.b, p.pdb, p.cqb)
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not reached in 5 s")
		}
	}
}
