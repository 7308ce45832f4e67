package fabric

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/timing"
)

// Config describes a fabric: one kind of link for every host, the
// switches, and how they are wired.
type Config struct {
	// Link is each host's link to its switch, used in both directions.
	Link timing.WireConfig
	// MTU is the largest frame, IP header through ICRC, the links carry;
	// 0 means link.MaxFrame. Longer frames are dropped at the sender.
	MTU int
	// HostBufferBytes limits each NIC's egress queue; 0 is unlimited (a
	// NIC model normally paces itself to its port instead).
	HostBufferBytes int
	// Switch configures every switch.
	Switch SwitchConfig
	// Topology wires the switches; the zero value is one switch.
	Topology TopologyConfig
}

// SwitchConfig describes the switches: output-queued, with either a
// buffer per output port or one buffer shared by all ports (as a
// Broadcom-style MMU manages it, with dynamic thresholds and PFC).
type SwitchConfig struct {
	// BufferBytes limits each output port's queue (tail drop beyond);
	// 0 is unlimited. Not used with a shared buffer.
	BufferBytes int
	// Latency is the forwarding delay between a frame's arrival and its
	// enqueue at the output port.
	Latency sim.Time
	// ECN marks frames at the output ports.
	ECN ECNConfig
	// SharedBufferBytes, if not 0, is one buffer for all of a switch's
	// ports, less the PFC headroom set aside per port and lossless
	// priority. A lossy queue may then hold up to EgressAlpha times the
	// free shared buffer (a dynamic threshold; 0 means only the buffer's
	// size limits it).
	SharedBufferBytes int
	EgressAlpha       float64
	// PriorityQueues keeps the eight priorities apart at every switch
	// port (strict priority, 7 first) even without PFC or a shared
	// buffer, which imply it.
	PriorityQueues bool
	// PFC makes priorities lossless (needs the shared buffer).
	PFC PFCConfig
}

// PFCConfig sets priority flow control (IEEE 802.1Qbb) in the switches.
// An ingress priority of a switch port pauses the transmitter upstream
// when its bytes in the shared buffer reach Alpha times the free shared
// buffer (or once it has spilled into headroom), and resumes it when it
// has no bytes in headroom and ResumeOffsetBytes under that threshold.
// While the pause travels, frames still in flight land in the priority's
// headroom (HeadroomBytes per port and priority, set aside from the
// shared buffer); a frame finding the headroom full is dropped and
// counted (QueueStats.HeadroomDrops): too little headroom for the link.
// Pauses hold until resumed (XOFF then XON, as switches send them).
// Hosts' NICs obey pauses but never send them.
type PFCConfig struct {
	Enabled bool
	// Priorities is the set of lossless priorities, bit p for priority p.
	Priorities        uint8
	Alpha             float64
	HeadroomBytes     int
	ResumeOffsetBytes int
}

func (c *Config) validate() error {
	if _, err := timing.NewWire(c.Link); err != nil {
		return err
	}
	switch {
	case c.MTU < 0 || c.MTU > link.BigFrame:
		return fmt.Errorf("fabric: MTU %d is not in [0, %d]", c.MTU, link.BigFrame)
	case c.HostBufferBytes < 0:
		return fmt.Errorf("fabric: HostBufferBytes %d is negative", c.HostBufferBytes)
	case c.Switch.BufferBytes < 0:
		return fmt.Errorf("fabric: Switch.BufferBytes %d is negative", c.Switch.BufferBytes)
	case c.Switch.Latency < 0:
		return fmt.Errorf("fabric: Switch.Latency %v is negative", c.Switch.Latency)
	}
	sw := &c.Switch
	switch {
	case sw.SharedBufferBytes < 0:
		return fmt.Errorf("fabric: SharedBufferBytes %d is negative", sw.SharedBufferBytes)
	case sw.SharedBufferBytes > 0 && sw.BufferBytes > 0:
		return errors.New("fabric: a switch has either a buffer per port or a shared buffer, not both")
	case !(sw.EgressAlpha >= 0) || sw.EgressAlpha > 1e6:
		return fmt.Errorf("fabric: EgressAlpha %v is not a non-negative number", sw.EgressAlpha)
	case sw.PFC.Enabled && sw.SharedBufferBytes == 0:
		return errors.New("fabric: PFC needs a shared buffer (SharedBufferBytes)")
	case sw.PFC.Enabled && sw.PFC.Priorities == 0:
		return errors.New("fabric: PFC is enabled on no priority")
	case sw.PFC.Enabled && !(sw.PFC.Alpha > 0 && sw.PFC.Alpha <= 1e6):
		return fmt.Errorf("fabric: PFC Alpha %v is not positive", sw.PFC.Alpha)
	case sw.PFC.HeadroomBytes < 0 || sw.PFC.ResumeOffsetBytes < 0:
		return errors.New("fabric: PFC headroom and resume offset must not be negative")
	}
	if err := c.Topology.validate(); err != nil {
		return err
	}
	if e := c.Switch.ECN; e.Enabled && (e.MinBytes < 0 || e.MaxBytes < e.MinBytes || !(e.MaxProbability > 0 && e.MaxProbability <= 1)) {
		return fmt.Errorf("fabric: ECN thresholds %d..%d bytes with probability %v are inconsistent", e.MinBytes, e.MaxBytes, e.MaxProbability)
	}
	return nil
}

