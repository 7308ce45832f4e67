package udp_test

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

// TestSiblingsInMemory: two links of one process with Siblings set hand
// each other their frames in memory: every frame arrives, whole (its
// ICRC verifies, its IPv4 header is the sender's, not rebuilt), in order,
// and neither link makes a send or receive system call for them.
func TestSiblingsInMemory(t *testing.T) {
	for _, v6pair := range []bool{false, true} {
		name := "IPv4"
		if v6pair {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) {
			ra, rb := &recorder{keep: true}, &recorder{keep: true}
			// Addresses of this test alone: it counts every datagram.
			oa := udp.Options{Siblings: true, Addr: netip.MustParseAddr("127.0.0.37")}
			ob := udp.Options{Siblings: true, Addr: netip.MustParseAddr("127.0.0.38")}
			a, b := pair(t, v6pair, oa, ob, ra, rb)
			const n = 200
			for i := range n / 10 {
				bufs := make([]*link.Buf, 10)
				for j := range bufs {
					bufs[j] = frame(a, b, uint32(i*10+j), 100+j*300)
				}
				a.Send(bufs)
			}
			b.Send([]*link.Buf{frame(b, a, 7, 64)})
			waitFor(t, "the frames", func() bool { return rb.count() == n && ra.count() == 1 })
			for i, idx := range rb.indices() {
				if idx != uint32(i) {
					t.Fatalf("frame %d arrived as %d: out of order", i, idx)
				}
			}
			rb.mu.Lock()
			for i, f := range rb.frames {
				if err := wire.CheckICRC(f); err != nil {
					t.Errorf("frame %d: %v", i, err)
				}
				if rb.flags[i]&link.FlagIPRebuilt != 0 {
					t.Errorf("frame %d marked IP-rebuilt: a sibling's frame is the sender's own", i)
				}
			}
			rb.mu.Unlock()
			sa, sb := a.Stats(), b.Stats()
			// No send system call, and every frame B took is A's, handed
			// over in memory. (B's socket may still have received a
			// datagram: full runs saw one recvmmsg on these addresses;
			// it is logged, not the test.)
			if sa.TxBatches != 0 || sa.SentFrames != 0 || sb.RxFrames != sb.SiblingRx {
				t.Errorf("A's sendmmsg %d (%d frames); B took %d frames, %d from its sibling: want no send, every frame the sibling's",
					sa.TxBatches, sa.SentFrames, sb.RxFrames, sb.SiblingRx)
			}
			if sb.RxBatches != 0 {
				t.Logf("B's recvmmsg returned datagrams %d times", sb.RxBatches)
			}
			if sa.SiblingFrames != n || sb.SiblingRx != n || sb.RxFrames != n || sb.SiblingFrames != 1 {
				t.Errorf("A handed %d frames to siblings, B took %d (RxFrames %d), B handed %d: want %d, %d, %d, 1",
					sa.SiblingFrames, sb.SiblingRx, sb.RxFrames, sb.SiblingFrames, n, n, n)
			}
		})
	}
}

// TestSiblingsOutside: a link with Siblings set still reaches the peers
// outside its siblings through its socket (here a plain UDP socket, and
// a link that did not set Siblings, as another process's would be).
func TestSiblingsOutside(t *testing.T) {
	rb := &recorder{}
	a, b := pair(t, false, udp.Options{Siblings: true}, udp.Options{}, nil, rb)
	a.Send([]*link.Buf{frame(a, b, 1, 100), frame(a, b, 2, 100)})
	waitFor(t, "the frames through the kernel", func() bool { return rb.count() == 2 })
	if s := a.Stats(); s.SentFrames != 2 || s.SiblingFrames != 0 || s.TxBatches == 0 {
		t.Errorf("A: %d sent by the kernel, %d to siblings, %d sendmmsg: want 2, 0, some", s.SentFrames, s.SiblingFrames, s.TxBatches)
	}

	// A frame to an address no link of this process has.
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.3"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := wire.Route{Src: wire.GIDFromAddr(a.Addr()), Dst: wire.GIDFromAddr(netip.MustParseAddr("127.0.0.3")), SrcPort: a.SourcePort()}
	f := link.Get(wire.FrameLen(&r, wire.OpRCWriteMiddle, 64))
	fillFrame(f.Bytes(), &r, uint16(c.LocalAddr().(*net.UDPAddr).Port), 9)
	a.Send([]*link.Buf{f})
	buf := make([]byte, 2048)
	if k, err := c.Read(buf); err != nil || k != f.Len()-28 {
		t.Fatalf("the UDP socket read %d bytes (%v), want the frame's payload", k, err)
	}
}

