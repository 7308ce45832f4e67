package wire_test

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/rnic/rnic/wire"
)

// capturedIPv4 is the IPv4 header of host_read.pcap #20 (checksum 0xae80).
const capturedIPv4 = "4500003c000040004011ae80c6120001c612000b"

func TestIPv4Header(t *testing.T) {
	ip := wire.IPv4(unhex(t, capturedIPv4))
	if ip.Version() != 4 || ip.IHL() != 5 || ip.HeaderLen() != 20 || ip.TOS() != 0 || ip.TotalLength() != 60 ||
		ip.ID() != 0 || ip.Flags() != wire.IPv4FlagDF || !ip.DF() || ip.MF() || ip.FragmentOffset() != 0 ||
		ip.TTL() != 64 || ip.Protocol() != wire.IPProtocolUDP || ip.Checksum() != 0xAE80 ||
		ip.Src() != [4]byte{198, 18, 0, 1} || ip.Dst() != [4]byte{198, 18, 0, 11} {
		t.Errorf("getters disagree with %s", capturedIPv4)
	}
	if !ip.IsChecksumValid() || ip.ComputeChecksum() != 0xAE80 {
		t.Errorf("checksum: valid=%v computed=%#x, want valid 0xae80", ip.IsChecksumValid(), ip.ComputeChecksum())
	}

	b := wire.IPv4(make([]byte, wire.IPv4HeaderSize))
	b.Encode(&wire.IPv4Fields{TotalLength: 60, Flags: wire.IPv4FlagDF, TTL: 64, Protocol: wire.IPProtocolUDP,
		Checksum: 0xAE80, Src: [4]byte{198, 18, 0, 1}, Dst: [4]byte{198, 18, 0, 11}})
	if got := hex.EncodeToString(b); got != capturedIPv4 {
		t.Errorf("Encode = %s, want %s", got, capturedIPv4)
	}

	// Setters, each checked through its getter and the checksum.
	b.SetTOS(0xB9)
	b.SetTotalLength(1000)
	b.SetID(0xBEEF)
	b.SetFlagsFragmentOffset(wire.IPv4FlagMF, 0x1ABC)
	b.SetTTL(3)
	b.SetProtocol(6)
	b.SetSrc([4]byte{10, 0, 0, 1})
	b.SetDst([4]byte{10, 0, 0, 2})
	b.SetChecksum(b.ComputeChecksum())
	if b.TOS() != 0xB9 || b.TotalLength() != 1000 || b.ID() != 0xBEEF || !b.MF() || b.DF() || b.FragmentOffset() != 0x1ABC ||
		b.TTL() != 3 || b.Protocol() != 6 || b.Src() != [4]byte{10, 0, 0, 1} || b.Dst() != [4]byte{10, 0, 0, 2} {
		t.Errorf("setters: header %x", []byte(b))
	}
	if !b.IsChecksumValid() {
		t.Error("checksum invalid after SetChecksum(ComputeChecksum())")
	}
	b[15] ^= 1
	if b.IsChecksumValid() {
		t.Error("checksum still valid after a bit flip")
	}

	// Options are part of the header and of its checksum.
	opt := make([]byte, 24)
	copy(opt, unhex(t, capturedIPv4))
	o := wire.IPv4(opt)
	o.SetIHL(6)
	copy(opt[20:], []byte{0x94, 0x04, 0, 0}) // Router Alert
	o.SetChecksum(o.ComputeChecksum())
	if o.HeaderLen() != 24 || o.Version() != 4 || !o.IsChecksumValid() || o.ComputeChecksum() == 0xAE80 {
		t.Errorf("header with options: %x", opt)
	}
}

