// Package rnic is a software RDMA NIC: the verbs of libibverbs, in Go, on
// a NIC built the way a hardware RNIC is built (doorbells and an arbiter,
// SRAM caches for QP contexts and translation entries, an address
// translation unit, a DMA engine cluster, a RoCEv2 protocol engine) that
// really moves data between NICs, over an in-process link (link/mem) or
// real networks (link/udp).
//
// The objects and their life cycle follow libibverbs:
//
//	dev, _ := rnic.Open(rnic.Options{Link: port})   // dev owns port; dev.Close closes it
//	pd, _ := dev.AllocPD()
//	mr, _ := pd.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite)
//	cq, _ := dev.CreateCQ(256)
//	qp, _ := pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: ...})
//	cp := rnic.ConnParams{Access: rnic.AccessRemoteWrite}
//	peer, _ := rnic.Exchange(ctx, conn, rnic.PeerInfo{Endpoint: qp.Endpoint(cp), Regions: ...})
//	qp.Connect(peer.Endpoint, cp)                    // or Modify through INIT, RTR, RTS
//	qp.PostSend(rnic.SendWR{Opcode: rnic.WRRDMAWrite, ...})
//	n, err := cq.Wait(ctx, wcs)                      // or cq.Poll(wcs)
//
// Control-path calls return Go errors that name the problem; data-path
// failures arrive as completion statuses (WC.Status), as on an RNIC.
//
// Every object follows one rule for its end (see Device): the first Close,
// Dealloc, Dereg or Destroy frees it, any later call on it returns an
// error wrapping ErrClosed, and after Device.Close so does every call on
// every object of the device, while blocked waits wake. Zero values grant
// nothing: ConnParams{} gives the peer no remote rights, Access 0 is local
// read only.
//
// The types mirror libibverbs' (struct ibv_send_wr is SendWR, ibv_wc is
// WC, enum ibv_wc_status is WCStatus, …) with the same values; they are
// converted into the NIC's own at the boundary, one work request or
// completion at a time and without allocating, so the data path (PostSend,
// PostRecv, Poll, Wait) allocates nothing.
package rnic

