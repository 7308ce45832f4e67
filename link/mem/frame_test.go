package mem

import (
	"net/netip"
	"testing"
)

func TestFrameParsing(t *testing.T) {
	v4 := func(n int, ihl, proto byte) []byte {
		f := make([]byte, n)
		f[0] = 0x40 | ihl
		if n > ipv4Protocol {
			f[ipv4Protocol] = proto
		}
		if n >= ipv4MinHeader {
			copy(f[ipv4Dst:], []byte{10, 0, 0, 7})
		}
		return f
	}
	v6 := func(n int, next byte) []byte {
		f := make([]byte, n)
		f[0] = 0x60
		if n > ipv6NextHdr {
			f[ipv6NextHdr] = next
		}
		if n >= ipv6Header {
			f[ipv6Dst], f[ipv6Dst+15] = 0xfd, 7
		}
		return f
	}
	mapped := v6(100, protoUDP)
	copy(mapped[ipv6Dst:], []byte{0: 0, 10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 0, 15: 7})
	dst4, dst6 := netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("fd00::7")
	tests := []struct {
		name    string
		frame   []byte
		dst     netip.Addr // invalid: unroutable
		payload int        // -1: none
	}{
		{"IPv4", v4(100, 5, protoUDP), dst4, 28},
		{"IPv4 options", v4(100, 6, protoUDP), dst4, 32},
		{"IPv4 IHL too small", v4(100, 4, protoUDP), dst4, -1},
		{"IPv4 not UDP", v4(100, 5, 6), dst4, -1},
		{"IPv4 empty payload", v4(28, 5, protoUDP), dst4, -1},
		{"IPv4 short", v4(19, 5, protoUDP), netip.Addr{}, -1},
		{"IPv6", v6(100, protoUDP), dst6, 48},
		{"IPv6 mapped", mapped, dst4, 48},
		{"IPv6 not UDP", v6(100, 6), dst6, -1},
		{"IPv6 short", v6(39, protoUDP), netip.Addr{}, -1},
		{"version 5", append([]byte{0x50}, make([]byte, 99)...), netip.Addr{}, -1},
		{"empty", nil, netip.Addr{}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst, ok := frameDst(tt.frame)
			if ok != tt.dst.IsValid() || dst != tt.dst {
				t.Errorf("frameDst = %v, %v; want %v", dst, ok, tt.dst)
			}
			if got := udpPayload(tt.frame); got != tt.payload {
				t.Errorf("udpPayload = %d, want %d", got, tt.payload)
			}
		})
	}
}
