package cm

import (
	"net/netip"
	"os"
	"strings"
	"syscall"
)

// Ports of rdma_cm ids, as the kernel's rdma_cm keeps them (cma.c): a
// port of a port space is held by a list of ids (its bind list), each
// bound to an address, and who may join the list and which listener a
// request reaches follow from each holder's address, its AFONLY and its
// REUSEADDR (rdma_set_option). A NIC keeps the list for its own address:
// a program's wildcard id holds the port on every NIC (one part per NIC,
// bound to the wildcard address of its family), so that the check on
// each NIC is the kernel's check on the host.

// binding is an id's hold on a port.
type binding struct {
	// addr is the NIC's address, or the wildcard address of the id's
	// family (0.0.0.0 or ::): a wildcard id's part on this NIC.
	addr netip.Addr
	// afonly: the id serves its own family only (IPV6_V6ONLY's meaning).
	// An AF_INET id has it unless the program cleared it; an AF_INET6
	// id takes net.ipv6.bindv6only unless the program set it.
	afonly bool
	// reuse: REUSEADDR. Ids that all have it may share a port whatever
	// their addresses, until one of them listens.
	reuse bool
}

// conflict is the kernel's cma_check_port for a new holder b against a
// holder o of the port, reuse being b's REUSEADDR (a listener checks
// again without it): 0 if they may share the port, EADDRNOTAVAIL if
// either is a wildcard (it covers the other's address), EADDRINUSE if
// both hold the same address.
func (b binding) conflict(o binding, reuse bool) syscall.Errno {
	switch {
	case reuse && o.reuse:
		return 0
	case b.afonly && o.afonly && b.addr.Is4() != o.addr.Is4():
		// Each serves its own family only: [::]:P with AFONLY beside
		// 0.0.0.0:P, as a dual-stack server listens on Linux.
		return 0
	case b.addr.IsUnspecified() || o.addr.IsUnspecified():
		return syscall.EADDRNOTAVAIL
	case b.addr == o.addr:
		return syscall.EADDRINUSE
	}
	return 0
}

// takes is the kernel's cma_match_private_data: whether a listener
// bound as b takes a request whose rdma_cm header names dst (its IP
// version and destination address). A wildcard without AFONLY takes
// every request (an IPv6 wildcard takes IPv4 ones too); otherwise the
// header's IP version must be the listener's family, and a listener on
// an address takes requests for that address only.
func (b binding) takes(dst netip.Addr) bool {
	if b.addr.IsUnspecified() && !b.afonly {
		return true
	}
	if dst.Is4() != b.addr.Is4() {
		return false
	}
	return b.addr.IsUnspecified() || b.addr == dst
}

// defaultAFOnly is an id's AFONLY when the program did not set it, as
// the kernel's rdma_bind_addr chooses it: an IPv4 id serves IPv4 only,
// an IPv6 id does as net.ipv6.bindv6only says (0 unless the host
// changed it: IPv6 and IPv4 both).
func defaultAFOnly(a netip.Addr) bool {
	if a.Is4() {
		return true
	}
	b, err := os.ReadFile("/proc/sys/net/ipv6/bindv6only")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}