import (
	"context"
	"errors"
	"fmt"
	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/hw/atu"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Options configure a device. Zero fields take the defaults of a
// mid-range RNIC (see DeviceAttr for the limits that result).
type Options struct {
	// Name is the device's name (ibv_get_device_name); "rnic0" if empty.
	Name string

	// Link is the network port: link/mem (in-process), link/udp (RoCEv2
	// over UDP 4791), or a wrapper such as link/sniff. Required, unless
	// Clock is set.
	//
	// Open takes the link over: from a successful Open until Close, the
	// device is the link's only user, and Close closes the link (every
	// link alike, whatever its kind; a wrapper closes what it wraps).
	// The caller must not send on it, attach to it or close it meanwhile.
	// A closed link cannot carry a new device, and Open refuses one
	// (link/mem and link/udp report it): open a new link. If Open fails,
	// the link stays the caller's, unchanged. A second Open on a link
	// that a device owns (itself, or through a wrapper that Unwraps to
	// it) fails with an error naming the link and its owner.
	Link link.Link

	// Addr is the NIC's IP address, its GID 0. If unset, the link's own
	// address is used when it has one (link/mem ports and link/udp do).
	Addr netip.Addr

	// MTU is the port's active MTU. 0: the largest RoCE MTU whose frames
	// fit the link (4096 on link/mem, 1024 on a 1500-byte network).
	MTU MTU

	// MaxQP, MaxCQ, MaxMR and MaxSRQ bound the objects the device holds
	// at once (0: 16384, 16384, 65536, 1024).
	MaxQP, MaxCQ, MaxMR, MaxSRQ int
	// MaxQPWR bounds a queue's work requests (max_qp_wr; 0: 16384),
	// MaxSGE the SGEs of one work request (max_sge; 0: 32), MaxInline a
	// send's inline bytes (max_inline_data; 0: 256).
	MaxQPWR, MaxSGE, MaxInline int
	// MaxCQE bounds a CQ's entries (max_cqe; 0: 1<<20).
	MaxCQE int
	// PageSize is the default MTT page size of new memory regions
	// (4096 by default; 2 MiB models huge pages).
	PageSize int

	// Trace, if set, receives the protocol engine's debug log: NAKs,
	// retransmissions, protocol errors.
	Trace func(string)

	// Hardware sets the modelled hardware: SRAM cache sizes, DMA engines,
	// the arbiter. Zero fields take the defaults (DefaultHardware).
	Hardware Hardware

	// DCQCN, if set, turns on congestion control (see DCQCN;
	// DefaultDCQCN gives a starting point). A device of a VirtualClock
	// takes it from the clock's hardware profile instead (dcqcn.enabled).
	DCQCN *DCQCN

	// Publish makes the device visible to "rnic stat" until it closes
	// (see Device.Publish); Open fails if it cannot.
	Publish bool

	// Clock, if set, runs the device in virtual time: as a timing model
	// of the clock's hardware profile, on the clock's simulated fabric
	// (see VirtualClock; Link and Hardware must then be unset, and Addr
	// is assigned if unset). Nil: the wall clock.
	Clock *VirtualClock
}

// Hardware describes the NIC's internals. Each zero field takes its value
// from DefaultHardware, so a program can change one cache without
// restating the others.
type Hardware struct {
	// QPCCache caches QP contexts, CQCCache CQ contexts, MPTCache memory
	// protection entries (one per region or window) and MTTCache address
	// translation entries (one per page).
	QPCCache, CQCCache, MPTCache, MTTCache Cache
	// DMAEngines is the number of DMA engines that move payload (0: 4).
	DMAEngines int
	// Arbiter configures the scheduler that picks the next QP to send.
	Arbiter Arbiter
	// MaxUnackedPSNs is the requester's window per QP: packets sent and
	// not yet acknowledged (0: 128).
	MaxUnackedPSNs uint32
	// MaxQPRdAtom bounds max_rd_atomic and max_dest_rd_atomic: READs and
	// atomics outstanding per QP (0: 16).
	MaxQPRdAtom uint8
}

// Cache is the geometry of one set-associative SRAM cache with LRU
// replacement; a miss reads the entry from the host's table over PCIe.
type Cache struct {
	// CapacityBytes is the SRAM size (0: the default). Negative disables
	// the cache: every lookup misses.
	CapacityBytes int
	// EntryBytes is the size of one entry in SRAM and of the read that
	// fetches it on a miss (0: the default, QPC 256, CQC 64, MPT 64,
	// MTT 8).
	EntryBytes int
	// Ways is the associativity (0: the default, 8). Negative, or at
	// least the number of entries, makes the cache fully associative.
	Ways int
}

// Arbiter configures the send scheduler: strict priority between levels,
// and inside a level round robin by packets (WRR) or by bytes (DWRR).
type Arbiter struct {
	// Levels is the number of strict-priority levels, 1..16 (0: 8).
	Levels int
	// Mode is how one level shares service among its QPs (the zero value
	// is DWRR).
	Mode ArbiterMode
	// Quantum is, in DWRR, the bytes a QP may send per round, 1..65536
	// (0: 65536). Ignored in WRR.
	Quantum int
	// BurstLimit is the most packets one QP sends in one turn, 1..65536
	// (0: 16).
	BurstLimit int
}

// ArbiterMode selects how one arbiter level shares service among its QPs.
type ArbiterMode uint8

const (
	// ArbiterDWRR is deficit weighted round robin by bytes: a QP of large
	// packets gets no more bandwidth than one of small packets.
	ArbiterDWRR ArbiterMode = 0
	// ArbiterWRR is weighted round robin by packets, the cheap arbiter of
	// simple NICs.
	ArbiterWRR ArbiterMode = 1
)

// String returns "DWRR" or "WRR".
func (m ArbiterMode) String() string {
	switch m {
	case ArbiterDWRR:
		return "DWRR"
	case ArbiterWRR:
		return "WRR"
	}
	return "ArbiterMode(" + strconv.Itoa(int(m)) + ")"
}

// DefaultHardware returns the hardware a zero Hardware stands for.
func DefaultHardware() Hardware {
	var c transport.CoreConfig
	c.Defaults()
	geo := func(k cache.Config) Cache {
		return Cache{CapacityBytes: k.CapacityBytes, EntryBytes: k.EntryBytes, Ways: k.Ways}
	}
	return Hardware{
		QPCCache: geo(c.QPCCache), CQCCache: geo(c.CQCCache), MPTCache: geo(c.MPTCache), MTTCache: geo(c.MTTCache),
		DMAEngines: c.DMAEngines,
		Arbiter: Arbiter{Levels: c.Arbiter.Levels, Mode: arbiterMode(c.Arbiter.Mode),
			Quantum: c.Arbiter.Quantum, BurstLimit: c.Arbiter.BurstLimit},
		MaxUnackedPSNs: transport.DefaultMaxUnackedPSNs,
		MaxQPRdAtom:    c.MaxQPRdAtom,
	}
}

func arbiterMode(m sched.Mode) ArbiterMode {
	if m == sched.WRR {
		return ArbiterWRR
	}
	return ArbiterDWRR
}

// config fills h's zero fields from the defaults and converts it into
// the NIC's core configuration.
func (h Hardware) config(c *transport.CoreConfig) error {
	def := DefaultHardware()
	var defs transport.CoreConfig
	defs.Defaults()
	conv := func(name string, g, d Cache, named cache.Config) (cache.Config, error) {
		out := cache.Config{Name: named.Name, CapacityBytes: d.CapacityBytes, EntryBytes: d.EntryBytes, Ways: d.Ways}
		switch {
		case g.CapacityBytes < 0:
			out.CapacityBytes = 0 // disabled
		case g.CapacityBytes > 0:
			out.CapacityBytes = g.CapacityBytes
		}
		if g.EntryBytes < 0 {
			return out, fmt.Errorf("rnic: Hardware.%s.EntryBytes %d is negative", name, g.EntryBytes)
		}
		if g.EntryBytes > 0 {
			out.EntryBytes = g.EntryBytes
		}
		switch {
		case g.Ways < 0:
			out.Ways = 0 // fully associative
		case g.Ways > 0:
			out.Ways = g.Ways
		}
		return out, nil
	}
	var err error
	if c.QPCCache, err = conv("QPCCache", h.QPCCache, def.QPCCache, defs.QPCCache); err != nil {
		return err
	}
	if c.CQCCache, err = conv("CQCCache", h.CQCCache, def.CQCCache, defs.CQCCache); err != nil {
		return err
	}
	if c.MPTCache, err = conv("MPTCache", h.MPTCache, def.MPTCache, defs.MPTCache); err != nil {
		return err
	}
	if c.MTTCache, err = conv("MTTCache", h.MTTCache, def.MTTCache, defs.MTTCache); err != nil {
		return err
	}
	if h.DMAEngines < 0 {
		return fmt.Errorf("rnic: Hardware.DMAEngines %d is negative", h.DMAEngines)
	}
	c.DMAEngines = h.DMAEngines // 0: the NIC's default
	a, d := h.Arbiter, def.Arbiter
	c.Arbiter = sched.Config{Levels: d.Levels, Mode: sched.DWRR, Quantum: d.Quantum, BurstLimit: d.BurstLimit}
	if a.Levels != 0 {
		c.Arbiter.Levels = a.Levels
	}
	switch a.Mode {
	case ArbiterDWRR:
	case ArbiterWRR:
		c.Arbiter.Mode = sched.WRR
	default:
		return fmt.Errorf("rnic: Hardware.Arbiter.Mode %v is neither DWRR nor WRR", a.Mode)
	}
	if a.Quantum != 0 {
		c.Arbiter.Quantum = a.Quantum
	}
	if a.BurstLimit != 0 {
		c.Arbiter.BurstLimit = a.BurstLimit
	}
	c.MaxUnackedPSNs, c.MaxQPRdAtom = h.MaxUnackedPSNs, h.MaxQPRdAtom
	return nil
}

// Device is an open RNIC (struct ibv_context).
//
// Closing and destroying follow one rule for every object (Device, PD,
// MR, MW, CQ, QP, SRQ, AH): the first Close, Dealloc, Dereg or Destroy
// frees the object, and any later call on it, a second Close or Destroy
// included, returns an error wrapping ErrClosed. After Device.Close every
// call on the device and on every object it holds returns such an error,
// and a CQ.Wait or GetAsyncEvent that is blocked wakes with it.
// Accessors of fixed properties (Name, Attr, GID, QPN, LKey, Handle, …)
// keep answering, and Counters keeps returning the final counts.
type Device struct {
	d     device.Driver
	atu   *atu.ATU
	qpt   *transport.Table[transport.QP]
	cqt   *transport.Table[transport.CQ]
	aht   *transport.AHTable
	clock *VirtualClock // nil: the wall clock
	name  string
	attr  DeviceAttr
	link  link.Link

	mu     sync.Mutex
	pds    map[*PD]struct{}
	pdns   map[uint32]bool // the numbers of the live PDs
	cqs    map[*CQ]struct{}
	closed atomic.Bool   // set under mu
	done   chan struct{} // closed by Close

	nextPD atomic.Uint32
	srqSeq atomic.Uint32

	gids   [gidTableLen]GIDEntry // the port's GID table (gid.go)
	netdev link.Netdev           // the interface the link is bound to (empty: none, link/mem)
}

func (d *Device) nextSRQ() uint32 { return d.srqSeq.Add(1) }

// DeviceAttr are a device's limits (struct ibv_device_attr).
type DeviceAttr struct {
	FWVer           string    // fw_ver
	MaxMRSize       uint64    // max_mr_size: the largest region
	PageSizeCap     uint64    // page_size_cap: the MTT page sizes supported, one bit each
	MaxQP           int       // max_qp
	MaxQPWR         int       // max_qp_wr: work requests per queue
	MaxSGE          int       // max_sge: SGEs per work request
	MaxCQ           int       // max_cq
	MaxCQE          int       // max_cqe: entries per CQ
	MaxMR           int       // max_mr
	MaxPD           int       // max_pd
	MaxQPRdAtom     int       // max_qp_rd_atom: READs/atomics a QP accepts outstanding (max_dest_rd_atomic)
	MaxQPInitRdAtom int       // max_qp_init_rd_atom: READs/atomics a QP may have outstanding (max_rd_atomic)
	MaxSRQ          int       // max_srq
	MaxSRQWR        int       // max_srq_wr
	MaxSRQSGE       int       // max_srq_sge
	MaxInlineData   int       // the largest inline send (in ibv_qp_cap, not in ibv_device_attr)
	MaxMsgSize      uint64    // max_msg_sz (ibv_port_attr): 2 GiB
	AtomicCap       AtomicCap // atomic_cap
	ActiveMTU       MTU       // active_mtu (ibv_port_attr)
	GIDTableLen     int       // gid_tbl_len (ibv_port_attr)
	ActiveSpeed     PortSpeed // active_speed (ibv_port_attr): from the netdev's speed, as rxe's
	ActiveWidth     PortWidth // active_width (ibv_port_attr)
}

// PortSpeed is a port's lane speed (ibv_port_attr's active_speed).
type PortSpeed uint8

// PortWidth is a port's lane count (ibv_port_attr's active_width).
type PortWidth uint8

// The speeds and widths a port reports (IBA 14.2.5.6, as libibverbs
// numbers them).
const (
	SpeedSDR   PortSpeed = 1  // 2.5 Gb/s per lane
	SpeedDDR   PortSpeed = 2  // 5 Gb/s
	SpeedQDR   PortSpeed = 4  // 10 Gb/s
	SpeedFDR10 PortSpeed = 8  // 10.3125 Gb/s
	SpeedFDR   PortSpeed = 16 // 14.0625 Gb/s
	SpeedEDR   PortSpeed = 32 // 25.78125 Gb/s

	Width1X PortWidth = 1
	Width4X PortWidth = 2
)

// portRate is the speed and width a RoCE port reports for a netdev of
// speedMbps, as Linux's ib_get_eth_speed maps an Ethernet speed (Linux
// 6.1, what rxe reports on Debian 12); an unknown speed (0: loopback)
// counts as 1 Gb/s, as there.
func portRate(speedMbps int) (PortSpeed, PortWidth) {
	if speedMbps <= 0 {
		speedMbps = 1000
	}
	switch {
	case speedMbps <= 1000:
		return SpeedSDR, Width1X
	case speedMbps <= 10000:
		return SpeedFDR10, Width1X
	case speedMbps <= 20000:
		return SpeedDDR, Width4X
	case speedMbps <= 25000:
		return SpeedEDR, Width1X
	case speedMbps <= 40000:
		return SpeedFDR10, Width4X
	}
	return SpeedEDR, Width4X
}

// AtomicCap says how atomic operations are atomic (enum ibv_atomic_cap).
type AtomicCap uint8

const (
	AtomicNone AtomicCap = 0 // IBV_ATOMIC_NONE: atomics are not supported
	AtomicHCA  AtomicCap = 1 // IBV_ATOMIC_HCA: atomic with respect to this NIC's other atomics
	AtomicGlob AtomicCap = 2 // IBV_ATOMIC_GLOB: atomic with respect to the CPUs too
)

// ErrClosed is wrapped by every error from a call on a closed device, or
// on an object that was closed, destroyed, deallocated or deregistered,
// including a second Close or Destroy.
var ErrClosed = errors.New("rnic: closed")

// ErrBusy is wrapped when an object cannot be destroyed while others use it.
var ErrBusy = errors.New("rnic: resource busy")

// Open starts a device on a link, or, with Options.Clock, on a virtual
// clock's fabric. The device runs on a driver of the device layer
// (internal/device): the wall clock's, or the virtual clock's.
func Open(o Options) (*Device, error) {
	if o.Clock != nil {
		return o.openVirtual()
	}
	if o.Link == nil {
		return nil, errors.New("rnic: Options.Link is required")
	}
	addr := o.Addr
	if !addr.IsValid() {
		if a, ok := link.Find[link.Addresser](o.Link); ok {
			addr = a.Addr()
		}
	}
	if !addr.IsValid() {
		return nil, errors.New("rnic: Options.Addr is required for a link without an address")
	}
	if o.Name == "" {
		o.Name = "rnic0"
	}
	cfg, err := o.deviceConfig()
	if err != nil {
		return nil, err
	}
	cfg.Addr = addr.Unmap()
	if o.DCQCN != nil {
		cfg.DCQCN = o.DCQCN.engine()
		if err := cfg.DCQCN.Validate(); err != nil {
			return nil, fmt.Errorf("rnic: Options.%w", err)
		}
	}
	if err := o.Hardware.config(&cfg.Core); err != nil {
		return nil, err
	}
	dev := &Device{name: o.Name, link: o.Link, pds: make(map[*PD]struct{}), pdns: make(map[uint32]bool), cqs: make(map[*CQ]struct{}), done: make(chan struct{})}
	// Claim the link before the NIC attaches to it: attaching a second
	// NIC would silently take the first one's frames.
	if err := claimLink(o.Link, dev); err != nil {
		return nil, err
	}
	d, n, err := device.OpenWall(cfg, o.Link)
	if err != nil {
		releaseLink(o.Link, dev)
		return nil, fmt.Errorf("rnic: Open: %w", err)
	}
	dev.d, dev.atu, dev.qpt, dev.cqt, dev.aht = d, n.ATU, n.QPs, n.CQs, n.AHs
	if n, ok := link.Find[link.Netdever](o.Link); ok {
		dev.netdev = n.Netdev()
	}
	dev.gids = gidTable(GID(n.GID), dev.netdev.HardwareAddr)
	dev.setAttr(n.Core, n.MTU)
	dev.attr.ActiveSpeed, dev.attr.ActiveWidth = portRate(dev.netdev.SpeedMbps)
	if o.Publish {
		if err := dev.Publish(); err != nil {
			dev.Close()
			return nil, err
		}
	}
	addDevice(dev)
	return dev, nil
}

// setAttr fills the device's attributes from its core's configuration.
func (dev *Device) setAttr(c transport.CoreConfig, mtu wire.MTU) {
	dev.attr = DeviceAttr{
		FWVer:       "rnic " + Version,
		MaxMRSize:   1 << 40,
		PageSizeCap: 1<<12 | 1<<21 | 1<<30,
		MaxQP:       c.MaxQP, MaxQPWR: c.MaxQPWR, MaxSGE: c.MaxSGE,
		MaxCQ: c.MaxCQ, MaxCQE: c.MaxCQE, MaxMR: c.MaxMR, MaxPD: 1 << 20,
		MaxQPRdAtom: int(c.MaxQPRdAtom), MaxQPInitRdAtom: int(c.MaxQPRdAtom),
		MaxSRQ: c.MaxSRQ, MaxSRQWR: c.MaxSRQWR, MaxSRQSGE: c.MaxSGE,
		MaxInlineData: c.MaxInline, MaxMsgSize: transport.MaxMsgSize,
		AtomicCap: AtomicHCA, ActiveMTU: MTU(mtu), GIDTableLen: gidTableSize,
	}
}

// deviceConfig returns the description of the NIC both clocks take from
// the options alike: its name, MTU, limits and page size.
func (o *Options) deviceConfig() (device.Config, error) {
	shift, err := o.checkShape()
	if err != nil {
		return device.Config{}, err
	}
	return device.Config{Name: o.Name, MTU: wire.MTU(o.MTU), Trace: o.Trace,
		Core: transport.CoreConfig{
			MaxQP: o.MaxQP, MaxCQ: o.MaxCQ, MaxMR: o.MaxMR, MaxSRQ: o.MaxSRQ,
			MaxQPWR: o.MaxQPWR, MaxSGE: o.MaxSGE, MaxInline: o.MaxInline, MaxCQE: o.MaxCQE,
			PageShift: shift,
		}}, nil
}

// checkShape checks the options both clocks take alike (MTU, PageSize)
// and returns the page size as a shift (0: the default).
func (o *Options) checkShape() (pageShift uint8, err error) {
	if o.MTU != 0 && (o.MTU < MTU256 || o.MTU > MTU4096) {
		return 0, fmt.Errorf("rnic: MTU %d is not an ibv_mtu value", o.MTU)
	}
	if o.PageSize == 0 {
		return 0, nil
	}
	shift, ok := log2(o.PageSize)
	if !ok || shift < 12 || shift > 30 {
		return 0, fmt.Errorf("rnic: PageSize %d is not a power of two in [4 KiB, 1 GiB]", o.PageSize)
	}
	return shift, nil
}

// owners maps every link that an open device owns, and every link such a
// link wraps, to its device.
var owners = struct {
	sync.Mutex
	m map[link.Link]*Device
}{m: map[link.Link]*Device{}}

// chain returns l and the links it wraps (link/sniff's Unwrap).
func chain(l link.Link) []link.Link {
	var out []link.Link
	for l != nil && len(out) < 16 {
		out = append(out, l)
		u, ok := l.(interface{ Unwrap() link.Link })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	return out
}

// claimLink makes d the owner of l and of every link l wraps. It refuses a
// link that another device owns or that was closed (link/mem and
// link/udp say so), since a NIC on it would send nothing.
func claimLink(l link.Link, d *Device) error {
	ls := chain(l)
	for _, k := range ls {
		if c, ok := k.(interface{ Closed() bool }); ok && c.Closed() {
			return fmt.Errorf("rnic: Open %q: link %s is closed (Device.Close closes its link: open a new link for a new device)", d.name, describeLink(k))
		}
	}
	ls = slices.DeleteFunc(ls, func(k link.Link) bool { return !reflect.ValueOf(k).Comparable() }) // cannot be map keys
	owners.Lock()
	defer owners.Unlock()
	for _, k := range ls {
		if o, ok := owners.m[k]; ok {
			return fmt.Errorf("rnic: Open %q: link %s is already owned by device %q (one device per link: close %q first, or give each device its own link)",
				d.name, describeLink(k), o.name, o.name)
		}
	}
	for _, k := range ls {
		owners.m[k] = d
	}
	return nil
}

func releaseLink(l link.Link, d *Device) {
	owners.Lock()
	defer owners.Unlock()
	for _, k := range chain(l) {
		if reflect.ValueOf(k).Comparable() && owners.m[k] == d {
			delete(owners.m, k)
		}
	}
}

// describeLink names a link by its type and, when it has one, its address.
func describeLink(l link.Link) string {
	s := fmt.Sprintf("%T", l)
	if a, ok := l.(link.Addresser); ok && a.Addr().IsValid() {
		s += " " + a.Addr().String()
	}
	return s
}

func log2(n int) (uint8, bool) {
	if n <= 0 || n&(n-1) != 0 {
		return 0, false
	}
	s := uint8(0)
	for n > 1 {
		n >>= 1
		s++
	}
	return s, true
}

// Name returns the device's name.
func (d *Device) Name() string { return d.name }

// Netdev returns the network interface the device's link is bound to (as
// rxe is bound to one: its name, index, MAC, MTU and speed), and false
// for a link that has none (link/mem).
func (d *Device) Netdev() (link.Netdev, bool) { return d.netdev, d.netdev.Name != "" }

// Attr returns the device's limits (ibv_query_device).
func (d *Device) Attr() DeviceAttr { return d.attr }

// Close stops the device and closes its link (see Options.Link). Work in
// flight is abandoned; every object of the device becomes unusable (calls
// on them return errors wrapping ErrClosed) and blocked CQ.Wait and
// GetAsyncEvent calls return. Closing again returns an error wrapping
// ErrClosed. The error of the first Close is the link's.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		return d.errClosed()
	}
	d.closed.Store(true)
	openDevices.Lock()
	openDevices.l = slices.DeleteFunc(openDevices.l, func(x *Device) bool { return x == d })
	openDevices.Unlock()
	cqs := make([]*CQ, 0, len(d.cqs))
	for cq := range d.cqs {
		cqs = append(cqs, cq)
	}
	d.mu.Unlock()
	d.unpublish()
	err := d.d.Close() // the engine has stopped when it returns
	releaseLink(d.link, d)
	close(d.done)
	tcqs := make([]*transport.CQ, len(cqs))
	for i, cq := range cqs {
		cq.c.Shutdown(d.errClosed())
		tcqs[i] = cq.c
	}
	d.d.Closed(tcqs) // what waits on them wakes and finds them closed
	return err
}

