package udp_test

import (
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/wire"
)

// TestSendDrops sends frames that the link must refuse, each between two
// good frames, and checks that each is counted in the right Stats field,
// released, and never sent, while the good frames arrive.
func TestSendDrops(t *testing.T) {
	type mutate func(f []byte, a, b *udp.Link) []byte
	refresh := func(f []byte) []byte { wire.SetICRC(f); return f }
	v4hdr := func(f []byte) []byte { ip := wire.IPv4(f); ip.SetChecksum(ip.ComputeChecksum()); return refresh(f) }
	tests := []struct {
		name   string
		v6     bool
		mtu    int
		mutate mutate
		field  func(udp.Stats) uint64
	}{
		{"oversize", false, 1000, func(f []byte, a, b *udp.Link) []byte { return f }, func(s udp.Stats) uint64 { return s.Oversize }},
		{"source address", false, 0, func(f []byte, a, b *udp.Link) []byte {
			wire.IPv4(f).SetSrc([4]byte{127, 0, 0, 3})
			return v4hdr(f)
		}, mismatch},
		{"source port", false, 0, func(f []byte, a, b *udp.Link) []byte {
			wire.UDP(f[20:]).SetSrcPort(a.SourcePort() + 1)
			return refresh(f)
		}, mismatch},
		{"IPv4 ID", false, 0, func(f []byte, a, b *udp.Link) []byte { wire.IPv4(f).SetID(7); return v4hdr(f) }, mismatch},
		{"no DF", false, 0, func(f []byte, a, b *udp.Link) []byte {
			wire.IPv4(f).SetFlagsFragmentOffset(0, 0)
			return v4hdr(f)
		}, mismatch},
		{"IPv4 options", false, 0, func(f []byte, a, b *udp.Link) []byte {
			g := append(append(append([]byte(nil), f[:20]...), 1, 1, 1, 0), f[20:]...) // 4 bytes of NOP/EOL options
			ip := wire.IPv4(g)
			ip.SetIHL(6)
			ip.SetTotalLength(uint16(len(g)))
			return v4hdr(g)
		}, mismatch},
		{"IPv6 on an IPv4 link", false, 0, func(f []byte, a, b *udp.Link) []byte {
			r := wire.Route{Src: wire.GIDFromAddr(v6), Dst: wire.GIDFromAddr(v6), SrcPort: a.SourcePort()}
			g := make([]byte, len(f)+20)
			fillFrame(g, &r, b.SourcePort(), 0)
			return g
		}, mismatch},
		{"UDP length", false, 0, func(f []byte, a, b *udp.Link) []byte { wire.UDP(f[20:]).SetLength(9); return refresh(f) }, malformed},
		{"total length", false, 0, func(f []byte, a, b *udp.Link) []byte { wire.IPv4(f).SetTotalLength(100); return v4hdr(f) }, malformed},
		{"TCP", false, 0, func(f []byte, a, b *udp.Link) []byte { wire.IPv4(f).SetProtocol(6); return v4hdr(f) }, malformed},
		{"version 5", false, 0, func(f []byte, a, b *udp.Link) []byte { f[0] = 0x55; return f }, malformed},
		{"short", false, 0, func(f []byte, a, b *udp.Link) []byte { return f[:40] }, malformed},
		{"port 0", false, 0, func(f []byte, a, b *udp.Link) []byte { wire.UDP(f[20:]).SetDstPort(0); return refresh(f) }, malformed},
		{"broadcast: the kernel refuses (EACCES)", false, 0, func(f []byte, a, b *udp.Link) []byte {
			wire.IPv4(f).SetDst([4]byte{127, 255, 255, 255}) // loopback's broadcast: no SO_BROADCAST, never sent
			return v4hdr(f)
		}, func(s udp.Stats) uint64 { return s.SendErrors }},
		{"IPv6 source address", true, 0, func(f []byte, a, b *udp.Link) []byte {
			wire.IPv6(f).SetSrc([16]byte{15: 2})
			return refresh(f)
		}, mismatch},
		{"IPv6 mapped destination", true, 0, func(f []byte, a, b *udp.Link) []byte {
			wire.IPv6(f).SetDst(wire.GIDFromAddr(v4b))
			return refresh(f)
		}, mismatch},
		{"IPv6 next header", true, 0, func(f []byte, a, b *udp.Link) []byte { wire.IPv6(f).SetNextHeader(6); return f }, malformed},
		{"IPv6 payload length", true, 0, func(f []byte, a, b *udp.Link) []byte { wire.IPv6(f).SetPayloadLength(8); return f }, malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := &recorder{}
			o := udp.Options{MTU: tt.mtu}
			a, b := pair(t, tt.v6, o, udp.Options{}, nil, rb)
			bad := frame(a, b, 1, 2000)
			f := tt.mutate(bad.Bytes(), a, b)
			if len(f) != bad.Len() || &f[0] != &bad.Bytes()[0] {
				nb := link.Get(len(f))
				copy(nb.Bytes(), f)
				bad.Release()
				bad = nb
			}
			tr := &tracker{}
			a.Send([]*link.Buf{tr.add(frame(a, b, 0, 64)), tr.add(bad), tr.add(frame(a, b, 2, 64))})
			waitFor(t, "good frames", func() bool { return rb.count() == 2 })
			time.Sleep(20 * time.Millisecond) // room for the bad frame to arrive, if it was sent
			if got := rb.indices(); len(got) != 2 || got[0]|got[1] != 2 {
				t.Errorf("received frames %v, want 0 and 2", got)
			}
			s := a.Stats()
			if n := tt.field(s); n != 1 {
				t.Errorf("counter = %d, want 1: %+v", n, s)
			}
			if s.SentFrames != 2 {
				t.Errorf("SentFrames = %d, want 2", s.SentFrames)
			}
			txBalance(t, a)
			a.Close()
			b.Close()
			tr.checkReleased(t)
		})
	}
}

func mismatch(s udp.Stats) uint64  { return s.Mismatch }
func malformed(s udp.Stats) uint64 { return s.Malformed }
