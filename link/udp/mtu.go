package udp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rnic/rnic/link"
)

// interfaceOf returns the interface that holds a: the one with the
// longest prefix containing it (127.0.0.2 is on lo through 127.0.0.0/8),
// restricted to the zone's interface for a zoned address. It is the
// netdev the link is bound to, as rdma_rxe is bound to one.
func interfaceOf(a netip.Addr) (link.Netdev, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return link.Netdev{}, fmt.Errorf("udp: listing interfaces: %w", err)
	}
	zone, bare := a.Zone(), a.WithZone("")
	best, found := -1, net.Interface{}
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
			best, found = ones, ifc
		}
	}
	if best < 0 {
		return link.Netdev{}, fmt.Errorf("udp: no interface holds %v", a)
	}
	return link.Netdev{
		Name: found.Name, Index: found.Index, HardwareAddr: found.HardwareAddr, MTU: found.MTU,
		SpeedMbps: ifSpeed(found.Name),
	}, nil
}

// ifSpeed reads the interface's link speed in Mb/s as ethtool reports it
// through sysfs; 0 when it has none (loopback's read fails with EINVAL,
// a link that is down says -1).
func ifSpeed(name string) int {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "speed"))
	if err != nil {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return 0
	}
	return v
}
