package fabric

import (
	"fmt"

	"github.com/rnic/rnic/sim/timing"
)

// Topology kinds (TopologyConfig.Kind).
const (
	// Star is one switch with a port per host, added as hosts are.
	Star = "star"
	// LeafSpine is a two-tier Clos: Leaves leaf switches with
	// HostsPerLeaf hosts each, every leaf linked to every one of Spines
	// spine switches.
	LeafSpine = "leaf-spine"
	// FatTree is the k-ary three-tier fat tree (Al-Fares et al.): k pods
	// of k/2 edge and k/2 aggregation switches, (k/2)² core switches, k/2
	// hosts per edge switch, k³/4 hosts in all.
	FatTree = "fat-tree"
)

// TopologyConfig chooses how the switches are wired. Hosts are attached
// in the order they are added: to the star's switch, or filling the first
// leaf (edge switch) before the next.
type TopologyConfig struct {
	Kind string // Star (the default when empty), LeafSpine or FatTree
	// LeafSpine's shape.
	Leaves, Spines, HostsPerLeaf int
	// K is FatTree's arity (even, at least 2).
	K int
	// Uplink is every switch-to-switch link; a zero rate means the same
	// as the hosts' links.
	Uplink timing.WireConfig
}

func (t *TopologyConfig) validate() error {
	switch t.Kind {
	case "", Star:
	case LeafSpine:
		if t.Leaves < 1 || t.Spines < 1 || t.HostsPerLeaf < 1 {
			return fmt.Errorf("fabric: leaf-spine needs at least one leaf, spine and host per leaf, not %d, %d, %d", t.Leaves, t.Spines, t.HostsPerLeaf)
		}
		if t.Leaves*(t.Spines+t.HostsPerLeaf) > 1<<16 {
			return fmt.Errorf("fabric: leaf-spine of %d leaves and %d spines is too large", t.Leaves, t.Spines)
		}
	case FatTree:
		if t.K < 2 || t.K%2 != 0 || t.K > 64 {
			return fmt.Errorf("fabric: fat-tree arity %d is not an even number in [2, 64]", t.K)
		}
	default:
		return fmt.Errorf("fabric: unknown topology %q (star, leaf-spine, fat-tree)", t.Kind)
	}
	if t.Uplink.RateGbps != 0 {
		if _, err := timing.NewWire(t.Uplink); err != nil {
			return fmt.Errorf("fabric: uplink: %w", err)
		}
	}
	return nil
}

// build creates the switches and the links between them, and the routes
// from every switch towards every leaf.
func (f *Fabric) build() {
	t := f.cfg.Topology
	up := t.Uplink
	if up.RateGbps == 0 {
		up = f.cfg.Link
	}
	switch t.Kind {
	case "", Star:
		f.leaves = []*Switch{f.newSwitch("switch")}
	case LeafSpine:
		spines := make([]*Switch, t.Spines)
		for i := range spines {
			spines[i] = f.newSwitch(fmt.Sprintf("spine%d", i))
		}
		for i := range t.Leaves {
			l := f.newSwitch(fmt.Sprintf("leaf%d", i))
			f.leaves = append(f.leaves, l)
			for _, s := range spines {
				f.connect(l, s, up)
			}
		}
		f.hostsPerLeaf = t.HostsPerLeaf
	case FatTree:
		k := t.K
		cores := make([]*Switch, k*k/4)
		for i := range cores {
			cores[i] = f.newSwitch(fmt.Sprintf("core%d", i))
		}
		for pod := range k {
			aggs := make([]*Switch, k/2)
			for a := range aggs {
				aggs[a] = f.newSwitch(fmt.Sprintf("agg%d.%d", pod, a))
				// Aggregation switch a of every pod links to cores
				// a·k/2 … a·k/2+k/2-1.
				for c := range k / 2 {
					f.connect(aggs[a], cores[a*k/2+c], up)
				}
			}
			for e := range k / 2 {
				edge := f.newSwitch(fmt.Sprintf("edge%d.%d", pod, e))
				f.leaves = append(f.leaves, edge)
				for _, a := range aggs {
					f.connect(edge, a, up)
				}
			}
		}
		f.hostsPerLeaf = k / 2
	}
	f.route()
}

// connect links two switches with a cable each way.
func (f *Fabric) connect(a, b *Switch, w timing.WireConfig) {
	pa, pb := int32(len(a.ports)), int32(len(b.ports))
	ab := f.newEgress(w, a, pa, f.cfg.Switch.BufferBytes, f.cfg.Switch.ECN)
	ba := f.newEgress(w, b, pb, f.cfg.Switch.BufferBytes, f.cfg.Switch.ECN)
	ab.toSw, ab.toPort = b, pb
	ba.toSw, ba.toPort = a, pa
	a.ports = append(a.ports, swPort{out: ab, in: ba, peer: b})
	b.ports = append(b.ports, swPort{out: ba, in: ab, peer: a})
}

// route fills every switch's next hops towards every leaf: the ports on
// a shortest path, among which ECMP chooses.
func (f *Fabric) route() {
	n := len(f.switches)
	for li, leaf := range f.leaves {
		// Breadth-first distances from the leaf.
		dist := make([]int, n)
		for i := range dist {
			dist[i] = -1
		}
		dist[leaf.id] = 0
		queue := []*Switch{leaf}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, p := range s.ports {
				if p.peer != nil && dist[p.peer.id] < 0 {
					dist[p.peer.id] = dist[s.id] + 1
					queue = append(queue, p.peer)
				}
			}
		}
		for _, s := range f.switches {
			if s.toLeaf == nil {
				s.toLeaf = make([][]int32, len(f.leaves))
			}
			for pi, p := range s.ports {
				if p.peer != nil && dist[p.peer.id] == dist[s.id]-1 {
					s.toLeaf[li] = append(s.toLeaf[li], int32(pi))
				}
			}
		}
	}
}

// leafFor returns the switch the next host attaches to, or nil if the
// topology is full.
func (f *Fabric) leafFor(host int) *Switch {
	if f.hostsPerLeaf == 0 {
		return f.leaves[0]
	}
	if i := host / f.hostsPerLeaf; i < len(f.leaves) {
		return f.leaves[i]
	}
	return nil
}

// MaxHosts returns how many hosts the topology takes (0: no limit).
func (f *Fabric) MaxHosts() int { return f.hostsPerLeaf * len(f.leaves) }