// Fabric is a set of hosts attached to switches, in virtual time. It is
// driven by the Sim it was created with and, like it, is not safe for
// concurrent use.
type Fabric struct {
	s            *sim.Sim
	cfg          Config
	hosts        []*Port
	addrs        map[netip.Addr]HostID
	switches     []*Switch
	leaves       []*Switch // the switches hosts attach to, in order
	hostsPerLeaf int       // 0: one leaf, no limit
	egresses     []*egress // by id
	// scheduled: the switches keep priorities apart (see egress).
	scheduled bool
	// started is set by the first frame sent; direct then tells whether
	// the switch forwards frames when they are sent (two hosts on one
	// analytic switch) or at their arrival events.
	started, direct bool
}

// Event kinds of the fabric (sim.Event.Kind).
const (
	// kindArrive: the oldest frame on the cable of egress Arg reaches the
	// far end (a switch port or a host).
	kindArrive int32 = iota
	// kindTxDone: the transmitter of scheduled egress Arg&0xffffffff
	// (generation Arg>>32) has sent its frame or may start one.
	kindTxDone
	// kindPFC: a PFC frame for priority Arg>>32&7 reaches egress
	// Arg&0xffffffff: a pause if bit 40 is set, else a resume.
	kindPFC
)

// New returns a fabric without hosts, driven by s.
func New(s *sim.Sim, cfg Config) (*Fabric, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.MTU == 0 {
		cfg.MTU = link.MaxFrame
	}
	sw := &cfg.Switch
	f := &Fabric{s: s, cfg: cfg, addrs: make(map[netip.Addr]HostID),
		scheduled: sw.SharedBufferBytes > 0 || sw.PFC.Enabled || sw.PriorityQueues}
	f.build()
	for i, l := range f.leaves {
		l.leaf = i
	}
	for _, x := range f.switches {
		x.hdrmAll = len(x.ports) * x.hdrmPerPort()
		if x.hdrmAll > 0 && x.hdrmAll >= sw.SharedBufferBytes {
			return nil, fmt.Errorf("fabric: %s: PFC headroom for %d ports (%d B) leaves nothing of the %d B shared buffer", x.name, len(x.ports), x.hdrmAll, sw.SharedBufferBytes)
		}
	}
	return f, nil
}

// newEgress adds an egress: a port of switch owner (nil for a host's
// uplink), numbered port there.
func (f *Fabric) newEgress(w timing.WireConfig, owner *Switch, port int32, limit int, ecn ECNConfig) *egress {
	e := newEgress(w, limit, ecn)
	e.id = int32(len(f.egresses))
	e.owner, e.port = owner, port
	// A host's uplink queues by priority only when PFC may pause it.
	if owner != nil && f.scheduled || owner == nil && f.cfg.Switch.PFC.Enabled {
		e.scheduled = true
		e.sched = &schedState{}
	}
	f.egresses = append(f.egresses, e)
	return e
}

// ErrAddrInUse is returned by AddHost for an address that already has a
// host.
var ErrAddrInUse = errors.New("fabric: address already has a host")

// ErrFull is returned by AddHost when every leaf port of the topology
// has a host.
var ErrFull = errors.New("fabric: every host port of the topology is taken")

