package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
)

// frame builds a finished RC frame on way w (0: 10.0.0.1 → 10.0.0.2).
func frame(w int, op wire.Opcode, psn wire.PSN, syn wire.Syndrome) []byte {
	a, b := wire.GIDFromAddr(netip.MustParseAddr("10.0.0.1")), wire.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))
	if w == 1 {
		a, b = b, a
	}
	r := wire.Route{Src: a, Dst: b}
	f := make([]byte, wire.FrameLen(&r, op, 16))
	if op == wire.OpRCAck {
		f = f[:wire.FrameLen(&r, op, 0)]
	}
	t := f[r.HeaderLen():]
	wire.BTH(t).Encode(&wire.BTHFields{Opcode: op, DestQP: 0x11, PSN: psn, PKey: wire.DefaultPKey})
	if off := op.Info().Offset(wire.HdrAETH); off >= 0 {
		wire.AETH(t[off:]).Encode(syn, 0)
	}
	r.Finish(f)
	return f
}

// TestTap feeds the tap departures and arrivals by hand and checks which
// packets it finds lost, retransmitted or NAKs, and what it shows.
func TestTap(t *testing.T) {
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	defer pb.Close()
	tp := newTap(false, [2]*mem.Port{pa, pb})
	rnic0, rnic1 := tp.observer(0), tp.observer(1)
	now := time.Unix(1, 0)
	tx0 := func(f []byte) { rnic0(sniff.TX, now, f) }
	rx1 := func(f []byte) { rnic1(sniff.RX, now, f) }
	tx1 := func(f []byte) { rnic1(sniff.TX, now, f) }
	rx0 := func(f []byte) { rnic0(sniff.RX, now, f) }

	// Arrivals keep departure order, as on link/mem without reordering.
	tp.begin()
	w := make([][]byte, 6)
	for i := range w {
		w[i] = frame(0, wire.OpRCWriteMiddle, wire.PSN(100+i), 0)
		tx0(w[i])
	}
	for _, i := range []int{0, 2, 3, 4} { // 101 and 105 are lost
		rx1(w[i])
	}
	nak := frame(1, wire.OpRCAck, 101, wire.SyndromeNAK(wire.NAKPSNSeqErr))
	tx1(nak)
	rx0(nak)
	for _, i := range []int{1, 2, 3} { // go back to 101; 102 is lost again
		tx0(w[i])
	}
	rx1(w[1]) // proves 105 lost
	rx1(w[3]) // proves the second 102 lost
	tx0(w[5]) // still pending: nothing proves it lost, and settle cannot
	// balance the books (mem dropped nothing), so it stays unmarked.
	tp.settle(5 * time.Millisecond)

	st := tp.stats()
	if st.packets != 11 || st.lost != 3 || st.retrans != 4 || st.naks != 1 {
		t.Errorf("stats %+v, want 11 packets, 3 lost, 4 retransmitted, 1 NAK", st)
	}
	var out bytes.Buffer
	tp.show(&out, "")
	s := out.String()
	for _, want := range []string{
		"psn=101 ack=0 len=16   ✗ lost on the wire",
		"AETH NAK PSN_SEQ_ERR",
		"psn=101 ack=0 len=16   ↻ retransmission",
		"psn=102 ack=0 len=16   ✗ retransmission lost on the wire",
		"psn=105 ack=0 len=16   ✗ lost on the wire",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("show lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "✗"); n != 3 {
		t.Errorf("%d packets shown as lost, want 3:\n%s", n, s)
	}
}
