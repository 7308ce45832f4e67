package wire_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rnic/rnic/wire"
)

func TestGID(t *testing.T) {
	tests := []struct {
		in     string // ParseGID input
		hex    string // the 16 bytes
		str    string // String()
		addr   string // Addr().String()
		isIPv4 bool
	}{
		{"198.18.0.11", "00000000000000000000ffffc612000b", "::ffff:198.18.0.11", "198.18.0.11", true},
		{"::ffff:198.18.0.11", "00000000000000000000ffffc612000b", "::ffff:198.18.0.11", "198.18.0.11", true},
		// perftest's format: 16 bytes as "%02x:".
		{"00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c", "00000000000000000000ffffc612000c", "::ffff:198.18.0.12", "198.18.0.12", true},
		// ibv_rc_pingpong's format: 32 hex digits.
		{"00000000000000000000ffffc612000b", "00000000000000000000ffffc612000b", "::ffff:198.18.0.11", "198.18.0.11", true},
		// ibv_devinfo's format, which is also IPv6 text.
		{"fe80:0000:0000:0000:5054:00ff:fe12:3456", "fe80000000000000505400fffe123456", "fe80::5054:ff:fe12:3456", "fe80::5054:ff:fe12:3456", false},
		{"2001:db8::1", "20010db8000000000000000000000001", "2001:db8::1", "2001:db8::1", false},
		{"FD00::11", "fd000000000000000000000000000011", "fd00::11", "fd00::11", false},
	}
	for _, tt := range tests {
		g, err := wire.ParseGID(tt.in)
		if err != nil {
			t.Errorf("ParseGID(%q): %v", tt.in, err)
			continue
		}
		if got := hexOf(g[:]); got != tt.hex {
			t.Errorf("ParseGID(%q) = %s, want %s", tt.in, got, tt.hex)
		}
		if g.String() != tt.str || g.Addr().String() != tt.addr || g.IsIPv4() != tt.isIPv4 {
			t.Errorf("%q: String %q Addr %q IsIPv4 %v; want %q %q %v", tt.in, g.String(), g.Addr(), g.IsIPv4(), tt.str, tt.addr, tt.isIPv4)
		}
		if back, err := wire.ParseGID(g.String()); err != nil || back != g {
			t.Errorf("ParseGID(String()) of %q = %v, %v", tt.in, back, err)
		}
		if wire.GIDFromAddr(g.Addr()) != g {
			t.Errorf("GIDFromAddr(Addr()) of %q differs", tt.in)
		}
		if g.IsZero() {
			t.Errorf("%q: IsZero", tt.in)
		}
	}
	for _, bad := range []string{
		"", "198.18.0", "0000000000000000000ffffc612000b", "00000000000000000000ffffc612000bb",
		"g0000000000000000000ffffc612000b", ":00000000000000000000ffffc612000b", "fe80::1%eth0",
	} {
		g, err := wire.ParseGID(bad)
		if !errors.Is(err, wire.ErrGIDSyntax) {
			t.Errorf("ParseGID(%q) = %v, %v; want ErrGIDSyntax", bad, g, err)
		}
	}
	if _, err := wire.ParseGID("nope"); err == nil || err.Error() != `wire: invalid GID syntax: "nope"` {
		t.Errorf("ParseGID error message: %v", err)
	}
	if !wire.GIDFromAddr(netip.Addr{}).IsZero() || (wire.GID{}).IsIPv4() {
		t.Error("zero GID")
	}
	if got := wire.GIDFromAddr(netip.MustParseAddr("fe80::1%eth0")); got.String() != "fe80::1" {
		t.Errorf("GIDFromAddr keeps the zone: %v", got)
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&0xF])
	}
	return string(out)
}

// TestGIDIsIPv4: IsIPv4 is netip's Is4In6 for the IPv4-mapped prefix
// with any one of its 96 bits flipped, and for seeded random GIDs.
func TestGIDIsIPv4(t *testing.T) {
	check := func(g wire.GID) {
		t.Helper()
		if got, want := g.IsIPv4(), netip.AddrFrom16(g).Is4In6(); got != want {
			t.Fatalf("%v: IsIPv4 %v, want %v", g, got, want)
		}
	}
	v4 := wire.GIDFromAddr(netip.MustParseAddr("192.0.2.7"))
	check(v4)
	for bit := range 96 {
		g := v4
		g[bit/8] ^= 1 << (bit % 8)
		check(g)
	}
	rng := rand.New(rand.NewPCG(28, 4))
	for range 1000 {
		var g wire.GID
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		check(g)
		copy(g[:12], v4[:12])
		check(g)
	}
}