// openDevices are the process's open devices on the wall clock, for
// Devices.
var openDevices struct {
	sync.Mutex
	l []*Device
}

// Devices returns the devices this process has open (on the wall clock,
// in the order they were opened): what a connection manager picks from
// for an address, as librdmacm picks among the host's devices.
func Devices() []*Device {
	openDevices.Lock()
	defer openDevices.Unlock()
	return slices.Clone(openDevices.l)
}

func addDevice(d *Device) {
	openDevices.Lock()
	openDevices.l = append(openDevices.l, d)
	openDevices.Unlock()
}

// usable returns nil while the device is open, and its ErrClosed error
// after Close.
func (d *Device) usable() error {
	if d.closed.Load() {
		return d.errClosed()
	}
	return nil
}

func (d *Device) errClosed() error {
	return fmt.Errorf("%w: device %q was closed", ErrClosed, d.name)
}

// AsyncEvent is an asynchronous event (struct ibv_async_event): its type
// and the object it concerns (one of QP, CQ, SRQ; nil otherwise).
type AsyncEvent struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
}

// GetAsyncEvent waits for the next asynchronous event
// (ibv_get_async_event), for ctx to end, or for the device to close.
func (d *Device) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	if err := d.usable(); err != nil {
		return AsyncEvent{}, err
	}
	ev, err := d.d.WaitEvent(ctx, d.done)
	switch {
	case errors.Is(err, device.ErrClosed):
		return AsyncEvent{}, d.errClosed()
	case err != nil:
		return AsyncEvent{}, err
	}
	return asyncEvent(ev), nil
}

