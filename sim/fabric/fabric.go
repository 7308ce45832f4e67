package fabric

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/timing"
)

// Config describes a fabric: one kind of link for every host, and the
// switch.
type Config struct {
	// Link is each host's link to the switch, used in both directions.
	Link timing.WireConfig
	// MTU is the largest frame, IP header through ICRC, the links carry;
	// 0 means link.MaxFrame. Longer frames are dropped at the sender.
	MTU int
	// HostBufferBytes limits each NIC's egress queue; 0 is unlimited (a
	// NIC model normally paces itself to its port instead).
	HostBufferBytes int
	// Switch configures the switch's output ports.
	Switch SwitchConfig
}

// SwitchConfig describes the output-queued switch.
type SwitchConfig struct {
	// BufferBytes limits each output port's queue (tail drop beyond);
	// 0 is unlimited.
	BufferBytes int
	// Latency is the forwarding delay between a frame's arrival and its
	// enqueue at the output port.
	Latency sim.Time
	// ECN marks frames at the output ports.
	ECN ECNConfig
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
	if e := c.Switch.ECN; e.Enabled && (e.MinBytes < 0 || e.MaxBytes < e.MinBytes || !(e.MaxProbability > 0 && e.MaxProbability <= 1)) {
		return fmt.Errorf("fabric: ECN thresholds %d..%d bytes with probability %v are inconsistent", e.MinBytes, e.MaxBytes, e.MaxProbability)
	}
	return nil
}

// Fabric is a set of hosts attached to one output-queued switch, in
// virtual time. It is driven by the Sim it was created with and, like it,
// is not safe for concurrent use.
type Fabric struct {
	s     *sim.Sim
	cfg   Config
	hosts []*Port
	addrs map[netip.Addr]HostID
	// started is set by the first frame sent; direct then tells whether
	// the switch forwards frames when they are sent (two hosts) or at
	// their arrival events.
	started, direct bool
}

// Event kinds of the fabric (sim.Event.Kind); Arg is the host.
const (
	// kindAtSwitch: the oldest frame on host Arg's uplink reaches the
	// switch.
	kindAtSwitch int32 = iota
	// kindAtHost: the oldest frame on the switch's port to host Arg
	// reaches the host.
	kindAtHost
)

// New returns a fabric without hosts, driven by s.
func New(s *sim.Sim, cfg Config) (*Fabric, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.MTU == 0 {
		cfg.MTU = link.MaxFrame
	}
	return &Fabric{s: s, cfg: cfg, addrs: make(map[netip.Addr]HostID)}, nil
}

// ErrAddrInUse is returned by AddHost for an address that already has a
// host.
var ErrAddrInUse = errors.New("fabric: address already has a host")

// AddHost attaches a host with IP address addr (IPv4 or IPv6; frames are
// routed by their IP destination) to a new switch port, and returns its
// port: the NIC's link.
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
	id := HostID(len(f.hosts))
	p := &Port{
		f:    f,
		id:   id,
		addr: addr,
		up:   newEgress(f.cfg.Link, f.cfg.HostBufferBytes, ECNConfig{}),
		down: newEgress(f.cfg.Link, f.cfg.Switch.BufferBytes, f.cfg.Switch.ECN),
	}
	f.hosts = append(f.hosts, p)
	f.addrs[addr] = id
	return p, nil
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

// send puts a frame on host p's uplink at time at (now or later, not
// before the port's previous frame).
//
// With two hosts, each switch output port has one input (the other host;
// a host's frames to itself aside), so frames reach it in the order they
// were sent and the switch can forward a frame at once, at its computed
// arrival time, without an arrival event: the same result for one event
// per frame less. The uplink then keeps only the frame's length, for its
// occupancy; the entry is dropped once the frame has arrived. (A frame a
// host sends to itself is the exception: it queues at its own output port
// behind the other host's frames already forwarded, even those that reach
// the switch after it.) With more hosts, frames from several
// inputs meet at an output port, and the arrival event puts them in
// time order.
func (f *Fabric) send(p *Port, at sim.Time, fr Frame) bool {
	if !f.started {
		f.started, f.direct = true, len(f.hosts) == 2
	}
	if f.direct {
		for p.up.q.len() > 0 && p.up.q.at(0).arrive <= at {
			p.up.pop()
		}
		lenOnly := Frame{Len: fr.Len}
		arrive, ok := p.up.enqueue(at, lenOnly, nil)
		if ok {
			f.forwardAt(arrive, fr)
		}
		return ok
	}
	arrive, ok := p.up.enqueue(at, fr, nil)
	if !ok {
		return false
	}
	if !p.up.armed {
		p.up.armed = true
		f.s.At(arrive, f, kindAtSwitch, uint64(p.id))
	}
	return true
}

// Handle moves the oldest frame of the egress named by the event to the
// next hop, and arms the egress for its next frame.
func (f *Fabric) Handle(s *sim.Sim, ev sim.Event) {
	p := f.hosts[ev.Arg]
	e := p.up
	if ev.Kind == kindAtHost {
		e = p.down
	}
	if at := e.q.at(0).arrive; at != s.Now() {
		panic(fmt.Sprintf("fabric: frame due at %v delivered at %v", at, s.Now()))
	}
	fr := e.pop()
	e.armed = false
	if e.q.len() > 0 {
		e.armed = true
		s.At(e.q.at(0).arrive, f, ev.Kind, ev.Arg)
	}
	if ev.Kind == kindAtSwitch {
		f.forward(fr)
	} else {
		p.deliver(fr)
	}
}

// forward enqueues a frame that has fully arrived at the switch on the
// output port of its destination.
func (f *Fabric) forward(fr Frame) { f.forwardAt(f.s.Now(), fr) }

// forwardAt is forward for a frame that arrives at the switch at time at.
func (f *Fabric) forwardAt(at sim.Time, fr Frame) {
	dst := f.hosts[fr.Dst]
	at += f.cfg.Switch.Latency
	arrive, ok := dst.down.enqueue(at, fr, f.s.Rand())
	if !ok {
		if fr.Buf != nil {
			fr.Buf.Release()
		}
		return
	}
	if !dst.down.armed {
		dst.down.armed = true
		f.s.At(arrive, f, kindAtHost, uint64(fr.Dst))
	}
}

// KindName names the fabric's events in traces.
func (f *Fabric) KindName(kind int32) string {
	switch kind {
	case kindAtSwitch:
		return "at-switch"
	case kindAtHost:
		return "at-host"
	}
	return fmt.Sprint(kind)
}
