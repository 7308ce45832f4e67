package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

// ceFrame returns a whole RoCEv2 RC WRITE MIDDLE frame from src to dst
// with traffic class tc, a 64-byte payload made from idx (in the PSN)
// and a valid ICRC.
func ceFrame(src, dst netip.Addr, port uint16, tc uint8, idx uint32) *link.Buf {
	r := wire.Route{Src: wire.GIDFromAddr(src), Dst: wire.GIDFromAddr(dst), SrcPort: port, TrafficClass: tc}
	b := link.Get(wire.FrameLen(&r, wire.OpRCWriteMiddle, 64))
	f := b.Bytes()
	hl := r.HeaderLen()
	t := f[hl:]
	wire.BTH(t).Encode(&wire.BTHFields{Opcode: wire.OpRCWriteMiddle, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: wire.PSN(idx & wire.PSNMask)})
	p := t[wire.BTHSize : len(t)-wire.ICRCSize]
	for i := range p {
		p[i] = byte(i*7 + int(idx))
	}
	r.WriteHeaders(f)
	wire.UDP(f[hl-8:]).SetDstPort(port)
	wire.SetICRC(f)
	return b
}

// ecnOf returns a frame's ECN bits.
func ecnOf(f []byte) uint8 {
	if f[0]>>4 == 6 {
		return f[1] >> 4 & wire.ECNMask
	}
	return wire.IPv4(f).TOS() & wire.ECNMask
}

// keeper is a dispatcher that keeps a copy of every frame.
type keeper struct {
	mu     sync.Mutex
	frames [][]byte
	take   int // TryDeliver takes at most this many (0: all)
}

func (k *keeper) Deliver(bufs []*link.Buf) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range bufs {
		k.frames = append(k.frames, slices.Clone(b.Bytes()))
		b.Release()
	}
}

func (k *keeper) TryDeliver(bufs []*link.Buf) int {
	n := len(bufs)
	if k.take > 0 {
		n = min(n, k.take)
	}
	k.Deliver(bufs[:n])
	return n
}

func (k *keeper) got() [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.frames)
}

// stubLink is a link whose frames the test delivers by hand.
type stubLink struct{ d link.Dispatcher }

func (s *stubLink) Send(bufs []*link.Buf) {
	for _, b := range bufs {
		b.Release()
	}
}
func (s *stubLink) Attach(d link.Dispatcher) { s.d = d }
func (s *stubLink) MTU() int                 { return 1500 }
func (s *stubLink) Close() error             { return nil }
func (s *stubLink) SourcePort() uint16       { return 4791 }

// TestMarkCEDecisions checks --rx-mark-ce's link on frames delivered by
// hand: only ECN-capable frames are marked, at about the rate asked, the
// same seed marks the same frames, other frames draw nothing (they do not
// shift the decisions), and nothing but the ECN bits and the IPv4
// checksum changes.
func TestMarkCEDecisions(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	const n, p = 2000, 0.25
	run := func(seed int64, tcs func(i int) uint8) (sent, got [][]byte, marked uint64) {
		stub, k := &stubLink{}, &keeper{}
		var ctr atomic.Uint64
		l := newMarkCELink(stub, p, seed, dst, &ctr)
		l.Attach(k)
		for i := range n {
			b := ceFrame(src, dst, 4791, tcs(i), uint32(i))
			sent = append(sent, slices.Clone(b.Bytes()))
			if i%2 == 0 {
				stub.d.Deliver([]*link.Buf{b})
			} else {
				stub.d.(link.Receiver).TryDeliver([]*link.Buf{b})
			}
		}
		return sent, k.got(), ctr.Load()
	}
	// Alternate ECT(0), Not-ECT, ECT(1), CE (with DSCP bits set).
	mixed := func(i int) uint8 {
		return 0x68 | [...]uint8{wire.ECNECT0, wire.ECNNotECT, wire.ECNECT1, wire.ECNCE}[i%4]
	}
	sent, got, marked := run(7, mixed)
	var newCE []int
	for i := range sent {
		s, g := sent[i], got[i]
		if !bytes.Equal(s[2:10], g[2:10]) || !bytes.Equal(s[12:], g[12:]) || s[0] != g[0] {
			t.Fatalf("frame %d: more than the TOS and the checksum changed:\n% x\n% x", i, s, g)
		}
		if !wire.IPv4(g).IsChecksumValid() {
			t.Fatalf("frame %d: bad IPv4 checksum after marking", i)
		}
		if err := wire.CheckICRC(g); err != nil {
			t.Fatalf("frame %d: ICRC after marking: %v", i, err)
		}
		if g[1]&^wire.ECNMask != s[1]&^wire.ECNMask {
			t.Fatalf("frame %d: DSCP changed: %#x -> %#x", i, s[1], g[1])
		}
		switch se, ge := ecnOf(s), ecnOf(g); {
		case se == ge:
		case (se == wire.ECNECT0 || se == wire.ECNECT1) && ge == wire.ECNCE:
			newCE = append(newCE, i)
		default:
			t.Fatalf("frame %d: ECN %d became %d", i, se, ge)
		}
	}
	if uint64(len(newCE)) != marked {
		t.Errorf("%d frames marked, counter says %d", len(newCE), marked)
	}
	// Half the frames are ECN-capable: 1000 draws at p, sd 13.7.
	if ecn := float64(n / 2); math.Abs(float64(marked)-ecn*p) > 6*math.Sqrt(ecn*p*(1-p)) {
		t.Errorf("%d of %v ECN-capable frames marked at p=%v", marked, ecn, p)
	}
	// The same seed marks the same frames; frames that are not
	// ECN-capable draw nothing, so an all-ECT(0) run with the ECT frames
	// at the same ranks marks the same ranks.
	_, again, _ := run(7, mixed)
	if !slicesEqual(got, again) {
		t.Error("the same seed marked other frames")
	}
	_, allECT, _ := run(7, func(int) uint8 { return wire.ECNECT0 })
	var rank, ranks []int
	for i, g := range allECT {
		if ecnOf(g) == wire.ECNCE {
			ranks = append(ranks, i)
		}
	}
	for _, i := range newCE { // the i-th frame of mixed is ECN-capable rank i/4*2 + (i%4)/2
		rank = append(rank, i/4*2+i%4/2)
	}
	if n := len(rank); !slices.Equal(rank, ranks[:min(n, len(ranks))]) {
		t.Errorf("not-ECN-capable frames shifted the decisions:\n%v\n%v", rank, ranks)
	}
	if _, other, _ := run(8, mixed); slicesEqual(got, other) {
		t.Error("another seed marked the same frames")
	}
}

