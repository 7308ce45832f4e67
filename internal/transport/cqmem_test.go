package transport

import (
	"sync/atomic"
	"testing"

	"github.com/rnic/rnic/internal/queue"
)

// cqProgram is a C program's side of a CQ in shared memory, as the
// provider's library polls it: by the CQEs' owner words, advancing its
// consumer index.
type cqProgram struct {
	mem      []byte
	ci, arm  atomic.Uint32
	notified int
}

func newCQProgram(slots int) *cqProgram { return &cqProgram{mem: make([]byte, slots*queue.CQELen)} }

func (p *cqProgram) cqMem() *CQMem {
	return &CQMem{Mem: p.mem, CI: &p.ci, Arm: &p.arm, Notify: func() { p.notified++ }}
}

// poll takes the CQEs the engine wrote, returning their wr_ids.
func (p *cqProgram) poll() []uint64 {
	var ids []uint64
	for _, w := range p.wcs() {
		ids = append(ids, w.WRID)
	}
	return ids
}

// TestCQInMem: the engine writes CQEs into the program's ring, which
// holds as many as it has slots (one more is an overrun), and the
// program polls them in order across laps and across the wrap of the
// 32-bit indices.
func TestCQInMem(t *testing.T) {
	p := newCQProgram(4)
	p.ci.Store(^uint32(0) - 5) // the indices wrap while the test runs
	c, err := NewCQInMem(1, p.cqMem())
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(0)
	for round := range 5 {
		for range 4 {
			if ok, _ := c.push(&WC{WRID: next}, false); !ok {
				t.Fatalf("round %d: push %d refused with room", round, next)
			}
			next++
		}
		if c.Unpolled() != 4 {
			t.Fatalf("round %d: %d unpolled, want 4", round, c.Unpolled())
		}
		got := p.poll()
		if len(got) != 4 || got[0] != next-4 || got[3] != next-1 {
			t.Fatalf("round %d: polled %v, want %d..%d", round, got, next-4, next-1)
		}
	}
	for i := range 4 {
		c.push(&WC{WRID: uint64(i)}, false)
	}
	if ok, overrun := c.push(&WC{}, false); ok || !overrun || !c.Overrun() {
		t.Fatalf("a fifth CQE in four slots: ok %v overrun %v", ok, overrun)
	}
	if ok, overrun := c.push(&WC{}, false); ok || overrun {
		t.Fatalf("a CQE after the overrun: ok %v overrun %v, want refused quietly", ok, overrun)
	}
}

// TestCQInMemGarbageCI: a consumer index the ring never had (ahead of
// what the engine wrote) puts the CQ in error; nothing is written.
func TestCQInMemGarbageCI(t *testing.T) {
	p := newCQProgram(8)
	c, err := NewCQInMem(1, p.cqMem())
	if err != nil {
		t.Fatal(err)
	}
	c.push(&WC{WRID: 1}, false)
	p.ci.Store(1000)
	if ok, overrun := c.push(&WC{WRID: 2}, false); ok || !overrun {
		t.Fatalf("push with a garbage consumer index: ok %v overrun %v, want the CQ in error", ok, overrun)
	}
	if c.Unpolled() != 0 {
		t.Errorf("Unpolled %d with a garbage consumer index, want 0", c.Unpolled())
	}
}

// TestCQInMemNotify: the program's arm word asks for the next event
// (1) or the next solicited or failed completion (2); the engine fires
// once and clears it.
func TestCQInMemNotify(t *testing.T) {
	p := newCQProgram(16)
	c, err := NewCQInMem(1, p.cqMem())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		arm       uint32
		wc        WC
		solicited bool
		fires     bool
	}{
		{0, WC{}, true, false},
		{armNext, WC{}, false, true},
		{0, WC{}, false, false}, // fired: disarmed
		{armSolicited, WC{}, false, false},
		{armSolicited, WC{}, true, true},
		{armSolicited, WC{Status: WCRemAccessErr}, false, true},
	}
	for i, s := range steps {
		p.arm.Store(s.arm)
		before := p.notified
		c.push(&s.wc, s.solicited)
		if fired := p.notified > before; fired != s.fires {
			t.Errorf("step %d (arm %d, solicited %v, status %v): fired %v, want %v", i, s.arm, s.solicited, s.wc.Status, fired, s.fires)
		}
		if s.fires && p.arm.Load() != 0 {
			t.Errorf("step %d: arm word %d after the event, want 0", i, p.arm.Load())
		}
	}
}

