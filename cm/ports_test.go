package cm

import (
	"net/netip"
	"syscall"
	"testing"
)

// TestPortConflict: which ids may hold one port together, as the kernel's
// cma_check_port decides (Linux 6.1): a wildcard conflicts with every
// address of a family it serves (EADDRNOTAVAIL), the same address twice
// is EADDRINUSE, AFONLY keeps IPv4 and IPv6 apart, REUSEADDR on both
// sides shares anything (and a listener, checking without it, does not).
func TestPortConflict(t *testing.T) {
	var (
		any4  = netip.MustParseAddr("0.0.0.0")
		any6  = netip.MustParseAddr("::")
		a4    = netip.MustParseAddr("10.0.0.1")
		b4    = netip.MustParseAddr("10.0.0.2")
		a6    = netip.MustParseAddr("fd00::1")
		ok    = syscall.Errno(0)
		inUse = syscall.EADDRINUSE
		avail = syscall.EADDRNOTAVAIL
	)
	// AF_INET ids are AFONLY unless cleared; AF_INET6 ones as the
	// program (or net.ipv6.bindv6only) says.
	v4 := func(a netip.Addr) binding { return binding{addr: a, afonly: true} }
	v6 := func(a netip.Addr, afonly bool) binding { return binding{addr: a, afonly: afonly} }
	reuse := func(b binding) binding { b.reuse = true; return b }
	for _, tc := range []struct {
		name     string
		new, old binding
		want     syscall.Errno
	}{
		{"[::] AFONLY beside 0.0.0.0 (dual stack)", v6(any6, true), v4(any4), ok},
		{"0.0.0.0 beside [::] AFONLY", v4(any4), v6(any6, true), ok},
		{"0.0.0.0 beside [::] without AFONLY", v4(any4), v6(any6, false), avail},
		{"[::] without AFONLY beside 0.0.0.0", v6(any6, false), v4(any4), avail},
		{"an IPv4 address beside [::] without AFONLY", v4(a4), v6(any6, false), avail},
		{"an IPv4 address beside [::] AFONLY", v4(a4), v6(any6, true), ok},
		{"an IPv6 address beside [::] AFONLY", v6(a6, true), v6(any6, true), avail},
		{"an IPv6 address beside 0.0.0.0", v6(a6, false), v4(any4), avail},
		{"an IPv6 address AFONLY beside 0.0.0.0", v6(a6, true), v4(any4), ok},
		{"0.0.0.0 twice", v4(any4), v4(any4), avail},
		{"[::] twice, both AFONLY", v6(any6, true), v6(any6, true), avail},
		{"an address beside the wildcard", v4(a4), v4(any4), avail},
		{"the wildcard beside an address", v4(any4), v4(a4), avail},
		{"one address twice", v4(a4), v4(a4), inUse},
		{"two addresses", v4(a4), v4(b4), ok},
		{"an IPv4 and an IPv6 address", v4(a4), v6(a6, false), ok},
		{"an AF_INET id AFONLY cleared beside [::] AFONLY", v6(any4, false), v6(any6, true), avail},
		{"REUSEADDR both, one address", reuse(v4(a4)), reuse(v4(a4)), ok},
		{"REUSEADDR both, wildcards", reuse(v4(any4)), reuse(v6(any6, false)), ok},
		{"REUSEADDR on the new one only", reuse(v4(a4)), v4(a4), inUse},
		{"REUSEADDR on the old one only", v4(a4), reuse(v4(a4)), inUse},
	} {
		if got := tc.new.conflict(tc.old, tc.new.reuse); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A listener checks again without its REUSEADDR: it may not share.
	if got := reuse(v4(a4)).conflict(reuse(v4(a4)), false); got != inUse {
		t.Errorf("a listener beside an id it shared with: %v, want EADDRINUSE", got)
	}
}

// TestListenerTakes: which requests a listener takes, as the kernel's
// cma_match_private_data: [::] without AFONLY takes IPv4 ones too, with
// AFONLY IPv6 only; 0.0.0.0 IPv4 only; an address its own only, of its
// IP version (an IPv4-mapped IPv6 header is IPv6).
func TestListenerTakes(t *testing.T) {
	p := netip.MustParseAddr
	for _, tc := range []struct {
		b    binding
		dst  string
		want bool
	}{
		{binding{addr: p("::")}, "10.0.0.1", true},
		{binding{addr: p("::")}, "fd00::1", true},
		{binding{addr: p("::"), afonly: true}, "10.0.0.1", false},
		{binding{addr: p("::"), afonly: true}, "fd00::1", true},
		{binding{addr: p("::"), afonly: true}, "::ffff:10.0.0.1", true},
		{binding{addr: p("0.0.0.0"), afonly: true}, "10.0.0.1", true},
		{binding{addr: p("0.0.0.0"), afonly: true}, "fd00::1", false},
		{binding{addr: p("0.0.0.0"), afonly: true}, "::ffff:10.0.0.1", false},
		{binding{addr: p("0.0.0.0")}, "fd00::1", true}, // an AF_INET wildcard whose AFONLY was cleared
		{binding{addr: p("10.0.0.1"), afonly: true}, "10.0.0.1", true},
		{binding{addr: p("10.0.0.1"), afonly: true}, "10.0.0.2", false},
		{binding{addr: p("fd00::1")}, "fd00::1", true},
		{binding{addr: p("fd00::1")}, "fd00::2", false},
	} {
		if got := tc.b.takes(p(tc.dst)); got != tc.want {
			t.Errorf("%+v takes %s: %v, want %v", tc.b, tc.dst, got, tc.want)
		}
	}
}

// TestCMAckTimeout: the local ACK timeout of a path, as the kernel CM's
// cm_ack_timeout computes it: rdma_cm's default path (lifetime 18) to an
// rxe-like CA (ACK delay 15) is 19, AckTimeout.
func TestCMAckTimeout(t *testing.T) {
	for _, tc := range []struct{ delay, life, want uint8 }{
		{TargetACKDelay, PacketLifeTime, AckTimeout},
		{15, 10, 15}, {15, 13, 16}, {15, 14, 16}, {15, 15, 17}, {15, 16, 17}, {15, 17, 18},
		{0, 0, 2}, {0, 5, 6}, {20, 40, 31},
	} {
		if got := cmAckTimeout(tc.delay, tc.life); got != tc.want {
			t.Errorf("cmAckTimeout(%d, %d) = %d, want %d", tc.delay, tc.life, got, tc.want)
		}
	}
}