func TestIPv6Header(t *testing.T) {
	src := [16]byte{0xfe, 0x80, 15: 1}
	dst := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
	b := wire.IPv6(filled(wire.IPv6HeaderSize, 0x5A))
	b.Encode(&wire.IPv6Fields{TrafficClass: 0x6A, FlowLabel: 0xFABCDE, PayloadLength: 0x1234,
		NextHeader: wire.IPProtocolUDP, HopLimit: 7, Src: src, Dst: dst})
	want := "66aabcde" + "1234" + "11" + "07" + hex.EncodeToString(src[:]) + hex.EncodeToString(dst[:])
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("Encode = %s\nwant     %s", got, want)
	}
	if b.Version() != 6 || b.TrafficClass() != 0x6A || b.FlowLabel() != 0xABCDE ||
		b.PayloadLength() != 0x1234 || b.NextHeader() != 17 || b.HopLimit() != 7 || b.Src() != src || b.Dst() != dst {
		t.Errorf("getters disagree with %x", []byte(b))
	}
	b.SetTrafficClass(0x03)
	b.SetFlowLabel(0x12345)
	b.SetPayloadLength(8)
	b.SetNextHeader(6)
	b.SetHopLimit(255)
	b.SetSrc(dst)
	b.SetDst(src)
	if got := hex.EncodeToString(b[:8]); got != "60312345"+"0008"+"06ff" {
		t.Errorf("setters: first 8 bytes %s", got)
	}
	if b.Src() != dst || b.Dst() != src {
		t.Error("SetSrc/SetDst")
	}
}

func TestUDPHeader(t *testing.T) {
	u := wire.UDP(filled(wire.UDPHeaderSize, 0x5A))
	u.Encode(&wire.UDPFields{SrcPort: 49728, DstPort: wire.UDPPort, Length: 40, Checksum: 0})
	if got := hex.EncodeToString(u); got != "c24012b700280000" {
		t.Errorf("Encode = %s", got)
	}
	u.SetSrcPort(1)
	u.SetDstPort(2)
	u.SetLength(3)
	u.SetChecksum(4)
	if u.SrcPort() != 1 || u.DstPort() != 2 || u.Length() != 3 || u.Checksum() != 4 {
		t.Errorf("setters/getters: %x", []byte(u))
	}
}

// TestUDPChecksum checks SetUDPChecksum against a checksum computed by
// hand, on IPv4 and IPv6, and that CheckUDPChecksum catches corruption.
func TestUDPChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := sendSpec(v6, 37)
		s.route.UDPChecksum = true
		frame := build(s)
		hl := s.route.HeaderLen() - wire.UDPHeaderSize
		if got, want := wire.UDP(frame[hl:]).Checksum(), naiveUDPChecksum(frame, hl); got != want {
			t.Errorf("v6=%v: checksum %#x, want %#x", v6, got, want)
		}
		if err := wire.CheckUDPChecksum(frame); err != nil {
			t.Errorf("v6=%v: CheckUDPChecksum: %v", v6, err)
		}
		frame[len(frame)-9] ^= 0x10
		if err := wire.CheckUDPChecksum(frame); !errors.Is(err, wire.ErrUDPChecksum) {
			t.Errorf("v6=%v: corrupted frame: CheckUDPChecksum = %v", v6, err)
		}
		wire.UDP(frame[hl:]).SetChecksum(0)
		if err := wire.CheckUDPChecksum(frame); err != nil {
			t.Errorf("v6=%v: zero checksum: CheckUDPChecksum = %v, want nil", v6, err)
		}
	}
	v4HeaderOnly := append(unhex(t, capturedIPv4), 0, 0) // IPv4 header, 2 bytes of UDP
	for _, bad := range [][]byte{nil, {0x45}, {0x75, 0, 0}, v4HeaderOnly} {
		if err := wire.CheckUDPChecksum(bad); err == nil {
			t.Errorf("CheckUDPChecksum(%x) = nil", bad)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetUDPChecksum(%x) did not panic", bad)
				}
			}()
			wire.SetUDPChecksum(bad)
		}()
	}
}