// TestCQInMemResize: the unpolled CQEs move to the new ring from index
// 0, the consumer index is 0, and the engine writes on there; a ring too
// small for them is refused. Purge leaves a shared ring alone (the
// program's library cleans it).
func TestCQInMemResize(t *testing.T) {
	p := newCQProgram(4)
	c, err := NewCQInMem(1, p.cqMem())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		c.push(&WC{WRID: uint64(i), QPNum: 7}, false)
	}
	p.poll()
	for i := 4; i < 7; i++ {
		c.push(&WC{WRID: uint64(i), QPNum: 7}, false)
	}
	if n := c.Purge(7); n != 0 || c.Unpolled() != 3 {
		t.Fatalf("Purge on a shared ring removed %d (unpolled %d), want none", n, c.Unpolled())
	}
	small := newCQProgram(2)
	if err := c.ResizeInMem(small.cqMem()); err != ErrCQBusy {
		t.Fatalf("resize to 2 slots holding 3: %v, want ErrCQBusy", err)
	}
	if err := c.ResizeInMem(&CQMem{Mem: make([]byte, 3*queue.CQELen), CI: &p.ci, Arm: &p.arm, Notify: func() {}}); err == nil {
		t.Fatal("resize to 3 slots (not a power of two) accepted")
	}
	big := newCQProgram(8)
	big.ci.Store(99)
	if err := c.ResizeInMem(big.cqMem()); err != nil {
		t.Fatal(err)
	}
	c.push(&WC{WRID: 7}, false)
	got := big.poll()
	if want := []uint64{4, 5, 6, 7}; len(got) != len(want) || got[0] != 4 || got[3] != 7 {
		t.Fatalf("after the resize the program polled %v, want %v", got, want)
	}
}

// TestCQDepthNotPow2: a Go program's CQ of 3 entries holds 3, though
// its ring has 4 slots.
func TestCQDepthNotPow2(t *testing.T) {
	c := NewCQ(1, 3)
	for i := range 3 {
		if ok, _ := c.push(&WC{WRID: uint64(i)}, false); !ok {
			t.Fatalf("push %d", i)
		}
	}
	if ok, overrun := c.push(&WC{}, false); ok || !overrun {
		t.Fatalf("a fourth CQE in a CQ of 3: ok %v overrun %v", ok, overrun)
	}
	dst := make([]WC, 4)
	if n := c.poll(dst); n != 3 || dst[2].WRID != 2 {
		t.Fatalf("polled %d (%v)", n, dst[:n])
	}
}

// TestCQImmOrInvalidatedKey: the CQE's one word carries the immediate
// data or the invalidated rkey, as the flags say, and Poll gives it back
// in the right field.
func TestCQImmOrInvalidatedKey(t *testing.T) {
	c := NewCQ(1, 4)
	c.push(&WC{WRID: 1, Flags: WCWithImm, ImmData: 0xabcd}, false)
	c.push(&WC{WRID: 2, Flags: WCWithInv, InvalidatedRKey: 0x1234}, false)
	dst := make([]WC, 2)
	if n := c.poll(dst); n != 2 {
		t.Fatalf("polled %d", n)
	}
	if dst[0].ImmData != 0xabcd || dst[0].InvalidatedRKey != 0 || dst[1].InvalidatedRKey != 0x1234 || dst[1].ImmData != 0 {
		t.Errorf("polled %+v and %+v", dst[0], dst[1])
	}
}

// wcs takes the CQEs the engine wrote, as work completions.
func (p *cqProgram) wcs() []WC {
	var out []WC
	depth := uint32(len(p.mem) / queue.CQELen)
	var e queue.CQE
	for {
		ci := p.ci.Load()
		o := int(ci%depth) * queue.CQELen
		if !queue.GetCQE(p.mem[o:o+queue.CQELen], queue.Lap(ci, depth), &e) {
			return out
		}
		w := WC{WRID: e.WRID, Status: WCStatus(e.Status), Opcode: WCOpcode(e.Opcode), Flags: WCFlags(e.Flags),
			VendorErr: e.VendorErr, ByteLen: e.ByteLen, QPNum: e.QPNum, SrcQP: e.SrcQP, PKeyIndex: e.PKeyIndex, SL: e.SL}
		if w.Flags&WCWithInv != 0 {
			w.InvalidatedRKey = e.Imm
		} else {
			w.ImmData = e.Imm
		}
		out = append(out, w)
		p.ci.Store(ci + 1)
	}
}
