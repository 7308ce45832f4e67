package udp

import (
	"fmt"
	"net"
	"net/netip"
)

// interfaceMTU returns the MTU of the interface that holds a: the one with
// the longest prefix containing it (127.0.0.2 is on lo through
// 127.0.0.0/8), restricted to the zone's interface for a zoned address.
func interfaceMTU(a netip.Addr) (int, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("udp: listing interfaces for the MTU: %w", err)
	}
	zone, bare := a.Zone(), a.WithZone("")
	best, mtu := -1, 0
	for _, ifc := range ifs {
		if zone != "" && ifc.Name != zone {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			n, ok := ad.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ones, _ := n.Mask.Size()
			if ip.Unmap().Is4() && len(n.Mask) == net.IPv6len {
				ones -= 96
			}
			p, err := ip.Unmap().Prefix(ones)
			if err != nil || !p.Contains(bare) || ones <= best {
				continue
			}
			best, mtu = ones, ifc.MTU
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("udp: no interface holds %v (set Options.MTU to skip the lookup)", a)
	}
	return mtu, nil
}
