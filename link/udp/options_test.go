package udp_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rnic/rnic/link/udp"
)

func TestOpenErrors(t *testing.T) {
	port := freePort(t, v4a)
	tests := []struct {
		name    string
		o       udp.Options
		feature string // a *FeatureError for this feature, or "" for a plain error
		is      error
	}{
		{"no address", udp.Options{}, "", nil},
		{"unspecified address", udp.Options{Addr: netip.IPv4Unspecified()}, "", nil},
		{"batch", udp.Options{Addr: v4a, Port: port, Batch: 5000}, "", nil},
		{"MTU too small", udp.Options{Addr: v4a, Port: port, MTU: 100}, "", nil},
		{"MTU too large", udp.Options{Addr: v4a, Port: port, MTU: 70000}, "", nil},
		{"mode", udp.Options{Addr: v4a, Port: port, GRO: udp.Mode(9)}, "", nil},
		{"GSO on IPv4", udp.Options{Addr: v4a, Port: port, GSO: udp.On}, "GSO", udp.ErrGSOIPv4},
		{"raw and GRO", udp.Options{Addr: v4a, Port: port, Raw: udp.RawOn, GRO: udp.On}, "GRO", nil},
		{"not local", udp.Options{Addr: netip.MustParseAddr("192.0.2.1"), Port: port, MTU: 1500}, "", nil}, // bind fails: nothing is sent
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := udp.Open(tt.o)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			var fe *udp.FeatureError
			if isFE := errors.As(err, &fe); isFE != (tt.feature != "") || isFE && fe.Feature != tt.feature {
				t.Errorf("error %v: want a FeatureError for %q", err, tt.feature)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v: want %v", err, tt.is)
			}
		})
	}
}

// TestDefaults checks the address, port and MTU a link reports, and the
// features each family picks by default.
func TestDefaults(t *testing.T) {
	a, b := pair(t, false, udp.Options{}, udp.Options{MTU: 9000, Raw: udp.RawAuto, GRO: udp.On}, nil, nil)
	if a.Addr() != v4a || a.MTU() != 65535 || b.MTU() != 9000 {
		t.Errorf("addr %v MTU %d and %d: want %v, 65535 (loopback's 65536, capped by the IPv4 length) and 9000", a.Addr(), a.MTU(), b.MTU(), v4a)
	}
	var fe *udp.FeatureError
	if f := b.Features(); f.Raw || !f.GRO || !errors.As(f.RawErr, &fe) {
		t.Errorf("GRO On with RawAuto: features %+v, want GRO and raw off with a reason", f)
	}
	if f := a.Features(); f.GSO || f.GRO {
		t.Errorf("IPv4 defaults: features %+v, want neither GSO nor GRO", f)
	}
	c, d := pair(t, true, udp.Options{Raw: udp.RawOn}, udp.Options{}, nil, nil)
	if c.Addr() != v6 || c.MTU() != 65536 || !c.ICRCVerified() || !d.ICRCVerified() {
		t.Errorf("IPv6 link: addr %v MTU %d verified %v", c.Addr(), c.MTU(), c.ICRCVerified())
	}
	if f := c.Features(); !f.GSO || !f.GRO || f.Raw {
		t.Errorf("IPv6 defaults: features %+v, want GSO and GRO", f)
	}
	if d.SourcePort() == c.SourcePort() {
		t.Error("two IPv6 links on one port")
	}
	// An IPv4-mapped address means IPv4.
	l, err := udp.Open(udp.Options{Addr: netip.AddrFrom16(v4a.As16()), Port: freePort(t, v4a)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Addr() != v4a {
		t.Errorf("mapped address: Addr() = %v", l.Addr())
	}
}