// bounded is a dispatcher with a queue of room frames (link.Receiver):
// it takes what fits and keeps indices; take empties it.
type bounded struct {
	mu   sync.Mutex
	room int
	q    []uint32
	all  []uint32
}

func (d *bounded) TryDeliver(bufs []*link.Buf) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := min(len(bufs), d.room-len(d.q))
	for _, b := range bufs[:k] {
		d.q = append(d.q, frameIndex(b.Bytes()))
		b.Release()
	}
	return k
}

func (d *bounded) Deliver(bufs []*link.Buf) {
	if k := d.TryDeliver(bufs); k < len(bufs) {
		for _, b := range bufs[k:] {
			b.Release()
		}
	}
}

func (d *bounded) take() {
	d.mu.Lock()
	d.all = append(d.all, d.q...)
	d.q = d.q[:0]
	d.mu.Unlock()
}

// TestSiblingInbox: a sibling whose receiver is full keeps the frames in
// its inbox, in order, and hands them over as the receiver drains; what
// does not fit the inbox is dropped and counted, as a full socket buffer
// drops.
func TestSiblingInbox(t *testing.T) {
	d := &bounded{room: 100}
	a, b := pair(t, false, udp.Options{Siblings: true}, udp.Options{Siblings: true}, nil, d)
	const sent, over = 2200, 2200 - 100 - 2048 // beyond the receiver's room and the inbox
	for i := 0; i < sent; i += 50 {
		bufs := make([]*link.Buf, 50)
		for j := range bufs {
			bufs[j] = frame(a, b, uint32(i+j), 64)
		}
		a.Send(bufs)
	}
	if s := b.Stats(); s.SiblingDrops != over || s.SiblingRx != 100 {
		t.Fatalf("B took %d from siblings and dropped %d, want 100 and %d", s.SiblingRx, s.SiblingDrops, over)
	}
	for range 30 {
		d.take()
		b.Drained()
	}
	d.take()
	if len(d.all) != sent-over {
		t.Fatalf("the receiver got %d frames, want %d", len(d.all), sent-over)
	}
	for i, idx := range d.all {
		if idx != uint32(i) {
			t.Fatalf("frame %d arrived as %d: out of order", i, idx)
		}
	}
}

// TestSiblingsICRCOffload: a link with Siblings is Intact (link.Intact):
// a frame the NIC built without its ICRC (link.FlagNoICRC) reaches a
// sibling as built, flag and all, for the sibling's NIC to take
// unchecked, and reaches a peer outside the process through the socket
// with its ICRC computed. A link without Siblings is not Intact.
func TestSiblingsICRCOffload(t *testing.T) {
	noICRC := func(from, to *udp.Link, idx uint32) *link.Buf {
		b := frame(from, to, idx, 200)
		f := b.Bytes()
		clear(f[len(f)-wire.ICRCSize:])
		b.Flags |= link.FlagNoICRC
		return b
	}
	rb, rc := &recorder{keep: true}, &recorder{keep: true}
	oa := udp.Options{Siblings: true, Addr: netip.MustParseAddr("127.0.0.37")}
	ob := udp.Options{Siblings: true, Addr: netip.MustParseAddr("127.0.0.38")}
	a, b := pair(t, false, oa, ob, nil, rb)
	if !a.Intact() || !b.Intact() {
		t.Fatal("links with Siblings are not Intact")
	}
	a.Send([]*link.Buf{noICRC(a, b, 1)})
	waitFor(t, "the sibling's frame", func() bool { return rb.count() == 1 })
	rb.mu.Lock()
	if rb.flags[0]&link.FlagNoICRC == 0 {
		t.Error("the frame reached the sibling without FlagNoICRC: its NIC would check an ICRC that is not there")
	}
	rb.mu.Unlock()

	// A peer outside: a link of this process without Siblings, as
	// another process's would be.
	_, c := pair(t, false, udp.Options{Addr: netip.MustParseAddr("127.0.0.40")}, udp.Options{Addr: netip.MustParseAddr("127.0.0.39")}, nil, rc)
	if c.Intact() {
		t.Error("a link without Siblings is Intact")
	}
	a.Send([]*link.Buf{noICRC(a, c, 2)})
	waitFor(t, "the frame through the socket", func() bool { return rc.count() == 1 })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := wire.CheckICRC(rc.frames[0]); err != nil || rc.flags[0]&link.FlagNoICRC != 0 {
		t.Errorf("the frame through the socket: ICRC %v, flags %v: want its ICRC computed", err, rc.flags[0])
	}
}