func slicesEqual(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y []byte) bool { return bytes.Equal(x, y) })
}

// TestMarkCEUDP sends frames over real link/udp sockets on loopback to a
// link wrapped for --rx-mark-ce with probability 1, raw receive and
// rebuilt headers: the kernel carries the ECN bits, only ECN-capable
// frames arrive marked, and every marked frame's ICRC still verifies (it
// masks the ECN bits), so nothing else needs fixing.
func TestMarkCEUDP(t *testing.T) {
	a4, b4 := netip.MustParseAddr("127.0.0.53"), netip.MustParseAddr("127.0.0.54")
	for _, raw := range []udp.RawMode{udp.RawAuto, udp.RawOff} {
		t.Run(map[udp.RawMode]string{udp.RawAuto: "raw-auto", udp.RawOff: "raw-off"}[raw], func(t *testing.T) {
			port := freeUDPPort(t, a4, b4)
			a, err := udp.Open(udp.Options{Addr: a4, Port: port, Raw: raw})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := udp.Open(udp.Options{Addr: b4, Port: port, Raw: raw})
			if err != nil {
				t.Fatal(err)
			}
			var ctr atomic.Uint64
			l := newMarkCELink(b, 1, 1, b4, &ctr)
			defer l.Close()
			if _, ok := link.Find[link.Poller](l); !ok {
				t.Error("the wrapper hides the link's Poller")
			}
			if got := l.SourcePort(); got != port {
				t.Errorf("SourcePort %d, want %d", got, port)
			}
			k := &keeper{}
			l.Attach(k)
			tcs := []uint8{wire.ECNECT0, wire.ECNNotECT, wire.ECNECT1, 0x68 | wire.ECNECT0, 0x68}
			var sent [][]byte
			for i, tc := range tcs {
				f := ceFrame(a4, b4, port, tc, uint32(i))
				sent = append(sent, slices.Clone(f.Bytes()))
				a.Send([]*link.Buf{f})
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(k.got()) < len(tcs) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			got := k.got()
			if len(got) != len(tcs) {
				t.Fatalf("%d of %d frames arrived", len(got), len(tcs))
			}
			verified := b.ICRCVerified()
			for _, g := range got {
				i := int(wire.BTH(g[28:]).PSN())
				s, tc := sent[i], tcs[i]
				want := tc
				if e := tc & wire.ECNMask; e == wire.ECNECT0 || e == wire.ECNECT1 {
					want = tc | wire.ECNCE
				}
				if g[1] != want {
					t.Errorf("frame %d sent with TOS %#x arrived with %#x, want %#x", i, tc, g[1], want)
				}
				if !bytes.Equal(s[28:], g[28:]) {
					t.Errorf("frame %d: BTH, payload or ICRC changed", i)
				}
				if !wire.IPv4(g).IsChecksumValid() {
					t.Errorf("frame %d: bad IPv4 checksum", i)
				}
				// With rebuilt headers the NIC counts frames as unverified;
				// the frames of one kernel to itself rebuild exactly, so
				// the ICRC verifies here too.
				if err := wire.CheckICRC(g); err != nil {
					t.Errorf("frame %d (raw receive %v): ICRC after marking: %v", i, verified, err)
				}
			}
			if ctr.Load() != 3 {
				t.Errorf("%d frames marked, want 3", ctr.Load())
			}
		})
	}
}

// freeUDPPort returns a UDP port free on both addresses.
func freeUDPPort(t *testing.T, a, b netip.Addr) uint16 {
	t.Helper()
	for range 100 {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
		if err != nil {
			t.Fatal(err)
		}
		p := uint16(c.LocalAddr().(*net.UDPAddr).Port)
		c.Close()
		if c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b, p))); err == nil {
			c.Close()
			return p
		}
	}
	t.Fatal("no UDP port free on both addresses")
	return 0
}