// AddHost attaches a host with IP address addr (IPv4 or IPv6; frames are
// routed by their IP destination) to a new port of the next leaf switch,
// and returns its port: the NIC's link.
func (f *Fabric) AddHost(addr netip.Addr) (*Port, error) {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("fabric: invalid host address %v", addr)
	}
	if _, dup := f.addrs[addr]; dup {
		return nil, fmt.Errorf("%w: %v", ErrAddrInUse, addr)
	}
	if f.direct {
		return nil, ErrDirect
	}
	sw := f.leafFor(len(f.hosts))
	if sw == nil {
		return nil, fmt.Errorf("%w (%d hosts)", ErrFull, len(f.hosts))
	}
	id := HostID(len(f.hosts))
	p := &Port{f: f, id: id, addr: addr, sw: sw, swPort: int32(len(sw.ports))}
	p.up = f.newEgress(f.cfg.Link, nil, -1, f.cfg.HostBufferBytes, ECNConfig{})
	p.down = f.newEgress(f.cfg.Link, sw, p.swPort, f.cfg.Switch.BufferBytes, f.cfg.Switch.ECN)
	p.up.toSw, p.up.toPort = sw, p.swPort
	p.down.toHost = p
	sw.ports = append(sw.ports, swPort{out: p.down, in: p.up, host: p})
	if h := sw.hdrmAll + sw.hdrmPerPort(); h > 0 && h >= f.cfg.Switch.SharedBufferBytes {
		return nil, fmt.Errorf("fabric: %s: PFC headroom for %d ports (%d B) leaves nothing of the %d B shared buffer", sw.name, len(sw.ports)+1, h, f.cfg.Switch.SharedBufferBytes)
	}
	sw.hdrmAll += sw.hdrmPerPort()
	f.hosts = append(f.hosts, p)
	f.addrs[addr] = id
	return p, nil
}

// hdrmPerPort is the headroom one port sets aside.
func (s *Switch) hdrmPerPort() int {
	n := 0
	for p := range Priorities {
		if s.f.lossless(uint8(p)) {
			n++
		}
	}
	return n * s.f.cfg.Switch.PFC.HeadroomBytes
}

// ErrDirect is returned by AddHost once frames flow in a two-host fabric,
// which forwards them as they are sent (see send).
var ErrDirect = errors.New("fabric: a two-host fabric takes no more hosts once frames flow")

// Host returns the port of host id.
func (f *Fabric) Host(id HostID) *Port { return f.hosts[id] }

// Hosts returns the number of hosts.
func (f *Fabric) Hosts() int { return len(f.hosts) }

// Lookup returns the host with IP address addr.
func (f *Fabric) Lookup(addr netip.Addr) (HostID, bool) {
	id, ok := f.addrs[addr.Unmap().WithZone("")]
	return id, ok
}

// Sim returns the simulator driving the fabric.
func (f *Fabric) Sim() *sim.Sim { return f.s }

// Switches returns the number of switches.
func (f *Fabric) Switches() int { return len(f.switches) }

// SwitchName returns switch i's name (switch, leafN, spineN, edgeP.N,
// aggP.N, coreN).
func (f *Fabric) SwitchName(i int) string { return f.switches[i].name }

// SwitchPorts returns the number of ports of switch i.
func (f *Fabric) SwitchPorts(i int) int { return len(f.switches[i].ports) }

// SwitchPort returns the counters of port j of switch i: its egress,
// with the PFC frames its ingress sent upstream.
func (f *Fabric) SwitchPort(i, j int) PortStats {
	return f.switches[i].ports[j].out.stats(f.s.Now())
}

// PortPeer names what is at the far end of port j of switch i: a
// switch's name or "host N".
func (f *Fabric) PortPeer(i, j int) string {
	p := &f.switches[i].ports[j]
	if p.host != nil {
		return hostName(p.host.id)
	}
	return p.peer.name
}

// PortInfo names one egress port of the fabric and gives its counters.
type PortInfo struct {
	// Node is the switch's name, or "host N" for a host's uplink; Port
	// its number on the switch (0 for an uplink); Peer what is at the far
	// end of its cable.
	Node  string
	Port  int
	Peer  string
	Stats PortStats
}

// Ports returns every egress port: the switches' ports in order, then
// the hosts' uplinks.
func (f *Fabric) Ports() []PortInfo {
	var out []PortInfo
	for i, s := range f.switches {
		for j := range s.ports {
			out = append(out, PortInfo{Node: s.name, Port: j, Peer: f.PortPeer(i, j), Stats: f.SwitchPort(i, j)})
		}
	}
	for _, h := range f.hosts {
		out = append(out, PortInfo{Node: hostName(h.id), Peer: h.sw.name, Stats: h.UplinkStats()})
	}
	return out
}

// hostName names host id as Ports and PortPeer do.
func hostName(id HostID) string { return fmt.Sprintf("host %d", id) }

// PortName names an egress port as Ports does, NODE:PORT: a switch's
// name and its port number ("switch:0", "leaf1:3"), or "host N:0" for
// host N's uplink.
func PortName(node string, port int) string { return fmt.Sprintf("%s:%d", node, port) }

