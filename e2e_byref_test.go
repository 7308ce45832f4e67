package rnic_test

import (
	"bytes"
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

// TestByReferenceOnlyRC: UC's work completes once its frames are sent,
// and the buffer is the program's again before a receiver could copy
// from it: UC carries bytes.
func TestByReferenceOnlyRC(t *testing.T) {
	p := newPair(t, pairOpts{typ: rnic.UC})
	src, dst := bytes.Repeat([]byte{0x5A}, 64<<10), make([]byte, 64<<10)
	mra := must(p.pda.RegMR(src, rnic.AccessLocalWrite))
	mrb := must(p.pdb.RegMR(dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	// With an immediate, so that b's completion says the bytes are in.
	must0(t, p.qpb.PostRecv(rnic.RecvWR{WRID: 2}))
	must0(t, p.qpa.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRRDMAWriteWithImm, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{mra.SGE(0, len(src))}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}))
	if wc := waitWC(t, p.cqa, 1, 10*time.Second); wc[0].Status != rnic.WCSuccess {
		t.Fatalf("UC WRITE: %+v", wc[0])
	}
	if wc := waitWC(t, p.cqb, 1, 10*time.Second); wc[0].Status != rnic.WCSuccess {
		t.Fatalf("UC WRITE's immediate: %+v", wc[0])
	}
	if !bytes.Equal(src, dst) {
		t.Error("the UC WRITE's bytes differ")
	}
	if n := counter(t, p.a, "tx_payload_refs"); n != 0 {
		t.Errorf("tx_payload_refs %d on UC", n)
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