// openVirtual starts a device on o.Clock's fabric: its NIC is the
// clock's driver's.
func (o Options) openVirtual() (*Device, error) {
	switch {
	case o.Link != nil:
		return nil, errors.New("rnic: Open: Options.Link and Options.Clock exclude each other (a virtual-time device is on its clock's fabric)")
	case o.Hardware != (Hardware{}):
		return nil, errors.New("rnic: Open: with Options.Clock the hardware is the clock's profile; leave Options.Hardware unset")
	case o.Publish:
		return nil, errors.New("rnic: Open: a virtual-time device cannot be published (rnic stat reads real-time devices)")
	case o.DCQCN != nil:
		return nil, errors.New("rnic: Open: with Options.Clock congestion control is the clock's profile's (dcqcn.enabled); leave Options.DCQCN unset")
	}
	cfg, err := o.deviceConfig()
	if err != nil {
		return nil, err
	}
	cfg.Addr = o.Addr
	drv, n, err := o.Clock.c.Open(cfg)
	if err != nil {
		return nil, err
	}
	dev := &Device{d: drv, atu: n.ATU, qpt: n.QPs, cqt: n.CQs, aht: n.AHs, clock: o.Clock, name: n.Name,
		pds: make(map[*PD]struct{}), pdns: make(map[uint32]bool), cqs: make(map[*CQ]struct{}), done: make(chan struct{})}
	dev.gids = gidTable(GID(n.GID), nil)
	dev.setAttr(n.Core, n.MTU)
	return dev, nil
}

