package wire_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rnic/rnic/wire"
)

func TestPadLen(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 3, 2: 2, 3: 1, 4: 0, 5: 3, 4095: 1, 4096: 0} {
		if got := wire.PadLen(n); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestFrameLen(t *testing.T) {
	v4, v6 := testRoute(false), testRoute(true)
	tests := []struct {
		r    *wire.Route
		op   wire.Opcode
		n    int
		want int
	}{
		{&v4, wire.OpRCAck, 0, 20 + 8 + 12 + 4 + 4},
		{&v4, wire.OpRCReadRequest, 0, 20 + 8 + 12 + 16 + 4},
		{&v4, wire.OpRCWriteOnly, 64, 20 + 8 + 12 + 16 + 64 + 4}, // host_write.pcap: 124
		{&v4, wire.OpRCSendOnly, 1, 20 + 8 + 12 + 1 + 3 + 4},     // padded
		{&v6, wire.OpRCWriteOnlyImm, 4096, 40 + 8 + 12 + 16 + 4 + 4096 + 4},
		{&v6, wire.OpUDSendOnlyImm, 2, 40 + 8 + 12 + 8 + 4 + 2 + 2 + 4},
		{&v6, wire.OpCNP, 0, 40 + 8 + 12 + 16 + 4},
		{&v4, wire.OpRCAtomicAck, 0, 20 + 8 + 12 + 4 + 8 + 4},
	}
	for _, tt := range tests {
		if got := wire.FrameLen(tt.r, tt.op, tt.n); got != tt.want {
			t.Errorf("FrameLen(v6=%v, %v, %d) = %d, want %d", tt.r.IPv6(), tt.op, tt.n, got, tt.want)
		}
	}
}

// TestWriteHeaders checks the outer headers a Route writes, defaults
// included, through the header views.
func TestWriteHeaders(t *testing.T) {
	frame := make([]byte, 100)
	r := wire.Route{Src: gidV4a, Dst: gidV4b}
	if r.IPv6() || r.HeaderLen() != 28 {
		t.Fatalf("IPv4 route: IPv6()=%v HeaderLen()=%d", r.IPv6(), r.HeaderLen())
	}
	r.WriteHeaders(frame)
	ip, udp := wire.IPv4(frame), wire.UDP(frame[20:])
	if ip.Version() != 4 || ip.IHL() != 5 || ip.TOS() != 0 || ip.TotalLength() != 100 || ip.ID() != 0 || !ip.DF() ||
		ip.MF() || ip.FragmentOffset() != 0 || ip.TTL() != 64 || ip.Protocol() != 17 || !ip.IsChecksumValid() ||
		ip.Src() != [4]byte{198, 18, 0, 12} || ip.Dst() != [4]byte{198, 18, 0, 11} {
		t.Errorf("IPv4 header %x", frame[:20])
	}
	if udp.SrcPort() != wire.UDPPort || udp.DstPort() != wire.UDPPort || udp.Length() != 80 || udp.Checksum() != 0 {
		t.Errorf("UDP header %x", frame[20:28])
	}

	r = wire.Route{Src: gidV4a, Dst: gidV4b, SrcPort: 49152, TrafficClass: 0x8A, HopLimit: 9, IPID: 7, NoDF: true}
	r.WriteHeaders(frame)
	if ip.DF() || ip.TTL() != 9 || ip.TOS() != 0x8A || ip.ID() != 7 || !ip.IsChecksumValid() || udp.SrcPort() != 49152 {
		t.Errorf("IPv4 header with options set %x", frame[:28])
	}

	r = wire.Route{Src: gidV6a, Dst: gidV6b, TrafficClass: 0x8B, FlowLabel: 0x12345}
	if !r.IPv6() || r.HeaderLen() != 48 {
		t.Fatalf("IPv6 route: IPv6()=%v HeaderLen()=%d", r.IPv6(), r.HeaderLen())
	}
	r.WriteHeaders(frame)
	ip6, udp6 := wire.IPv6(frame), wire.UDP(frame[40:])
	if ip6.Version() != 6 || ip6.TrafficClass() != 0x8B || ip6.FlowLabel() != 0x12345 || ip6.PayloadLength() != 60 ||
		ip6.NextHeader() != 17 || ip6.HopLimit() != 64 || ip6.Src() != gidV6a || ip6.Dst() != gidV6b {
		t.Errorf("IPv6 header %x", frame[:40])
	}
	if udp6.SrcPort() != wire.UDPPort || udp6.DstPort() != wire.UDPPort || udp6.Length() != 60 || udp6.Checksum() != 0 {
		t.Errorf("UDP header %x", frame[40:48])
	}
}

// TestFinishOrder checks that Finish leaves both the ICRC and the UDP
// checksum valid: the checksum covers the ICRC, and the ICRC masks the
// checksum, so only one order works.
func TestFinishOrder(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := opSpec(v6, wire.OpRCWriteOnlyImm, 333)
		s.route.UDPChecksum = true
		frame := build(s)
		if err := wire.CheckICRC(frame); err != nil {
			t.Errorf("v6=%v: CheckICRC: %v", v6, err)
		}
		if err := wire.CheckUDPChecksum(frame); err != nil {
			t.Errorf("v6=%v: CheckUDPChecksum: %v", v6, err)
		}
		hl := s.route.HeaderLen() - wire.UDPHeaderSize
		if wire.UDP(frame[hl:]).Checksum() == 0 {
			t.Errorf("v6=%v: UDP checksum not written", v6)
		}
	}
}

