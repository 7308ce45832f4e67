package rnic_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestWriteByReference: on link/mem an RC WRITE's frames carry references
// to the sender's registered memory instead of its bytes
// (tx_payload_refs), and the receiver's DMA engine copies each payload
// once, straight into its target: the sender's DMA engines move none of
// it (dma_bytes). Under every fault the port injects the data arrives
// whole: lost, duplicated, reordered and delayed frames refer to the
// memory again or still, and a port that corrupts makes its NIC carry
// bytes and compute the ICRC (no reference).
func TestWriteByReference(t *testing.T) {
	tests := []struct {
		name string
		f    mem.Faults
		refs bool
	}{
		{"intact", mem.Faults{}, true},
		{"loss", mem.Faults{Seed: 1, Loss: 0.05}, true},
		{"duplicate", mem.Faults{Seed: 2, Duplicate: 0.1}, true},
		{"reorder", mem.Faults{Seed: 3, Reorder: 0.1}, true},
		{"delay", mem.Faults{Seed: 4, Delay: time.Millisecond, Jitter: time.Millisecond}, true},
		{"corrupt", mem.Faults{Seed: 5, Corrupt: 0.05}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t, pairOpts{fa: tt.f, fb: tt.f})
			w := newICRCWriter(t, p)
			dmaA, dmaB := w.counter(p.a, "dma_bytes"), w.counter(p.b, "dma_bytes")
			for i := byte(1); i <= 4; i++ {
				w.write(i)
			}
			refs := w.counter(p.a, "tx_payload_refs")
			moved := 4 * uint64(len(w.src))
			switch {
			case tt.refs && refs < moved/4096:
				t.Errorf("tx_payload_refs %d: want at least one per packet of %d bytes", refs, moved)
			case tt.refs && w.counter(p.a, "dma_bytes")-dmaA >= moved:
				t.Errorf("the sender's DMA engines moved %d bytes of %d sent by reference", w.counter(p.a, "dma_bytes")-dmaA, moved)
			case !tt.refs && refs != 0:
				t.Errorf("tx_payload_refs %d on a corrupting port", refs)
			}
			if n := w.counter(p.b, "dma_bytes") - dmaB; n < moved {
				t.Errorf("the receiver's DMA engines moved %d bytes, want at least %d", n, moved)
			}
			if n := w.counter(p.b, "rx_ref_revoked"); n != 0 {
				t.Errorf("rx_ref_revoked %d with nothing taken back", n)
			}
		})
	}
}

