package udp

import (
	"net"
	"net/netip"
	"testing"
)

// TestNetdev: a link knows the interface that holds its address, as rxe
// is bound to one: on loopback, lo (no MAC, the interface's MTU and
// index), and an address no interface holds is refused unless
// Options.MTU spares the lookup.
func TestNetdev(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("skipped: no interface lo here")
	}
	nd, err := interfaceOf(netip.MustParseAddr("127.0.0.5"))
	if err != nil {
		t.Fatal(err)
	}
	if nd.Name != "lo" || nd.Index != lo.Index || nd.MTU != lo.MTU || len(nd.HardwareAddr) != 0 {
		t.Errorf("interfaceOf(127.0.0.5) = %+v, want lo (index %d, MTU %d, no MAC)", nd, lo.Index, lo.MTU)
	}
	l, err := Open(Options{Addr: netip.MustParseAddr("127.0.0.5"), Port: 47915})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Netdev(); got.Name != "lo" || got.Index != lo.Index {
		t.Errorf("Link.Netdev() = %+v, want lo", got)
	}
	// 198.51.100.0/24 (TEST-NET-2) is documentation's: no interface here
	// holds it unless a test's namespace does.
	if nd, err := interfaceOf(netip.MustParseAddr("198.51.100.77")); err == nil {
		t.Errorf("interfaceOf(198.51.100.77): %+v, no error", nd)
	}
	if ifSpeed("lo") != 0 {
		t.Errorf("ifSpeed(lo) = %d, want 0 (loopback has no link speed)", ifSpeed("lo"))
	}
}
