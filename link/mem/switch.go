package mem

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rnic/rnic/link"
)

// Errors returned when creating ports and closing them.
var (
	ErrAddrInUse = errors.New("mem: address already has a port")
	ErrClosed    = errors.New("mem: port already closed")
)

// Switch connects any number of ports, like an Ethernet switch that routes
// on the IP destination; it lets tests build topologies of more than two
// NICs. The routing table is copy-on-write, so Send reads it without a
// lock.
type Switch struct {
	mu    sync.Mutex            // serializes table changes
	table atomic.Pointer[table] // never mutated once stored
}

// table maps addresses to ports. A few ports (the common case) are
// scanned linearly, which is several times faster than hashing a
// netip.Addr; many ports use a map.
type table struct {
	routes []route
	big    map[netip.Addr]*Port // nil if len(routes) <= smallTable
}

type route struct {
	addr netip.Addr
	port *Port
}

// smallTable is the most ports scanned linearly.
const smallTable = 8

// newTable returns a table holding routes.
func newTable(routes []route) *table {
	if len(routes) <= smallTable {
		return &table{routes: routes}
	}
	m := make(map[netip.Addr]*Port, len(routes))
	for _, r := range routes {
		m[r.addr] = r.port
	}
	return &table{routes: routes, big: m}
}

// NewSwitch returns a switch with no ports.
func NewSwitch() *Switch {
	s := &Switch{}
	s.table.Store(newTable(nil))
	return s
}

// Option configures a port.
type Option func(*config)

type config struct {
	mtu    int
	buffer int
}

// WithMTU sets the largest frame the port sends (default link.MaxFrame);
// longer frames are dropped and counted as Oversize, as a real port would.
// n must be in [1, link.BigFrame].
func WithMTU(n int) Option { return func(c *config) { c.mtu = n } }

// WithBuffer makes the port lossy: at most n of its frames wait for a
// receiver that has no room, and the rest are dropped (Overflow), as a
// switch without PFC drops when its buffer is full; n = 0 drops whatever
// the receiver cannot take at once. By default a port is lossless: its
// frames wait, and its NIC is paused (see the package doc).
func WithBuffer(n int) Option { return func(c *config) { c.buffer = n } }

// Port adds a port with address addr (IPv4, IPv4-mapped IPv6 or IPv6; the
// zone is ignored) whose sent frames suffer faults f. It fails if addr is
// invalid or unspecified, already has a port, or f or an option is out of
// range. Closing the port frees the address.
func (s *Switch) Port(addr netip.Addr, f Faults, opts ...Option) (*Port, error) {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("mem: invalid port address %v", addr)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	cfg := config{mtu: link.MaxFrame, buffer: -1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mtu < 1 || cfg.mtu > link.BigFrame {
		return nil, fmt.Errorf("mem: MTU %d out of range [1, %d]", cfg.mtu, link.BigFrame)
	}
	if cfg.buffer < -1 {
		return nil, fmt.Errorf("mem: buffer of %d frames", cfg.buffer)
	}
	p := &Port{
		sw:     s,
		addr:   addr,
		mtu:    cfg.mtu,
		buffer: cfg.buffer,
		epoch:  time.Now(),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	p.setFaults(f)

	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.table.Load().routes
	if s.lookup(addr) != nil {
		return nil, fmt.Errorf("%w: %v", ErrAddrInUse, addr)
	}
	s.table.Store(newTable(append(old[:len(old):len(old)], route{addr, p})))
	return p, nil
}

// Pipe returns two ports, with addresses a and b, joined by a private
// switch: the common two-NIC case. Options apply to both.
func Pipe(a, b netip.Addr, fa, fb Faults, opts ...Option) (*Port, *Port, error) {
	s := NewSwitch()
	pa, err := s.Port(a, fa, opts...)
	if err != nil {
		return nil, nil, err
	}
	pb, err := s.Port(b, fb, opts...)
	if err != nil {
		pa.Close()
		return nil, nil, err
	}
	return pa, pb, nil
}

// lookup returns the port with address a, or nil.
func (s *Switch) lookup(a netip.Addr) *Port {
	t := s.table.Load()
	if t.big != nil {
		return t.big[a]
	}
	for i := range t.routes {
		if t.routes[i].addr == a {
			return t.routes[i].port
		}
	}
	return nil
}

// remove takes p out of the table, so its address routes nowhere.
func (s *Switch) remove(p *Port) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.table.Load().routes
	routes := make([]route, 0, len(old))
	for _, r := range old {
		if r.port != p {
			routes = append(routes, r)
		}
	}
	s.table.Store(newTable(routes))
}