// dcqcnLine reads counter name of the "dcqcn:" line of out.
func dcqcnLine(t *testing.T, out, name string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^dcqcn:.* ` + name + ` (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in a dcqcn line:\n%s", name, out)
	}
	v, _ := strconv.ParseUint(m[1], 10, 64)
	return v
}

// checkDCQCNRun checks a write_bw pair whose server marked CE: the
// transfer completed on both sides, the server sent CNPs and the client
// handled them.
func checkDCQCNRun(t *testing.T, srv, cli string, iters string) {
	t.Helper()
	for _, out := range []string{srv, cli} {
		if !regexp.MustCompile(`(?m)^ 8192\s+` + iters + `\s`).MatchString(out) {
			t.Errorf("no result line of %s iterations:\n%s", iters, out)
		}
	}
	if v := dcqcnLine(t, srv, "np_ecn_marked_roce_packets"); v == 0 {
		t.Errorf("server: np_ecn_marked_roce_packets 0:\n%s", srv)
	}
	if v := dcqcnLine(t, srv, "rx_mark_ce_frames"); v == 0 {
		t.Errorf("server: rx_mark_ce_frames 0:\n%s", srv)
	}
	if v := dcqcnLine(t, srv, "np_cnp_sent"); v == 0 {
		t.Errorf("server: np_cnp_sent 0:\n%s", srv)
	}
	if v := dcqcnLine(t, cli, "rp_cnp_handled"); v == 0 {
		t.Errorf("client: rp_cnp_handled 0:\n%s", cli)
	}
	t.Logf("server %s", regexp.MustCompile(`(?m)^dcqcn:.*$`).FindString(srv))
	t.Logf("client %s", regexp.MustCompile(`(?m)^dcqcn:.*$`).FindString(cli))
}

// TestPerfDCQCN runs write_bw with --dcqcn on both sides and
// --rx-mark-ce on the server over link/mem.
func TestPerfDCQCN(t *testing.T) {
	useMemLinks(t)
	srv, cli := perfPair2(t, "10.0.0.1", "10.0.0.2",
		[]string{"write_bw", "-s", "8192", "-n", "300", "--dcqcn", "--rx-mark-ce", "0.2"},
		[]string{"write_bw", "-s", "8192", "-n", "300", "--dcqcn"})
	checkDCQCNRun(t, srv, cli, "300")
}

// TestPerfDCQCNUDP runs two "rnic perf write_bw" over link/udp on
// loopback (127.0.0.51 and .52, UDP port 4791), both with --dcqcn, the
// server with --rx-mark-ce standing in for a congested switch: the server
// sends CNPs, the client's rate control handles them, and the transfer
// completes.
func TestPerfDCQCNUDP(t *testing.T) {
	const srvAddr, cliAddr = "127.0.0.51", "127.0.0.52"
	for _, a := range []string{srvAddr, cliAddr} {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(a), Port: wire.UDPPort})
		if err != nil {
			t.Skipf("UDP port %d is taken on %s (%v)", wire.UDPPort, a, err)
		}
		c.Close()
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	s := startCmd(ctx, "perf", "write_bw", "-d", srvAddr, "-p", port, "-n", "500", "-s", "8192", "--dcqcn", "--rx-mark-ce", "0.1")
	s.waitFor(t, "Waiting for client")
	c := startCmd(ctx, "perf", "write_bw", "-d", cliAddr, "-p", port, "-n", "500", "-s", "8192", "--dcqcn", srvAddr)
	err := errors.Join(c.wait(t), s.wait(t))
	if errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("UDP port %d was taken meanwhile: %v", wire.UDPPort, err)
	}
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, c.out.String(), s.out.String())
	}
	checkDCQCNRun(t, s.out.String(), c.out.String(), "500")
}

// TestPerfDCQCNFlags checks --rx-mark-ce's range.
func TestPerfDCQCNFlags(t *testing.T) {
	for _, v := range []string{"-0.1", "1.5", "NaN"} {
		if _, _, err := parsePerf("write_bw", "--rx-mark-ce", v); err == nil {
			t.Errorf("--rx-mark-ce %s accepted", v)
		}
	}
	for _, v := range []string{"0", "0.05", "1"} {
		if _, _, err := parsePerf("write_bw", "--dcqcn", "--rx-mark-ce", v); err != nil {
			t.Errorf("--rx-mark-ce %s: %v", v, err)
		}
	}
}