// TestUnreliableByReference: on link/mem UC and UD frames carry
// references to the sender's registered memory too, and their work
// completes once those frames are consumed — received, dropped or lost —
// not when they were sent: the buffer is the program's again exactly at
// its completion. The sender here writes junk over its buffer the moment
// each send completes; under every fault the port injects (frames held
// for milliseconds on the wire, duplicated, reordered, lost), a receiver
// that copied from the buffer after that would hold junk.
func TestUnreliableByReference(t *testing.T) {
	faults := []struct {
		name string
		f    mem.Faults
		refs bool // frames go by reference
		all  bool // every message arrives
	}{
		{"intact", mem.Faults{}, true, true},
		{"loss", mem.Faults{Seed: 1, Loss: 0.1}, true, false},
		// Delayed apart, a copy may arrive after the original's send
		// completed: it carries bytes (link.Buf.Clone).
		{"duplicate", mem.Faults{Seed: 2, Duplicate: 0.3, Delay: time.Millisecond, Jitter: 2 * time.Millisecond}, true, false},
		{"reorder", mem.Faults{Seed: 3, Reorder: 0.2}, true, false},
		{"delay", mem.Faults{Seed: 4, Delay: 2 * time.Millisecond}, true, true},
		// Jitter reorders a UC message's packets: it is dropped whole.
		{"jitter", mem.Faults{Seed: 5, Delay: time.Millisecond, Jitter: time.Millisecond}, true, false},
		{"corrupt", mem.Faults{Seed: 6, Corrupt: 0.05}, false, false},
	}
	const msgs = 24
	for _, typ := range []rnic.QPType{rnic.UC, rnic.UD} {
		size := 16 << 10 // a UC WRITE of four packets
		if typ == rnic.UD {
			size = 1024 // one packet
		}
		for _, tt := range faults {
			t.Run(fmt.Sprintf("%v/%s", typ, tt.name), func(t *testing.T) {
				t.Parallel()
				p := newPair(t, pairOpts{typ: typ, fa: tt.f, mtu: rnic.MTU4096})
				src := make([]byte, size)
				slot := size // the receiver's room per message
				if typ == rnic.UD {
					slot = 40 + size // the GRH first
				}
				dst := make([]byte, 2*msgs*slot)
				mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
				mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
				var ah *rnic.AH
				if typ == rnic.UD {
					ah = must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
				}
				for i := range 2 * msgs { // room for duplicates
					must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{mrb.SGE(i*slot, slot)}}))
				}
				for i := range msgs {
					copy(src, pattern(i, size))
					wr := rnic.SendWR{WRID: uint64(i), Flags: rnic.SendSignaled, ImmData: uint32(i), SGL: []rnic.SGE{mra.SGE(0, size)}}
					if typ == rnic.UD {
						wr.Opcode, wr.AH, wr.RemoteQPN, wr.RemoteQKey = rnic.WRSendWithImm, ah, p.qpb.QPN(), 0x11111111
					} else {
						wr.Opcode, wr.RemoteAddr, wr.RKey = rnic.WRRDMAWriteWithImm, mrb.Addr()+uint64(i*slot), mrb.RKey()
					}
					must0(t, p.qpa.PostSend(wr))
					if wc := waitWC(t, p.cqa, 1, 10*time.Second)[0]; wc.Status != rnic.WCSuccess || wc.WRID != uint64(i) {
						t.Fatalf("send %d: %+v", i, wc)
					}
					for j := range src {
						src[j] = 0xEE // the program's again
					}
				}
				// What arrived, duplicates and late frames included.
				time.Sleep(20 * time.Millisecond)
				got := 0
				wcs := make([]rnic.WC, 64)
				for {
					n := must(p.cqb.Poll(wcs))
					if n == 0 {
						break
					}
					for _, wc := range wcs[:n] {
						if wc.Status != rnic.WCSuccess {
							t.Fatalf("receive: %+v", wc)
						}
						got++
						// The immediate names the message; UD's lands in
						// the receive buffer of whichever WQE took it.
						at := int(wc.ImmData) * slot
						if typ == rnic.UD {
							at = int(wc.WRID)*slot + 40
						}
						if !bytes.Equal(dst[at:at+size], pattern(int(wc.ImmData), size)) {
							t.Fatalf("message %d differs at the receiver (junk the sender wrote after its completion: %v)",
								wc.ImmData, bytes.IndexByte(dst[at:at+size], 0xEE) >= 0)
						}
					}
				}
				if tt.all && got < msgs {
					t.Errorf("%d of %d messages arrived", got, msgs)
				}
				if got == 0 && (typ == rnic.UD || tt.all) {
					t.Error("no message arrived") // (jitter may reorder every UC message)
				}
				refs := counter(t, p.a, "tx_payload_refs")
				if tt.refs && refs == 0 {
					t.Error("tx_payload_refs 0: no frame went by reference")
				}
				if !tt.refs && refs != 0 {
					t.Errorf("tx_payload_refs %d on a corrupting port", refs)
				}
			})
		}
	}
}

// TestByReferenceTakenBack: a frame in flight refers to memory its sender
// takes back — the region deregistered, or the QP destroyed, before the
// WRITE completed (wrong use, but a program may do it) — and the sender
// then overwrites the buffer. The receiver must find the memory gone and
// drop the frame (rx_ref_revoked): no byte written after Dereg or
// Destroy returned may reach the target, and the NIC reads none of it.
func TestByReferenceTakenBack(t *testing.T) {
	for _, what := range []string{"dereg", "destroy"} {
		t.Run(what, func(t *testing.T) {
			// Frames wait 50 ms on the wire: long enough to take the
			// memory back while they are on it.
			p := newPair(t, pairOpts{fa: mem.Faults{Delay: 50 * time.Millisecond}})
			const size = 64 << 10
			src, dst := bytes.Repeat([]byte{0x11}, size), make([]byte, size)
			mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
			mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
			must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
				SGL: []rnic.SGE{mra.SGE(0, size)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}))
			waitFor(t, func() bool { return p.pa.Stats().Delayed > 0 })
			if what == "dereg" {
				must0(t, mra.Dereg())
			} else {
				must0(t, p.qpa.Destroy())
			}
			for i := range src {
				src[i] = 0xEE // the program's again
			}
			time.Sleep(200 * time.Millisecond) // the frames arrive, and any sent again
			if i := bytes.IndexByte(dst, 0xEE); i >= 0 {
				t.Fatalf("byte %d of the target holds what the sender wrote after taking its memory back", i)
			}
			if n := counter(t, p.b, "rx_ref_revoked"); n == 0 {
				t.Error("rx_ref_revoked 0: no frame found its memory taken back")
			}
			if what == "dereg" {
				// The WRITE fails: its frames sent again find no region.
				wc := waitWC(t, p.cqa, 1, 10*time.Second)
				if wc[0].Status == rnic.WCSuccess {
					t.Errorf("the WRITE whose region was deregistered succeeded: %+v", wc[0])
				}
			}
		})
	}
}