// asyncEvent converts the engine's event into the API's.
func asyncEvent(ev transport.Event) AsyncEvent {
	a := AsyncEvent{Type: EventType(ev.Type)}
	if ev.QP != nil {
		a.QP, _ = ev.QP.Opaque.(*QP)
	}
	if ev.CQ != nil {
		a.CQ = cqOf(ev.CQ)
	}
	if ev.SRQ != nil {
		a.SRQ, _ = ev.SRQ.Opaque.(*SRQ)
	}
	return a
}

// route builds the outer headers for a destination GID from the port's
// GID table (source) and an address vector.
func (d *Device) route(ah *AHAttr) (wire.Route, error) {
	src, err := d.sourceGID(ah.SGIDIndex)
	if err != nil {
		return wire.Route{}, err
	}
	if ah.DGID == (GID{}) {
		return wire.Route{}, errors.New("rnic: address handle without a destination GID")
	}
	if ah.DGID.IsIPv4() != src.IsIPv4() {
		return wire.Route{}, fmt.Errorf("rnic: destination %v and source %v are of different IP versions", ah.DGID, src)
	}
	return wire.Route{Src: wire.GID(src), Dst: wire.GID(ah.DGID), TrafficClass: ah.TrafficClass, HopLimit: ah.HopLimit, FlowLabel: ah.FlowLabel}, nil
}

// AHAttr is an address vector (struct ibv_ah_attr with its GRH, struct
// ibv_global_route). RoCEv2 always carries a GRH: DGID is required.
type AHAttr struct {
	DGID         GID    // grh.dgid: the destination's GID (its IP address)
	SGIDIndex    uint8  // grh.sgid_index: the source GID's index: AddrGIDIndex (1), the port's address (see GIDTable)
	FlowLabel    uint32 // grh.flow_label: the IPv6 flow label (20 bits)
	HopLimit     uint8  // grh.hop_limit: the IP TTL / hop limit (0: 64)
	TrafficClass uint8  // grh.traffic_class: the IP DSCP and ECN bits
	SL           uint8  // sl: the service level
	PortNum      uint8  // port_num: 1 (a device has one port)
}
