// Package rnic is a software RDMA NIC: the verbs of libibverbs, in Go, on
// a NIC built the way a hardware RNIC is built (doorbells and an arbiter,
// SRAM caches for QP contexts and translation entries, an address
// translation unit, a DMA engine cluster, a RoCEv2 protocol engine) that
// really moves data between NICs, over an in-process link (link/mem) or
// real networks.
//
// The objects and their life cycle follow libibverbs:
//
//	dev, _ := rnic.Open(rnic.Options{Link: port})
//	pd, _ := dev.AllocPD()
//	mr, _ := pd.RegMR(buf, rnic.AccessLocalWrite|rnic.AccessRemoteWrite)
//	cq, _ := dev.CreateCQ(256)
//	qp, _ := pd.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cq, RecvCQ: cq, Cap: ...})
//	qp.Connect(peer, rnic.ConnParams{})       // or Modify through INIT, RTR, RTS
//	qp.PostSend(rnic.SendWR{Opcode: rnic.WRRDMAWrite, ...})
//	n, _ := cq.Wait(ctx, wcs)
//
// Control-path calls return Go errors that name the problem; data-path
// failures arrive as completion statuses (WC.Status), as on an RNIC.
package rnic

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/internal/hw/cache"
	"github.com/rnic/rnic/internal/hw/sched"
	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// Options configure a device. Zero fields take the defaults of a
// mid-range RNIC (see DeviceAttr for the limits that result).
type Options struct {
	// Name is the device's name (ibv_get_device_name), e.g. "rnic0".
	Name string
	// Link is the network port. Required.
	Link link.Link
	// Addr is the NIC's IP address, its GID 0. If unset, the link's own
	// address is used when it has one (link/mem ports do).
	Addr netip.Addr
	// MTU is the port's active MTU (default 4096).
	MTU MTU

	MaxQP, MaxCQ, MaxMR, MaxSRQ int
	MaxQPWR, MaxSGE, MaxInline  int
	MaxCQE                      int
	// PageSize is the default MTT page size of new memory regions
	// (4096 by default; 2 MiB models huge pages).
	PageSize int

	// Trace, if set, receives the protocol engine's debug log: NAKs,
	// retransmissions, protocol errors.
	Trace func(string)

	// Hardware sets the modelled hardware: SRAM cache sizes, DMA engines,
	// the arbiter. Zero values take the defaults.
	Hardware Hardware

	// Publish makes the device visible to "rnic stat" until it closes
	// (see Device.Publish); Open fails if it cannot.
	Publish bool
}

// Hardware describes the NIC's internals.
type Hardware struct {
	QPCCache, CQCCache, MPTCache, MTTCache cache.Config
	DMAEngines                             int
	Arbiter                                sched.Config
	// MaxUnackedPSNs is the requester's window per QP.
	MaxUnackedPSNs uint32
	// MaxQPRdAtom bounds max_rd_atomic and max_dest_rd_atomic.
	MaxQPRdAtom uint8
}

// Device is an open RNIC (struct ibv_context).
type Device struct {
	d    *nic.Device
	name string
	attr DeviceAttr

	mu     sync.Mutex
	pds    map[*PD]struct{}
	closed bool

	nextPD atomic.Uint32
	srqSeq atomic.Uint32
}

func (d *Device) nextSRQ() uint32 { return d.srqSeq.Add(1) }

// DeviceAttr are a device's limits (struct ibv_device_attr).
type DeviceAttr struct {
	FWVer           string
	MaxMRSize       uint64
	PageSizeCap     uint64
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
	MaxInlineData   int
	MaxMsgSize      uint64
	AtomicCap       AtomicCap
	ActiveMTU       MTU
	GIDTableLen     int
}

// AtomicCap says how atomic operations are atomic (enum ibv_atomic_cap).
type AtomicCap uint8

const (
	AtomicNone AtomicCap = 0
	AtomicHCA  AtomicCap = 1 // atomic with respect to this NIC's other atomics
	AtomicGlob AtomicCap = 2
)

// ErrClosed is returned by calls on a closed device.
var ErrClosed = errors.New("rnic: device closed")

// ErrBusy is wrapped when an object cannot be destroyed while others use it.
var ErrBusy = errors.New("rnic: resource busy")

