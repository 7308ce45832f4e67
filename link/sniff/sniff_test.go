package sniff_test

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
)

type seen struct {
	dir   sniff.Direction
	ts    time.Time
	frame []byte
}

// TestBothDirections wraps one end of a mem.Pipe and checks that a frame
// sent through the wrapper and a frame received through it are each
// recorded once, with the right direction and bytes, in the callback and
// in a pcap file of either link type, and still arrive intact.
func TestBothDirections(t *testing.T) {
	for _, lt := range []pcap.LinkType{pcap.LinkTypeRaw, pcap.LinkTypeEthernet} {
		t.Run(lt.String(), func(t *testing.T) {
			pa, pb := pipe(t)
			var file bytes.Buffer
			w, err := pcap.NewWriter(&file, lt)
			if err != nil {
				t.Fatal(err)
			}
			var got []seen
			clock := time.Unix(1700000000, 0)
			s := sniff.New(pa, sniff.Options{
				Pcap:  w,
				Func:  func(d sniff.Direction, ts time.Time, f []byte) { got = append(got, seen{d, ts, bytes.Clone(f)}) },
				Clock: func() time.Time { clock = clock.Add(time.Second); return clock },
			})
			atA, atB := newCollector(4), newCollector(4)
			s.Attach(atA)
			pb.Attach(atB)

			out := sendFrame(addrA, addrB, 1)
			in := sendFrame(addrB, addrA, 2)
			s.Send([]*link.Buf{bufOf(out)})
			pb.Send([]*link.Buf{bufOf(in)})

			if f := <-atB.ch; !bytes.Equal(f, out) {
				t.Errorf("B received %x, want %x", f, out)
			}
			if f := <-atA.ch; !bytes.Equal(f, in) {
				t.Errorf("A received %x, want %x", f, in)
			}
			want := []seen{{sniff.TX, time.Unix(1700000001, 0), out}, {sniff.RX, time.Unix(1700000002, 0), in}}
			if len(got) != len(want) {
				t.Fatalf("callback saw %d frames, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].dir != want[i].dir || !got[i].ts.Equal(want[i].ts) || !bytes.Equal(got[i].frame, want[i].frame) {
					t.Errorf("frame %d: %v %v %x, want %v %v %x", i, got[i].dir, got[i].ts, got[i].frame, want[i].dir, want[i].ts, want[i].frame)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			recs := readPcap(t, file.Bytes(), lt)
			if len(recs) != 2 || !bytes.Equal(recs[0].ip, out) || !bytes.Equal(recs[1].ip, in) {
				t.Fatalf("pcap holds %d records: %+v", len(recs), recs)
			}
			for i, r := range recs {
				if !r.ts.Equal(want[i].ts) {
					t.Errorf("pcap record %d at %v, want %v", i, r.ts, want[i].ts)
				}
			}
		})
	}
}

type record struct {
	ts time.Time
	ip []byte
}

// readPcap reads a capture with wire/pcap's reader and returns its IP
// packets.
func readPcap(t *testing.T, file []byte, lt pcap.LinkType) []record {
	t.Helper()
	r, err := pcap.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != lt {
		t.Fatalf("link type %v, want %v", r.LinkType(), lt)
	}
	var recs []record
	for {
		data, ts, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		ip, ok := pcap.IPPacket(r.LinkType(), data)
		if !ok {
			t.Fatalf("record %d is not an IP packet: %x", len(recs), data)
		}
		recs = append(recs, record{ts, bytes.Clone(ip)})
	}
}

// scribbler is a link (and a dispatcher) that takes ownership of frames
// the way a real one may: it overwrites them at once and releases them,
// so that a wrapper that looked at a buffer after handing it on would
// record garbage, and one that released it again would panic.
type scribbler struct {
	d    link.Dispatcher
	sent int
}

func (s *scribbler) Send(bufs []*link.Buf) {
	for _, b := range bufs {
		clear(b.Bytes())
		b.Release()
		s.sent++
	}
}
func (s *scribbler) Attach(d link.Dispatcher) { s.d = d }
func (s *scribbler) MTU() int                 { return link.MaxFrame }
func (s *scribbler) Close() error             { return nil }
func (s *scribbler) Deliver(bufs []*link.Buf) { s.Send(bufs) }

// TestOwnership checks that frames are recorded before they are handed
// on in both directions, and that the wrapper never releases a buffer it
// passed on (a second Release would panic).
func TestOwnership(t *testing.T) {
	inner := &scribbler{}
	var got [][]byte
	s := sniff.New(inner, sniff.Options{Func: func(_ sniff.Direction, _ time.Time, f []byte) { got = append(got, bytes.Clone(f)) }})
	nic := &scribbler{}
	s.Attach(nic)

	frames := [][]byte{sendFrame(addrA, addrB, 1), sendFrame(addrA, addrB, 2), sendFrame(addrB, addrA, 3)}
	s.Send([]*link.Buf{bufOf(frames[0]), bufOf(frames[1])})
	inner.d.Deliver([]*link.Buf{bufOf(frames[2])})

	if inner.sent != 2 || nic.sent != 1 {
		t.Fatalf("inner link got %d frames, NIC %d; want 2 and 1", inner.sent, nic.sent)
	}
	if len(got) != len(frames) {
		t.Fatalf("recorded %d frames, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d recorded as %x, want %x", i, got[i], frames[i])
		}
	}
}

// TestPassThrough checks that a Link with nothing to record forwards
// everything, including Attach(nil), and exposes the inner link.
func TestPassThrough(t *testing.T) {
	pa, pb := pipe(t)
	s := sniff.New(pa, sniff.Options{})
	if s.Unwrap() != pa || s.MTU() != pa.MTU() || s.Addr() != addrA {
		t.Fatalf("Unwrap %v MTU %d Addr %v", s.Unwrap(), s.MTU(), s.Addr())
	}
	atA, atB := newCollector(1), newCollector(1)
	s.Attach(atA)
	pb.Attach(atB)
	out, in := sendFrame(addrA, addrB, 1), sendFrame(addrB, addrA, 2)
	s.Send([]*link.Buf{bufOf(out)})
	pb.Send([]*link.Buf{bufOf(in)})
	if f := <-atB.ch; !bytes.Equal(f, out) {
		t.Errorf("B received %x", f)
	}
	if f := <-atA.ch; !bytes.Equal(f, in) {
		t.Errorf("A received %x", f)
	}
	s.Attach(nil) // detached: A's frames are dropped as Unattached
	pb.Send([]*link.Buf{bufOf(in)})
	if st := pb.Stats(); st.Unattached != 1 {
		t.Errorf("after Attach(nil): %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pa.Close(); err == nil {
		t.Error("Close did not close the inner link")
	}
	if a := sniff.New(&scribbler{}, sniff.Options{}).Addr(); a.IsValid() {
		t.Errorf("Addr of a link without one: %v", a)
	}
}

// TestNoAllocs checks that the wrapper adds no allocation per frame, with
// nothing configured and with a callback.
func TestNoAllocs(t *testing.T) {
	frame := sendFrame(addrA, addrB, 1)
	b := bufOf(frame)
	bufs := []*link.Buf{b}
	n := 0
	for _, opts := range []sniff.Options{{}, {Func: func(sniff.Direction, time.Time, []byte) { n++ }}} {
		inner := &holder{}
		s := sniff.New(inner, opts)
		s.Attach(&holder{})
		if a := testing.AllocsPerRun(100, func() { s.Send(bufs); inner.d.Deliver(bufs) }); a != 0 {
			t.Errorf("options %+v: %v allocations per Send and Deliver", opts, a)
		}
	}
	if n != 2*101 {
		t.Errorf("callback ran %d times, want %d", n, 2*101)
	}
}

// holder is a link and dispatcher that keeps nothing and releases
// nothing, so that the same buffer can be sent again (a test of
// allocations only).
type holder struct{ d link.Dispatcher }

func (h *holder) Send([]*link.Buf)         {}
func (h *holder) Attach(d link.Dispatcher) { h.d = d }
func (h *holder) MTU() int                 { return link.MaxFrame }
func (h *holder) Close() error             { return nil }
func (h *holder) Deliver(bufs []*link.Buf) {}

// TestConcurrent sends from several goroutines in both directions at once
// through a wrapper with a pcap and a callback (run with -race), and
// checks that every frame is recorded exactly once and the pcap is
// well-formed.
func TestConcurrent(t *testing.T) {
	const senders, perSender = 4, 200
	pa, pb := pipe(t)
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file, pcap.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	count := map[sniff.Direction]int{}
	s := sniff.New(pa, sniff.Options{Pcap: w, Func: func(d sniff.Direction, _ time.Time, f []byte) {
		count[d]++ // serialized by the Link
	}})
	atA, atB := newCollector(senders*perSender), newCollector(senders*perSender)
	s.Attach(atA)
	pb.Attach(atB)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range perSender {
				s.Send([]*link.Buf{bufOf(sendFrame(addrA, addrB, g*perSender+i))})
			}
		})
		wg.Go(func() {
			for i := range perSender {
				pb.Send([]*link.Buf{bufOf(sendFrame(addrB, addrA, g*perSender+i))})
			}
		})
	}
	wg.Wait()
	if count[sniff.TX] != senders*perSender || count[sniff.RX] != senders*perSender {
		t.Fatalf("recorded %v", count)
	}
	if len(atA.ch) != senders*perSender || len(atB.ch) != senders*perSender {
		t.Fatalf("delivered %d to A and %d to B", len(atA.ch), len(atB.ch))
	}
	tags := map[netip.Addr]map[wire.PSN]bool{addrA: {}, addrB: {}}
	for _, r := range readPcap(t, file.Bytes(), pcap.LinkTypeRaw) {
		var p wire.Packet
		if err := p.Parse(r.ip); err != nil {
			t.Fatal(err)
		}
		if err := wire.CheckICRC(r.ip); err != nil {
			t.Fatal(err)
		}
		src := p.Src.Addr()
		if tags[src][p.BTH.PSN()] {
			t.Fatalf("frame %v/%v recorded twice", src, p.BTH.PSN())
		}
		tags[src][p.BTH.PSN()] = true
	}
	if len(tags[addrA]) != senders*perSender || len(tags[addrB]) != senders*perSender {
		t.Fatalf("pcap holds %d frames from A and %d from B", len(tags[addrA]), len(tags[addrB]))
	}
}

