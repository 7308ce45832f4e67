package fabric

import (
	"fmt"
	"net/netip"
)

// Pair is one flow of a traffic pattern, from Src to Dst.
type Pair[T any] struct{ Src, Dst T }

// Incast returns the flows of an incast: every sender to one receiver
// (a receiver listed among the senders is skipped).
func Incast[T comparable](senders []T, receiver T) []Pair[T] {
	var ps []Pair[T]
	for _, s := range senders {
		if s != receiver {
			ps = append(ps, Pair[T]{s, receiver})
		}
	}
	return ps
}

// AllToAll returns the flows of a many-to-many pattern: every host to
// every other host, ordered by source then destination (the order of
// hosts), so that a workload built from it is deterministic.
func AllToAll[T any](hosts []T) []Pair[T] {
	ps := make([]Pair[T], 0, len(hosts)*max(len(hosts)-1, 0))
	for i, s := range hosts {
		for j, d := range hosts {
			if i != j {
				ps = append(ps, Pair[T]{s, d})
			}
		}
	}
	return ps
}

// HostAddrs returns n IPv4 addresses for hosts, 10.0.0.1 upwards
// (10.0.0.1 … 10.0.0.255, 10.0.1.0, …), at most 2^24-2 of them.
func HostAddrs(n int) []netip.Addr {
	if n < 0 || n > 1<<24-2 {
		panic(fmt.Sprintf("fabric: %d host addresses", n))
	}
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		v := i + 1
		addrs[i] = netip.AddrFrom4([4]byte{10, byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return addrs
}