// Open starts a device on a link.
func Open(o Options) (*Device, error) {
	if o.Link == nil {
		return nil, errors.New("rnic: Options.Link is required")
	}
	addr := o.Addr
	if !addr.IsValid() {
		if a, ok := o.Link.(link.Addresser); ok {
			addr = a.Addr()
		}
	}
	if !addr.IsValid() {
		return nil, errors.New("rnic: Options.Addr is required for a link without an address")
	}
	cfg := nic.Config{
		Name: o.Name, Link: o.Link, Addr: addr.Unmap(), MTU: o.MTU,
		MaxQP: o.MaxQP, MaxCQ: o.MaxCQ, MaxMR: o.MaxMR, MaxSRQ: o.MaxSRQ,
		MaxQPWR: o.MaxQPWR, MaxSGE: o.MaxSGE, MaxInline: o.MaxInline, MaxCQE: o.MaxCQE,
		QPCCache: o.Hardware.QPCCache, CQCCache: o.Hardware.CQCCache,
		MPTCache: o.Hardware.MPTCache, MTTCache: o.Hardware.MTTCache,
		DMAEngines: o.Hardware.DMAEngines, Arbiter: o.Hardware.Arbiter,
		MaxUnackedPSNs: o.Hardware.MaxUnackedPSNs, MaxQPRdAtom: o.Hardware.MaxQPRdAtom,
		Trace: o.Trace,
	}
	if o.PageSize != 0 {
		shift, ok := log2(o.PageSize)
		if !ok || shift < 12 || shift > 30 {
			return nil, fmt.Errorf("rnic: PageSize %d is not a power of two in [4 KiB, 1 GiB]", o.PageSize)
		}
		cfg.PageShift = shift
	}
	if o.MTU != 0 && (o.MTU < MTU256 || o.MTU > MTU4096) {
		return nil, fmt.Errorf("rnic: MTU %d is not an ibv_mtu value", o.MTU)
	}
	d, err := nic.New(cfg)
	if err != nil {
		return nil, err
	}
	c := d.Config()
	if o.Name == "" {
		o.Name = "rnic0"
	}
	dev := &Device{d: d, name: o.Name, pds: make(map[*PD]struct{})}
	dev.attr = DeviceAttr{
		FWVer:       "rnic " + Version,
		MaxMRSize:   1 << 40,
		PageSizeCap: 1<<12 | 1<<21 | 1<<30,
		MaxQP:       c.MaxQP, MaxQPWR: c.MaxQPWR, MaxSGE: c.MaxSGE,
		MaxCQ: c.MaxCQ, MaxCQE: c.MaxCQE, MaxMR: c.MaxMR, MaxPD: 1 << 20,
		MaxQPRdAtom: int(c.MaxQPRdAtom), MaxQPInitRdAtom: int(c.MaxQPRdAtom),
		MaxSRQ: c.MaxSRQ, MaxSRQWR: c.MaxSRQWR, MaxSRQSGE: c.MaxSGE,
		MaxInlineData: c.MaxInline, MaxMsgSize: transport.MaxMsgSize,
		AtomicCap: AtomicHCA, ActiveMTU: c.MTU, GIDTableLen: 1,
	}
	if o.Publish {
		if err := dev.Publish(); err != nil {
			dev.Close()
			return nil, err
		}
	}
	return dev, nil
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

// Attr returns the device's limits (ibv_query_device).
func (d *Device) Attr() DeviceAttr { return d.attr }

// GID returns entry index of the port's GID table (ibv_query_gid).
func (d *Device) GID(index int) (GID, error) {
	if index != 0 {
		return GID{}, fmt.Errorf("rnic: GID index %d out of range (table has 1 entry)", index)
	}
	return d.d.GID(), nil
}

// Close stops the device. Objects still open become unusable.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.unpublish()
	return d.d.Close()
}

func (d *Device) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return nil
}

// AsyncEvent is an asynchronous event (struct ibv_async_event).
type AsyncEvent struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
}

// GetAsyncEvent waits for the next asynchronous event
// (ibv_get_async_event), or for ctx to end.
func (d *Device) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	select {
	case ev := <-d.d.Events():
		a := AsyncEvent{Type: ev.Type}
		if ev.QP != nil {
			a.QP, _ = ev.QP.Opaque.(*QP)
		}
		if ev.CQ != nil {
			a.CQ = cqOf(ev.CQ)
		}
		if ev.SRQ != nil {
			a.SRQ, _ = ev.SRQ.Opaque.(*SRQ)
		}
		return a, nil
	case <-ctx.Done():
		return AsyncEvent{}, ctx.Err()
	}
}

// ResolveRoute builds the outer headers for a destination GID from the
// port's GID table (source) and an address vector.
func (d *Device) route(ah *AHAttr) (wire.Route, error) {
	if ah.SGIDIndex != 0 {
		return wire.Route{}, fmt.Errorf("rnic: sgid_index %d out of range", ah.SGIDIndex)
	}
	src := d.d.GID()
	if ah.DGID == (GID{}) {
		return wire.Route{}, errors.New("rnic: address handle without a destination GID")
	}
	if ah.DGID.IsIPv4() != src.IsIPv4() {
		return wire.Route{}, fmt.Errorf("rnic: destination %v and source %v are of different IP versions", ah.DGID, src)
	}
	return wire.Route{Src: src, Dst: ah.DGID, TrafficClass: ah.TrafficClass, HopLimit: ah.HopLimit, FlowLabel: ah.FlowLabel}, nil
}

// AHAttr is an address vector (struct ibv_ah_attr with its GRH).
type AHAttr struct {
	DGID         GID
	SGIDIndex    uint8
	FlowLabel    uint32
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	PortNum      uint8
}