// TestUnreliableByReferenceStopped: a UD QP whose frames sent by
// reference are on the wire (held 50 ms) is stopped. Moved to ERR, its
// work completes with WR_FLUSH_ERR, in order, and only once the frames
// were consumed: the receiver has them whole before the sender's
// completions give the buffers back. A send that fails locally behind
// them (longer than the port's MTU) completes after them, and the QP goes to SQE
// and back to RTS. Reset and destroy discard the work without
// completions and take the memory back at once: frames that arrive later
// are dropped (rx_ref_revoked), and nothing written after reaches the
// receiver.
func TestUnreliableByReferenceStopped(t *testing.T) {
	const size, n = 1024, 3
	for _, what := range []string{"error", "sqe", "reset", "destroy"} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, pairOpts{typ: rnic.UD, fa: mem.Faults{Delay: 50 * time.Millisecond}})
			src, dst := make([]byte, 8192), make([]byte, n*(40+size))
			mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
			mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite))
			ah := must(p.pda.CreateAH(rnic.AHAttr{SGIDIndex: rnic.AddrGIDIndex, DGID: must(p.b.GID(rnic.AddrGIDIndex))}))
			for i := range n {
				must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: uint64(i), SGL: []rnic.SGE{mrb.SGE(i*(40+size), 40+size)}}))
				copy(src[i*size:], pattern(i, size))
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: uint64(i), Opcode: rnic.WRSendWithImm, Flags: rnic.SendSignaled, ImmData: uint32(i),
					SGL: []rnic.SGE{mra.SGE(i*size, size)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: 0x11111111}))
			}
			if what == "sqe" {
				must0(t, p.qpa.PostSend(rnic.SendWR{WRID: n, Opcode: rnic.WRSend, Flags: rnic.SendSignaled,
					SGL: []rnic.SGE{mra.SGE(0, 8192)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: 0x11111111}))
			}
			waitFor(t, func() bool { return p.pa.Stats().Delayed >= n })
			junk := func(i int) {
				for j := range size {
					src[i*size+j] = 0xEE // the program's again
				}
			}
			switch what {
			case "error", "sqe":
				want := rnic.WCWRFlushErr
				if what == "error" {
					must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState))
				} else {
					want = rnic.WCSuccess
				}
				for i := range n {
					wc := waitWC(t, p.cqa, 1, 10*time.Second)[0]
					if wc.WRID != uint64(i) || wc.Status != want {
						t.Fatalf("completion %d: %+v, want wr_id %d status %v", i, wc, i, want)
					}
					junk(i)
				}
				// The frames were consumed before the completions: the
				// receiver holds all of them, whole.
				wcs := make([]rnic.WC, n+1)
				if got := must(p.cqb.Poll(wcs)); got != n {
					t.Fatalf("the receiver has %d of %d messages when the sender's last completed", got, n)
				}
				for _, wc := range wcs[:n] {
					at := int(wc.WRID)*(40+size) + 40
					if wc.Status != rnic.WCSuccess || !bytes.Equal(dst[at:at+size], pattern(int(wc.ImmData), size)) {
						t.Fatalf("message %+v differs at the receiver", wc)
					}
				}
				if what == "sqe" {
					wc := waitWC(t, p.cqa, 1, 10*time.Second)[0]
					if wc.WRID != n || wc.Status != rnic.WCLocLenErr {
						t.Fatalf("the send longer than the MTU: %+v", wc)
					}
					waitFor(t, func() bool { return p.qpa.State() == rnic.QPSSQE })
					must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSRTS}, rnic.QPAttrState))
					must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 9, SGL: []rnic.SGE{mrb.SGE(0, 40+size)}}))
					copy(src, pattern(9, size))
					must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 9, Opcode: rnic.WRSendWithImm, Flags: rnic.SendSignaled, ImmData: 9,
						SGL: []rnic.SGE{mra.SGE(0, size)}, AH: ah, RemoteQPN: p.qpb.QPN(), RemoteQKey: 0x11111111}))
					if wc := waitWC(t, p.cqa, 1, 10*time.Second)[0]; wc.WRID != 9 || wc.Status != rnic.WCSuccess {
						t.Fatalf("a send after SQE and back to RTS: %+v", wc)
					}
					if wc := waitWC(t, p.cqb, 1, 10*time.Second)[0]; wc.ImmData != 9 || !bytes.Equal(dst[40:40+size], pattern(9, size)) {
						t.Fatalf("the send after SQE: %+v, or its data differs", wc)
					}
				}
			case "reset", "destroy":
				if what == "reset" {
					must0(t, p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSReset}, rnic.QPAttrState))
				} else {
					must0(t, p.qpa.Destroy())
				}
				for i := range n {
					junk(i)
				}
				waitFor(t, func() bool { return counter(t, p.b, "rx_ref_revoked") == n })
				if i := bytes.IndexByte(dst, 0xEE); i >= 0 {
					t.Fatalf("byte %d at the receiver holds what the sender wrote after %s", i, what)
				}
				wcs := make([]rnic.WC, 4)
				if got := must(p.cqa.Poll(wcs)); got != 0 {
					t.Errorf("%s left %d completions: %+v", what, got, wcs[:got])
				}
			}
		})
	}
}
