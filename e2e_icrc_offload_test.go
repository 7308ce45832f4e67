package rnic_test

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
)

// TestICRCOffload: on link/mem, which corrupts nothing unless asked, the
// NICs leave the ICRC out (tx_icrc_offloaded) and take frames unchecked
// (rx_icrc_offloaded), as checksum offload on a loopback device. Once a
// port's faults corrupt, its NIC computes every ICRC again, the corrupted
// frames are caught (rx_icrc_encapsulated) and resent, and the data is
// whole.
func TestICRCOffload(t *testing.T) {
	p := newPair(t, pairOpts{})
	w := newICRCWriter(t, p)
	w.write(1)
	if n := w.counter(p.a, "tx_icrc_offloaded"); n == 0 {
		t.Error("a sent no frame without an ICRC on an intact link")
	}
	if n := w.counter(p.b, "rx_icrc_offloaded"); n == 0 {
		t.Error("b took no frame unchecked from an intact link")
	}
	if n := w.counter(p.b, "rx_icrc_encapsulated"); n != 0 {
		t.Errorf("%d ICRC errors on an intact link", n)
	}

	if err := p.pa.SetFaults(mem.Faults{Corrupt: 0.05, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	tx, rx := w.counter(p.a, "tx_icrc_offloaded"), w.counter(p.b, "rx_icrc_offloaded")
	for i := byte(2); i < 6; i++ {
		w.write(i)
	}
	if n := w.counter(p.a, "tx_icrc_offloaded") - tx; n != 0 {
		t.Errorf("a left the ICRC out of %d frames on a corrupting port", n)
	}
	if n := w.counter(p.b, "rx_icrc_offloaded") - rx; n != 0 {
		t.Errorf("b took %d frames unchecked from a corrupting port", n)
	}
	if c, e := p.pa.Stats().Corrupted, w.counter(p.b, "rx_icrc_encapsulated"); c == 0 || e == 0 {
		t.Errorf("%d frames corrupted, %d ICRC errors at b", c, e)
	}
}

// TestICRCOffloadCapture: a capture shows every frame with a valid ICRC,
// the ones its NIC sent without one too (it computes it), and the frames
// it saw are checked by their receiver.
func TestICRCOffloadCapture(t *testing.T) {
	var captured, bad atomic.Int64
	p := newPair(t, pairOpts{wrapA: func(l link.Link) link.Link {
		return sniff.New(l, sniff.Options{Func: func(_ sniff.Direction, _ time.Time, frame []byte) {
			captured.Add(1)
			if wire.CheckICRC(frame) != nil {
				bad.Add(1)
			}
		}})
	}})
	w := newICRCWriter(t, p)
	w.write(1)
	if captured.Load() == 0 || bad.Load() != 0 {
		t.Errorf("the capture saw %d frames, %d with a bad ICRC", captured.Load(), bad.Load())
	}
	if n := w.counter(p.b, "rx_icrc_offloaded"); n != 0 {
		t.Errorf("b took %d frames unchecked that a's capture had shown", n)
	}
}

// icrcWriter WRITEs 256 KiB from a pair's a to its b and checks them.
type icrcWriter struct {
	t        *testing.T
	p        *pair
	src, dst []byte
	mra, mrb *rnic.MR
}

func newICRCWriter(t *testing.T, p *pair) *icrcWriter {
	const size = 256 << 10
	w := &icrcWriter{t: t, p: p, src: make([]byte, size), dst: make([]byte, size)}
	w.mra = must(p.pda.RegMR(w.src, rnic.AccessLocalWrite))
	w.mrb = must(p.pdb.RegMR(w.dst, rnic.AccessLocalWrite|rnic.AccessRemoteWrite))
	return w
}

func (w *icrcWriter) write(seed byte) {
	w.t.Helper()
	for i := range w.src {
		w.src[i] = byte(i*7) ^ seed
	}
	if err := w.p.qpa.PostSend(rnic.SendWR{WRID: uint64(seed), Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{w.mra.SGE(0, len(w.src))}, RemoteAddr: w.mrb.Addr(), RKey: w.mrb.RKey()}); err != nil {
		w.t.Fatal(err)
	}
	if wc := waitWC(w.t, w.p.cqa, 1, 30*time.Second); wc[0].Status != rnic.WCSuccess {
		w.t.Fatalf("WRITE: %+v", wc[0])
	}
	if !bytes.Equal(w.src, w.dst) {
		w.t.Fatal("the WRITE's data differs")
	}
}

func (w *icrcWriter) counter(d *rnic.Device, name string) uint64 {
	w.t.Helper()
	n, ok := d.Counter(name)
	if !ok {
		w.t.Fatalf("no counter %s", name)
	}
	return n
}

// TestICRCOffloadFix: a frame sent without its ICRC and then corrupted
// by the link arrives with a computed ICRC that no longer matches, so the
// receiver, which checks it, drops it.
func TestICRCOffloadFix(t *testing.T) {
	var r wire.Route
	r.Src, r.Dst = wire.GIDFromAddr(netip.MustParseAddr("10.0.0.1")), wire.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))
	n := wire.FrameLen(&r, wire.OpRCSendOnly, 100)
	b := link.Get(n)
	f := b.Bytes()
	wire.BTH(f[r.HeaderLen():]).Encode(&wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: wire.DefaultPKey, DestQP: 0x11})
	r.WriteHeaders(f)
	b.Flags |= link.FlagNoICRC
	if wire.CheckICRC(f) == nil {
		t.Fatal("a frame without its ICRC verifies")
	}
	link.FixICRC(b)
	if b.Flags&link.FlagNoICRC != 0 || wire.CheckICRC(f) != nil {
		t.Fatalf("after FixICRC: flags %v, %v", b.Flags, wire.CheckICRC(f))
	}
	f[len(f)-20] ^= 1
	if wire.CheckICRC(f) == nil {
		t.Fatal("a corrupted frame verifies")
	}
	b.Release()
}
