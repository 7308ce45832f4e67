package rnic

import (
	"net"
	"net/netip"
	"testing"
)

// TestPortRate: the speed and width a port reports for its netdev's
// speed, as Linux 6.1's ib_get_eth_speed maps them for rxe.
func TestPortRate(t *testing.T) {
	for _, tc := range []struct {
		mbps  int
		speed PortSpeed
		width PortWidth
	}{
		{0, SpeedSDR, Width1X}, // unknown (loopback): 1 Gb/s
		{100, SpeedSDR, Width1X},
		{1000, SpeedSDR, Width1X},
		{2500, SpeedFDR10, Width1X},
		{10000, SpeedFDR10, Width1X}, // veth
		{20000, SpeedDDR, Width4X},
		{25000, SpeedEDR, Width1X},
		{40000, SpeedFDR10, Width4X},
		{100000, SpeedEDR, Width4X},
		{400000, SpeedEDR, Width4X},
	} {
		if s, w := portRate(tc.mbps); s != tc.speed || w != tc.width {
			t.Errorf("portRate(%d) = %d, %d; want %d, %d", tc.mbps, s, w, tc.speed, tc.width)
		}
	}
}

// TestLinkLocalGIDFromMAC: a port on an interface with a MAC has the
// link-local GID the kernel gives the interface (fe80::/64, modified
// EUI-64); without one, a stable GID made of the address.
func TestLinkLocalGIDFromMAC(t *testing.T) {
	addr := GID(netip.MustParseAddr("::ffff:10.77.0.1").As16())
	mac := net.HardwareAddr{0x7a, 0x70, 0x9e, 0xab, 0x3e, 0x31}
	if got, want := netip.AddrFrom16(linkLocalGID(addr, mac)), netip.MustParseAddr("fe80::7870:9eff:feab:3e31"); got != want {
		t.Errorf("linkLocalGID with MAC %v = %v, want %v", mac, got, want)
	}
	if got, want := netip.AddrFrom16(linkLocalGID(addr, nil)), netip.MustParseAddr("fe80::aff:fe4d:1"); got != want {
		t.Errorf("linkLocalGID without a MAC = %v, want %v", got, want)
	}
}
