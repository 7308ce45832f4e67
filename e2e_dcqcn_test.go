package rnic_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestDCQCNRealTime: the congestion control of the protocol engine on the
// wall clock. Over a link that marks a tenth of the ECN-capable frames
// Congestion Experienced (as a congested switch would), the responder
// answers with CNPs, the requester's QP cuts its rate on them and paces
// its WRITEs — every byte still lands; with DCQCN off the frames are not
// ECN-capable, so nothing is marked and no CNP is sent.
func TestDCQCNRealTime(t *testing.T) {
	run := func(cc *rnic.DCQCN) (marked, sent, handled uint64) {
		cfg := rnic.DefaultDCQCN(10e9)
		cfg.CNPInterval = 20 * time.Microsecond
		opts := rnic.Options{}
		if cc != nil {
			opts.DCQCN = &cfg
		}
		f := mem.Faults{Seed: 7, MarkCE: 0.1}
		p := newPair(t, pairOpts{fa: f, fb: f, devOpts: opts})
		src := make([]byte, 1<<20)
		for i := range src {
			src[i] = byte(i * 7)
		}
		ms := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
		dst := make([]byte, len(src))
		md := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
		const n, size = 64, 16 << 10
		for i := range n {
			off := uint64(i * size)
			if err := p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{{Addr: ms.Addr() + off, Length: size, LKey: ms.LKey()}}, RemoteAddr: md.Addr() + off, RKey: md.RKey()}); err != nil {
				t.Fatal(err)
			}
		}
		for _, wc := range waitWC(t, p.cqa, n, 20*time.Second) {
			if wc.Status != rnic.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		if !bytes.Equal(dst[:n*size], src[:n*size]) {
			t.Fatal("the WRITEs' bytes differ at the responder")
		}
		return p.pa.Stats().ECNMarked, counter(t, p.b, "np_cnp_sent"), qpCounter(t, p.qpa, "rp_cnp_handled")
	}
	marked, sent, handled := run(&rnic.DCQCN{})
	t.Logf("DCQCN on: %d frames marked, %d CNPs sent, %d handled", marked, sent, handled)
	if marked == 0 || sent == 0 || handled == 0 || handled > sent {
		t.Errorf("DCQCN on: %d marked, %d CNPs sent, %d handled; want some of each, none handled that was not sent", marked, sent, handled)
	}
	if marked, sent, handled := run(nil); marked != 0 || sent != 0 || handled != 0 {
		t.Errorf("DCQCN off: %d marked, %d CNPs sent, %d handled; want none", marked, sent, handled)
	}
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.9.9.1"), netip.MustParseAddr("10.9.9.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	defer pb.Close()
	if d, err := rnic.Open(rnic.Options{Link: pa, DCQCN: &rnic.DCQCN{}}); err == nil {
		d.Close()
		t.Error("Open with a zero DCQCN (no line rate): no error")
	}
}
