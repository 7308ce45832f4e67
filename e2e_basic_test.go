package rnic_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/rnic/rnic"
)

func TestWriteSmoke(t *testing.T) {
	p := newPair(t, pairOpts{})
	src := make([]byte, 10000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 10000)
	mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
	mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	err := p.qpa.PostSend(rnic.SendWR{WRID: 7, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mra.SGE(0, len(src))}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()})
	if err != nil {
		t.Fatal(err)
	}
	wc := waitWC(t, p.cqa, 1, 5*time.Second)
	if wc[0].Status != rnic.WCSuccess || wc[0].WRID != 7 || wc[0].Opcode != rnic.WCRDMAWrite {
		t.Fatalf("wc %+v", wc[0])
	}
	if !bytes.Equal(src, dst) {
		t.Fatal("data mismatch")
	}
}