// failWriter fails once more than n bytes are written, and counts the
// writes.
type failWriter struct{ n, writes int }

var errDisk = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	w.writes++
	if len(p) > w.n {
		return 0, errDisk
	}
	w.n -= len(p)
	return len(p), nil
}

// TestPcapError checks that a failing pcap writer is reported by Err,
// is not written again, and does not stop frames or the callback.
func TestPcapError(t *testing.T) {
	fw := &failWriter{n: 24 + 16 + 100}
	w, err := pcap.NewWriter(fw, pcap.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	headerWrites := fw.writes
	calls := 0
	inner := &scribbler{}
	s := sniff.New(inner, sniff.Options{Pcap: w, Func: func(sniff.Direction, time.Time, []byte) { calls++ }})
	for i := range 3 {
		s.Send([]*link.Buf{bufOf(sendFrame(addrA, addrB, i))})
	}
	if !errors.Is(s.Err(), errDisk) || calls != 3 || inner.sent != 3 {
		t.Fatalf("Err %v, %d callbacks, %d frames sent", s.Err(), calls, inner.sent)
	}
	// The first frame's record header fits, its data does not; nothing
	// is written after that.
	if n := fw.writes - headerWrites; n != 2 {
		t.Errorf("%d writes after the global header, want 2", n)
	}
}

func TestDirectionString(t *testing.T) {
	if sniff.TX.String() != "TX" || sniff.RX.String() != "RX" || sniff.Direction(7).String() != "Direction(?)" {
		t.Error(sniff.TX, sniff.RX, sniff.Direction(7))
	}
}

// wireLink is a link whose transport writes header fields itself
// (link.WireWriter): it keeps what it is sent, and says the wire carries
// TTL 9 on what it sends and a UDP checksum of 0xbeef on what it
// delivers.
type wireLink struct {
	d    link.Dispatcher
	sent [][]byte
}

func (w *wireLink) Send(bufs []*link.Buf) {
	for _, b := range bufs {
		w.sent = append(w.sent, bytes.Clone(b.Bytes()))
		b.Release()
	}
}
func (w *wireLink) Attach(d link.Dispatcher) { w.d = d }
func (w *wireLink) MTU() int                 { return link.MaxFrame }
func (w *wireLink) Close() error             { return nil }
func (w *wireLink) WireHeaders(f []byte, sent bool) {
	if sent {
		wire.IPv4(f).SetTTL(9)
	} else {
		wire.UDP(f[wire.IPv4HeaderSize:]).SetChecksum(0xbeef)
	}
}

// TestWireHeaders checks that over a link.WireWriter the capture and the
// callback get the frames as the wire carries them, while the inner link
// and the NIC get the NIC's frames untouched.
func TestWireHeaders(t *testing.T) {
	inner := &wireLink{}
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file, pcap.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	s := sniff.New(inner, sniff.Options{Pcap: w, Func: func(_ sniff.Direction, _ time.Time, f []byte) { got = append(got, bytes.Clone(f)) }})
	nic := newCollector(1)
	s.Attach(nic)

	out, in := sendFrame(addrA, addrB, 1), sendFrame(addrB, addrA, 2)
	s.Send([]*link.Buf{bufOf(out)})
	inner.d.Deliver([]*link.Buf{bufOf(in)})

	if len(inner.sent) != 1 || !bytes.Equal(inner.sent[0], out) {
		t.Errorf("the inner link got %x, want the NIC's frame %x", inner.sent, out)
	}
	if f := <-nic.ch; !bytes.Equal(f, in) {
		t.Errorf("the NIC got %x, want the link's frame %x", f, in)
	}
	wantOut, wantIn := bytes.Clone(out), bytes.Clone(in)
	wire.IPv4(wantOut).SetTTL(9)
	wire.UDP(wantIn[wire.IPv4HeaderSize:]).SetChecksum(0xbeef)
	recs := readPcap(t, file.Bytes(), pcap.LinkTypeRaw)
	if len(recs) != 2 || len(got) != 2 {
		t.Fatalf("recorded %d records and %d callbacks, want 2 each", len(recs), len(got))
	}
	for i, want := range [][]byte{wantOut, wantIn} {
		if !bytes.Equal(recs[i].ip, want) || !bytes.Equal(got[i], want) {
			t.Errorf("frame %d recorded as %x (pcap) and %x (callback), want the wire's %x", i, recs[i].ip, got[i], want)
		}
	}
}