// quiet is a dispatcher that may be handed frames without a wake-up
// (link.QuietReceiver), with a queue of room frames: it counts the
// hand-overs of each kind and the bytes it is told of. Delivered runs
// hook, as a NIC runs its engine's turn there.
type quiet struct {
	mu                 sync.Mutex
	room, held         int
	loud, quietCalls   int
	quietBytes, kicked int
	told               []int
	hook               func()
}

func (d *quiet) take(bufs []*link.Buf) int {
	k := min(len(bufs), d.room-d.held)
	for _, b := range bufs[:k] {
		d.quietBytes += b.Len()
		b.Release()
	}
	d.held += k
	return k
}

func (d *quiet) TryDeliver(bufs []*link.Buf) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loud++
	return d.take(bufs)
}

func (d *quiet) TryDeliverQuiet(bufs []*link.Buf) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.quietCalls++
	return d.take(bufs)
}

func (d *quiet) Delivered(bytes int) {
	d.mu.Lock()
	d.told = append(d.told, bytes)
	d.kicked += bytes
	hook := d.hook
	d.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func (d *quiet) Deliver(bufs []*link.Buf) {
	for _, b := range bufs[d.TryDeliver(bufs):] {
		b.Release()
	}
}

// TestSiblingQuietDelivery: a sibling whose dispatcher is a
// link.QuietReceiver is handed the frames of a Send without a wake-up
// and told once per Send, with their bytes, after the sending link let
// go of its locks: the telling goroutine can run the receiving NIC, which
// sends in turn (here the hook sends back, and drains the receiving link,
// which takes the locks a Send into it holds). Frames a full receiver
// left in the inbox are handed over with a wake-up when it drains: no
// Send is there to tell it.
func TestSiblingQuietDelivery(t *testing.T) {
	ra := &recorder{}
	d := &quiet{room: 1 << 30}
	a, b := pair(t, false, udp.Options{Siblings: true}, udp.Options{Siblings: true}, ra, d)
	var back uint32
	d.hook = func() {
		back++
		b.Send([]*link.Buf{frame(b, a, back, 64)})
		b.Drained()
	}
	done := make(chan struct{})
	want := 0
	go func() {
		defer close(done)
		for i := range 10 {
			bufs := make([]*link.Buf, 5)
			for j := range bufs {
				bufs[j] = frame(a, b, uint32(i*5+j), 100+j*100)
				want += bufs[j].Len()
			}
			a.Send(bufs)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Send did not return: Delivered was called with a lock of the link held")
	}
	waitFor(t, "the answers", func() bool { return ra.count() == 10 })
	d.mu.Lock()
	if d.loud != 0 || d.quietCalls != 10 || len(d.told) != 10 || d.kicked != want || d.quietBytes != want {
		t.Errorf("%d hand-overs with a wake-up, %d quiet, %d Delivered calls of %d bytes in all (%d handed over): want 0, 10, 10, %d",
			d.loud, d.quietCalls, len(d.told), d.kicked, d.quietBytes, want)
	}
	d.mu.Unlock()

	// A full receiver: what waits in the inbox is handed over by Drained,
	// with a wake-up, and no Delivered follows.
	d.mu.Lock()
	d.room, d.held, d.loud, d.quietCalls, d.told, d.kicked, d.hook = 3, 0, 0, 0, nil, 0, nil
	d.mu.Unlock()
	bufs := make([]*link.Buf, 5)
	for j := range bufs {
		bufs[j] = frame(a, b, uint32(100+j), 64)
	}
	a.Send(bufs)
	d.mu.Lock()
	d.room = 5
	d.mu.Unlock()
	b.Drained()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quietCalls != 1 || d.loud != 1 || d.held != 5 || len(d.told) != 1 || d.kicked != 3*bufs[0].Len() {
		t.Errorf("full receiver: %d quiet hand-overs, %d with a wake-up, %d frames taken, Delivered %v: want 1, 1, 5, [%d]",
			d.quietCalls, d.loud, d.held, d.told, 3*bufs[0].Len())
	}
}
