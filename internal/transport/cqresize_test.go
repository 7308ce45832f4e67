package transport

import "testing"

// TestCQResizeAndPurge: Resize keeps the unpolled completions in order
// and refuses a depth below them; Purge removes one QP's and keeps the
// others' order (a QP gone to RESET).
func TestCQResizeAndPurge(t *testing.T) {
	c := NewCQ(1, 4)
	for i, qpn := range []uint32{7, 8, 7} {
		if ok, _ := c.push(&WC{WRID: uint64(i), QPNum: qpn}, false); !ok {
			t.Fatalf("push %d", i)
		}
	}
	if err := c.Resize(2); err != ErrCQBusy {
		t.Fatalf("Resize(2) holding 3: %v, want ErrCQBusy", err)
	}
	if err := c.Resize(8); err != nil || c.Depth() != 8 {
		t.Fatalf("Resize(8): %v, depth %d", err, c.Depth())
	}
	for i := 3; i < 8; i++ {
		if ok, _ := c.push(&WC{WRID: uint64(i), QPNum: uint32(7 + i%2)}, false); !ok {
			t.Fatalf("push %d after the resize", i)
		}
	}
	if n := c.Purge(8); n != 4 {
		t.Fatalf("Purge(8) removed %d, want 4", n)
	}
	dst := make([]WC, 8)
	n := c.poll(dst)
	want := []uint64{0, 2, 4, 6}
	if n != len(want) {
		t.Fatalf("polled %d, want %d", n, len(want))
	}
	for i, w := range want {
		if dst[i].WRID != w || dst[i].QPNum != 7 {
			t.Errorf("completion %d: wr_id %d qpn %d, want %d of QP 7", i, dst[i].WRID, dst[i].QPNum, w)
		}
	}
	if c.Unpolled() != 0 {
		t.Errorf("%d left", c.Unpolled())
	}
}