// TestWriteIPv4UDP: the IPv4 headers WriteHeaders writes word by word are
// byte for byte those IPv4.Encode, ComputeChecksum and UDP.Encode write
// field by field, for seeded random routes and lengths; and
// IsChecksumValid's five-word sum agrees with the checksum over the
// header, for the header as written and with any one bit flipped.
func TestWriteIPv4UDP(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 1))
	for range 2000 {
		var r wire.Route
		var src, dst [4]byte
		binary.BigEndian.PutUint32(src[:], rng.Uint32())
		binary.BigEndian.PutUint32(dst[:], rng.Uint32())
		r.Src = wire.GIDFromAddr(netip.AddrFrom4(src))
		r.Dst = wire.GIDFromAddr(netip.AddrFrom4(dst))
		r.TrafficClass = uint8(rng.Uint32())
		r.IPID = uint16(rng.Uint32())
		r.NoDF = rng.IntN(2) == 0
		if rng.IntN(4) > 0 {
			r.HopLimit = uint8(rng.Uint32())
		}
		if rng.IntN(4) > 0 {
			r.SrcPort = uint16(rng.Uint32())
		}
		n := wire.IPv4HeaderSize + wire.UDPHeaderSize + rng.IntN(9000)
		got := make([]byte, n)
		for i := range got {
			got[i] = 0xA5 // what was there before: overwritten
		}
		r.WriteHeaders(got)

		want := make([]byte, wire.IPv4HeaderSize+wire.UDPHeaderSize)
		var flags uint8 = wire.IPv4FlagDF
		if r.NoDF {
			flags = 0
		}
		ttl, sport := r.HopLimit, r.SrcPort
		if ttl == 0 {
			ttl = wire.DefaultHopLimit
		}
		if sport == 0 {
			sport = wire.UDPPort
		}
		ip := wire.IPv4(want)
		ip.Encode(&wire.IPv4Fields{TOS: r.TrafficClass, TotalLength: uint16(n), ID: r.IPID, Flags: flags,
			TTL: ttl, Protocol: wire.IPProtocolUDP, Src: src, Dst: dst})
		ip.SetChecksum(ip.ComputeChecksum())
		wire.UDP(want[wire.IPv4HeaderSize:]).Encode(&wire.UDPFields{SrcPort: sport, DstPort: wire.UDPPort,
			Length: uint16(n - wire.IPv4HeaderSize)})
		if !bytes.Equal(got[:len(want)], want) {
			t.Fatalf("route %+v, %d bytes:\n got % x\nwant % x", r, n, got[:len(want)], want)
		}
		if !wire.IPv4(got).IsChecksumValid() {
			t.Fatalf("the header written fails its checksum: % x", got[:20])
		}
		bit := rng.IntN(20 * 8)
		got[bit/8] ^= 1 << (bit % 8)
		if wire.IPv4(got).IsChecksumValid() && wire.IPv4(got).IHL() == 5 {
			t.Fatalf("bit %d flipped, the checksum still holds: % x", bit, got[:20])
		}
	}
}