// WatchPort has fn told the depth of the named egress port's queue
// (bytes, the frame being sent included; PortName's names) each time it
// changes: a queue occupancy timeline of any port. Nil stops it. Hosts
// attached later are not found.
func (f *Fabric) WatchPort(name string, fn func(at sim.Time, bytes int)) error {
	for _, s := range f.switches {
		for j := range s.ports {
			if PortName(s.name, j) == name {
				s.ports[j].out.watch = fn
				return nil
			}
		}
	}
	for _, h := range f.hosts {
		if PortName(hostName(h.id), 0) == name {
			h.up.watch = fn
			return nil
		}
	}
	var names []string
	for _, p := range f.Ports() {
		names = append(names, PortName(p.Node, p.Port))
	}
	if len(names) > 6 {
		names = append(names[:3], "…", names[len(names)-1])
	}
	return fmt.Errorf("fabric: no egress port %q (NODE:PORT, as the ports table names them: %s)", name, strings.Join(names, ", "))
}

// Totals sums the counters of every switch port (switches) and every
// host's uplink (uplinks).
func (f *Fabric) Totals() (switches, uplinks PortStats) {
	now := f.s.Now()
	for _, e := range f.egresses {
		if e.owner != nil {
			switches.add(e.stats(now))
		} else {
			uplinks.add(e.stats(now))
		}
	}
	return switches, uplinks
}

// send puts a frame on host p's uplink at time at (now or later, not
// before the port's previous frame).
//
// With two hosts on one analytic switch, each switch output port has one
// input (the other host; a host's frames to itself aside), so frames
// reach it in the order they were sent and the switch can forward a
// frame at once, at its computed arrival time, without an arrival event:
// the same result for one event per frame less. The uplink then keeps
// only the frame's length, for its occupancy; the entry is dropped once
// the frame has arrived. (A frame a host sends to itself is the
// exception: it queues at its own output port behind the other host's
// frames already forwarded, even those that reach the switch after it.)
// Otherwise frames from several inputs meet at an output port, and the
// arrival event puts them in time order.
func (f *Fabric) send(p *Port, at sim.Time, fr Frame) bool {
	if !f.started {
		f.started = true
		f.direct = len(f.hosts) == 2 && len(f.switches) == 1 && !f.scheduled
	}
	if f.direct {
		for p.up.q.len() > 0 && p.up.q.at(0).arrive <= at {
			p.up.pop()
		}
		lenOnly := Frame{Len: fr.Len, Prio: fr.Prio}
		arrive, ok := p.up.enqueue(at, lenOnly, nil)
		if ok {
			dst := f.hosts[fr.Dst]
			f.offerAnalytic(dst.down, arrive+f.cfg.Switch.Latency, fr)
		}
		return ok
	}
	if p.up.scheduled {
		at = max(at, p.up.last)
		p.up.last = at
		if p.up.limit > 0 && p.up.bufBytes+fr.Len > p.up.limit {
			p.up.countDrop(fr)
			return false
		}
		f.offer(p.up, queued{f: fr, ready: at, inPort: -1})
		return true
	}
	arrive, ok := p.up.enqueue(at, fr, nil)
	if !ok {
		return false
	}
	f.armArrival(p.up, arrive)
	return true
}

// Handle runs the fabric's events.
func (f *Fabric) Handle(s *sim.Sim, ev sim.Event) {
	e := f.egresses[uint32(ev.Arg)]
	switch ev.Kind {
	case kindTxDone:
		f.txDone(e, uint32(ev.Arg>>32))
		return
	case kindPFC:
		f.pfcArrive(e, uint8(ev.Arg>>32&7), ev.Arg&(1<<40) != 0)
		return
	}
	if at := e.q.at(0).arrive; at != s.Now() {
		panic(fmt.Sprintf("fabric: frame due at %v delivered at %v", at, s.Now()))
	}
	fr := e.pop()
	e.armed = false
	if e.q.len() > 0 {
		e.armed = true
		s.At(e.q.at(0).arrive, f, kindArrive, ev.Arg)
	}
	if e.toHost != nil {
		e.toHost.deliver(fr)
		return
	}
	f.receive(e.toSw, e.toPort, fr)
}

// KindName names the fabric's events in traces.
func (f *Fabric) KindName(kind int32) string {
	switch kind {
	case kindArrive:
		return "arrive"
	case kindTxDone:
		return "tx-done"
	case kindPFC:
		return "pfc"
	}
	return fmt.Sprint(kind)
}
