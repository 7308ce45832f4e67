package udp_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
)

// TestReceiveDrops sends datagrams that are not RoCE frames to a link
// from a plain socket (too short for a BTH and an ICRC, or larger than
// any RoCE frame) and checks that each is counted and none delivered,
// on every receive path.
func TestReceiveDrops(t *testing.T) {
	tests := []struct {
		name string
		v6   bool
		o    udp.Options
	}{
		{"v4/rebuilt", false, udp.Options{Raw: udp.RawOff}},
		{"v4/raw", false, udp.Options{Raw: udp.RawAuto}},
		{"v4/gro", false, udp.Options{GRO: udp.On}},
		{"v6/plain", true, udp.Options{GRO: udp.Off}},
		{"v6/gro", true, udp.Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := &recorder{}
			_, b := pair(t, tt.v6, udp.Options{}, tt.o, nil, rb)
			from := v4a
			if tt.v6 {
				from = v6
			}
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			to := netip.AddrPortFrom(b.Addr(), b.SourcePort())
			for _, n := range []int{1, 15, link.MaxFrame, 9000} {
				if _, err := c.WriteToUDPAddrPort(make([]byte, n), to); err != nil {
					t.Fatal(err)
				}
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Microsecond) {
				if s := b.Stats(); s.RawRx+s.SocketRx == 4 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for the datagrams: stats %+v", s)
				}
			}
			time.Sleep(5 * time.Millisecond)
			s := b.Stats()
			if s.RxMalformed != 2 || s.RxOversize != 2 || s.RxFrames != 0 || rb.count() != 0 {
				t.Errorf("stats %+v: want 2 malformed, 2 oversize, none delivered", s)
			}
			rxBalance(t, b)
		})
	}
}
