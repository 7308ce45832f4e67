package transport

import (
	"bytes"
	"testing"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// TestWriteTargetKept: the wall-clock responder translates a window of a
// WRITE's target at the packet that needs it (here the first, for the
// whole 3 KiB) and cuts the later packets' parts from it, but only while
// the ATU's tables stay as they were: a memory window invalidated between
// two packets of the message (the region behind it still mapped) makes
// the next packet a remote access error, and none of its bytes lands.
// Without the invalidation the message is placed whole, with no
// translation after the first packet's.
func TestWriteTargetKept(t *testing.T) {
	for _, invalidate := range []bool{false, true} {
		name := map[bool]string{false: "kept", true: "invalidated"}[invalidate]
		t.Run(name, func(t *testing.T) {
			s := newSolo(t, nodeConfig{pathMTU: wire.MTU1024})
			n := s.n
			buf := make([]byte, 4096)
			key := bindMW2(t, n, buf, 0x900000, atu.RemoteWrite)
			s.send(hdrs{Op: wire.OpRCWriteFirst, PSN: 0, RETH: reth{VA: 0x900000, RKey: key, Len: 3072}, Payload: pattern(1024, 1)})
			translations := n.atu.Stats().Translations
			if invalidate {
				if f := n.atu.Invalidate(key, testPD, n.qp.QPN, false); f != atu.OK {
					t.Fatal(f)
				}
			}
			out := s.send(hdrs{Op: wire.OpRCWriteMiddle, PSN: 1, Payload: pattern(1024, 2)})
			if invalidate {
				expectFrames(t, out, checks(opcode(wire.OpRCAck), psn(1), syndrome(synAccErr)))
				if !bytes.Equal(buf[1024:2048], make([]byte, 1024)) {
					t.Error("the packet after the invalidation was placed")
				}
				return
			}
			expectFrames(t, s.send(hdrs{Op: wire.OpRCWriteLast, PSN: 2, AckReq: true, Payload: pattern(1024, 3)}),
				checks(opcode(wire.OpRCAck), psn(2), syndrome(synACK)))
			want := append(append(pattern(1024, 1), pattern(1024, 2)...), pattern(1024, 3)...)
			if !bytes.Equal(buf[:3072], want) {
				t.Error("the WRITE's bytes differ")
			}
			if d := n.atu.Stats().Translations - translations; d != 0 {
				t.Errorf("%d translations after the first packet, want 0 (cut from the first's)", d)
			}
		})
	}
}

// TestReadSourceKept: the same for the responder's READ source: the
// responses after the first are cut from the window translated for it,
// and a window invalidated between two responses stops the READ there
// (no response carries bytes read through a window no longer valid).
func TestReadSourceKept(t *testing.T) {
	for _, invalidate := range []bool{false, true} {
		name := map[bool]string{false: "kept", true: "invalidated"}[invalidate]
		t.Run(name, func(t *testing.T) {
			s := newSolo(t, nodeConfig{pathMTU: wire.MTU1024})
			n := s.n
			buf := pattern(4096, 7)
			key := bindMW2(t, n, buf, 0x900000, atu.RemoteRead)
			f := s.frame(hdrs{Op: wire.OpRCReadRequest, PSN: 0, AckReq: true, RETH: reth{VA: 0x900000, RKey: key, Len: 3072}})
			b := link.Get(len(f))
			copy(b.Bytes(), f)
			n.e.Receive(s.now, []*link.Buf{b})
			n.e.Run(s.now, 1)
			first := s.take()
			if len(first) != 1 {
				t.Fatalf("%d frames for one turn of one packet, want the first response", len(first))
			}
			translations := n.atu.Stats().Translations
			if invalidate {
				if f := n.atu.Invalidate(key, testPD, n.qp.QPN, false); f != atu.OK {
					t.Fatal(f)
				}
			}
			var pkt wire.Packet
			var data [][]byte
			for _, fr := range append(first, s.run()...) {
				if err := pkt.Parse(fr); err != nil {
					t.Fatal(err)
				}
				if len(pkt.Payload) > 0 {
					data = append(data, bytes.Clone(pkt.Payload))
				}
			}
			if invalidate {
				if len(data) != 1 {
					t.Errorf("%d responses with data, want only the one before the invalidation", len(data))
				}
				return
			}
			if got := bytes.Join(data, nil); !bytes.Equal(got, buf[:3072]) {
				t.Errorf("the responses carry %d bytes, not the source's 3072", len(got))
			}
			if d := n.atu.Stats().Translations - translations; d != 0 {
				t.Errorf("%d translations after the first response, want 0 (cut from its window)", d)
			}
		})
	}
}

// bindMW2 registers buf at iova and binds a type 2 memory window over all
// of it to n's QP with the given remote rights; it returns the window's
// key.
func bindMW2(t *testing.T, n *node, buf []byte, iova uint64, access atu.Access) uint32 {
	t.Helper()
	mr := n.regMR(testPD, buf, iova, atu.LocalWrite|atu.MWBind)
	mw, err := n.atu.AllocMW(testPD, atu.KindMW2)
	if err != nil {
		t.Fatal(err)
	}
	key := mw&^0xFF | 0x21
	if f := n.atu.BindMW(atu.Bind{MW: mw, NewKey: key, MR: mr, PD: testPD, QPN: n.qp.QPN, VA: iova, Length: uint64(len(buf)), Access: access}); f != atu.OK {
		t.Fatal(f)
	}
	return key
}