// naiveUDPChecksum computes the UDP checksum 16 bits at a time, as RFC 768
// describes it.
func naiveUDPChecksum(frame []byte, hl int) uint16 {
	var pseudo []byte
	n := len(frame) - hl
	if frame[0]>>4 == 4 {
		pseudo = append(pseudo, frame[12:20]...)
		pseudo = append(pseudo, 0, 17, byte(n>>8), byte(n))
	} else {
		pseudo = append(pseudo, frame[8:40]...)
		pseudo = append(pseudo, 0, 0, byte(n>>8), byte(n), 0, 0, 0, 17)
	}
	data := append(pseudo, frame[hl:]...)
	data[len(pseudo)+6], data[len(pseudo)+7] = 0, 0
	if len(data)%2 == 1 {
		data = append(data, 0)
	}
	var sum uint32
	for i := 0; i < len(data); i += 2 {
		sum += uint32(data[i])<<8 | uint32(data[i+1])
		sum = sum&0xFFFF + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xFFFF
	}
	return c
}

// TestUDPChecksumZero makes a datagram whose checksum computes to 0, which
// RFC 768 sends as 0xFFFF (0 would mean "no checksum").
func TestUDPChecksumZero(t *testing.T) {
	frame := build(sendSpec(false, 64))
	wire.SetUDPChecksum(frame)
	c := uint32(wire.UDP(frame[20:]).Checksum())
	// Adding c to one payload word (one's-complement) makes the sum 0xFFFF.
	const at = 20 + 8 + 12 // first payload word
	w := uint32(frame[at])<<8 | uint32(frame[at+1]) + c
	w = w&0xFFFF + w>>16
	frame[at], frame[at+1] = byte(w>>8), byte(w)
	wire.SetUDPChecksum(frame)
	if got := wire.UDP(frame[20:]).Checksum(); got != 0xFFFF {
		t.Errorf("checksum %#x, want 0xffff", got)
	}
	if err := wire.CheckUDPChecksum(frame); err != nil {
		t.Errorf("CheckUDPChecksum: %v", err)
	}
}

// TestMarkCE: a congested switch marks ECT(0) and ECT(1) packets CE (the
// IPv4 checksum still valid) and leaves Not-ECT and CE ones alone.
func TestMarkCE(t *testing.T) {
	for _, tc := range []struct {
		ecn        uint8
		v6, marked bool
	}{
		{wire.ECNECT0, false, true}, {wire.ECNECT1, false, true}, {wire.ECNNotECT, false, false}, {wire.ECNCE, false, false},
		{wire.ECNECT0, true, true}, {wire.ECNNotECT, true, false},
	} {
		var pkt []byte
		if tc.v6 {
			pkt = make([]byte, wire.IPv6HeaderSize)
			pkt[0], pkt[1] = 6<<4, tc.ecn<<4
		} else {
			pkt = make([]byte, wire.IPv4HeaderSize)
			ip := wire.IPv4(pkt)
			pkt[0] = 4<<4 | 5
			ip.SetTOS(104 | tc.ecn)
			ip.SetChecksum(ip.ComputeChecksum())
		}
		if got := wire.ECNCapable(pkt); got != tc.marked {
			t.Errorf("%+v: ECNCapable %v", tc, got)
		}
		if got := wire.MarkCE(pkt); got != tc.marked {
			t.Errorf("%+v: MarkCE %v", tc, got)
		}
		ecn, _ := wire.PacketECN(pkt)
		if want := map[bool]uint8{true: wire.ECNCE, false: tc.ecn}[tc.marked]; ecn != want {
			t.Errorf("%+v: ECN %d after, want %d", tc, ecn, want)
		}
		if !tc.v6 {
			ip := wire.IPv4(pkt)
			if ip.TOS()>>2 != 26 || ip.Checksum() != ip.ComputeChecksum() {
				t.Errorf("%+v: DSCP %d, checksum %#x want %#x", tc, ip.TOS()>>2, ip.Checksum(), ip.ComputeChecksum())
			}
		}
	}
	if _, ok := wire.PacketECN([]byte{0x45}); ok || wire.MarkCE([]byte{0x45}) {
		t.Error("a truncated header was read or marked")
	}
}
