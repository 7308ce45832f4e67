package rnic

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/transport"
)

// PD is a protection domain (struct ibv_pd): QPs reach only the memory
// regions of their own PD.
type PD struct {
	dev *Device
	pdn uint32

	mu   sync.Mutex
	refs int // MRs, MWs, QPs, SRQs and AHs in this PD
	dead bool
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (d *Device) AllocPD() (*PD, error) {
	if err := d.usable(); err != nil {
		return nil, fmt.Errorf("rnic: AllocPD: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pds) >= d.attr.MaxPD {
		return nil, fmt.Errorf("rnic: AllocPD: all %d PDs in use", d.attr.MaxPD)
	}
	// PD numbers are what protection checks compare: after 2^32 PDs the
	// counter wraps, and a number still in use must not be given again.
	n := d.nextPD.Add(1)
	for n == 0 || d.pdns[n] {
		n = d.nextPD.Add(1)
	}
	pd := &PD{dev: d, pdn: n}
	d.pds[pd] = struct{}{}
	d.pdns[n] = true
	return pd, nil
}

// Device returns the PD's device.
func (pd *PD) Device() *Device { return pd.dev }

// Handle returns the PD number.
func (pd *PD) Handle() uint32 { return pd.pdn }

// Dealloc frees the PD (ibv_dealloc_pd). It fails with ErrBusy while
// objects in it remain. Every later call on it, a second Dealloc
// included, returns an error wrapping ErrClosed.
func (pd *PD) Dealloc() error {
	if err := pd.dev.usable(); err != nil {
		return fmt.Errorf("rnic: Dealloc PD %d: %w", pd.pdn, err)
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead {
		return fmt.Errorf("rnic: Dealloc PD %d: %w", pd.pdn, pd.errDead())
	}
	if pd.refs > 0 {
		return fmt.Errorf("%w: PD %d still has %d MRs, MWs, QPs, SRQs or AHs", ErrBusy, pd.pdn, pd.refs)
	}
	pd.dead = true
	pd.dev.mu.Lock()
	delete(pd.dev.pds, pd)
	delete(pd.dev.pdns, pd.pdn)
	pd.dev.mu.Unlock()
	return nil
}

// get takes a reference for a new object in the PD.
func (pd *PD) get() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead {
		return pd.errDead()
	}
	if err := pd.dev.usable(); err != nil {
		return err
	}
	pd.refs++
	return nil
}

// usable returns nil while the PD and its device live.
func (pd *PD) usable() error {
	if err := pd.dev.usable(); err != nil {
		return err
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead {
		return pd.errDead()
	}
	return nil
}

func (pd *PD) errDead() error { return fmt.Errorf("%w: PD %d was deallocated", ErrClosed, pd.pdn) }

func (pd *PD) put() {
	pd.mu.Lock()
	pd.refs--
	pd.mu.Unlock()
}

// MR is a registered memory region (struct ibv_mr).
type MR struct {
	pd   *PD
	buf  []byte // nil for a region without memory (RegMRMetadata)
	size int
	addr uint64
	key  uint32
	acc  Access

	mu   sync.Mutex // serializes Dereg
	dead atomic.Bool

	// unmap, for a region of another process (the host interface), ends
	// the bus's mapping of it once the ATU has forgotten the region.
	unmap func()
}

// RegMR registers buf for access by the NIC (ibv_reg_mr). Its virtual
// address, which peers use in RDMA operations, is the buffer's address,
// as in C. The buffer must stay untouched by the Go runtime's mover,
// which holds for heap memory (the Go heap does not move); the MR keeps
// buf alive until Dereg. Access 0 grants local read only, as in verbs:
// the region can be a source of sends and WRITEs, and nothing may write
// it; AccessRemoteWrite and AccessRemoteAtomic need AccessLocalWrite.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("rnic: RegMR of an empty buffer")
	}
	return pd.RegMRIOVA(buf, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))), access)
}

// RegMRIOVA registers buf with the virtual address iova (ibv_reg_mr_iova):
// peers name byte i of buf as iova+i.
func (pd *PD) RegMRIOVA(buf []byte, iova uint64, access Access) (*MR, error) {
	return pd.regMR(buf, iova, access, 0)
}

// RegMRPageSize is RegMRIOVA with an explicit MTT page size (for example
// 2 MiB, as for memory backed by huge pages).
func (pd *PD) RegMRPageSize(buf []byte, iova uint64, access Access, pageSize int) (*MR, error) {
	shift, ok := log2(pageSize)
	if !ok {
		return nil, fmt.Errorf("rnic: page size %d is not a power of two", pageSize)
	}
	return pd.regMR(buf, iova, access, shift)
}

func (pd *PD) regMR(buf []byte, iova uint64, access Access, shift uint8) (*MR, error) {
	if pd.dev.d.Features().Metadata {
		return nil, errors.New("rnic: RegMR on a metadata-mode virtual clock, which moves no bytes: use RegMRMetadata")
	}
	return pd.register(atu.MRSpec{PD: pd.pdn, Buf: buf, IOVA: iova, Access: atuAccess(access), PageShift: shift}, buf, len(buf), access)
}

// RegMRMetadata registers length bytes at iova with no memory behind
// them, on a device of a metadata-mode virtual clock
// (sim/vclock's Options.Metadata), whose NICs move lengths and not bytes: a
// region as large as the hardware being sized needs (gigabytes per QP,
// to study translation caches) costs no memory. pageSize is its MTT page
// size (0: the device's). Its Bytes are nil; ReadAt and WriteAt fail.
func (pd *PD) RegMRMetadata(iova uint64, length int, access Access, pageSize int) (*MR, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	if !pd.dev.d.Features().Metadata {
		return nil, errors.New("rnic: RegMRMetadata needs a device of a metadata-mode virtual clock (sim/vclock's Options.Metadata)")
	}
	if length <= 0 {
		return nil, fmt.Errorf("rnic: RegMRMetadata of %d bytes", length)
	}
	var shift uint8
	if pageSize != 0 {
		var ok bool
		if shift, ok = log2(pageSize); !ok {
			return nil, fmt.Errorf("rnic: page size %d is not a power of two", pageSize)
		}
	}
	return pd.register(atu.MRSpec{PD: pd.pdn, Length: uint64(length), IOVA: iova, Access: atuAccess(access), PageShift: shift}, nil, length, access)
}

// regProcess registers length bytes at address addr of another process
// (the host interface's REG_MR): a space of the device's bus over the
// process's memory, reached with process_vm_readv/writev, nothing pinned.
//
// An implicit region (implicit on-demand paging: addr and iova 0, length
// atu.ImplicitLength) is the process's whole address space, each address
// its own IOVA.
func (pd *PD) regProcess(proc *bus.Process, addr, length, iova uint64, access Access, implicit bool) (*MR, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	host, ok := pd.dev.atu.Host().(*bus.Local)
	if !ok || !pd.dev.d.Features().Processes {
		return nil, errors.New("rnic: this device cannot reach another process's memory")
	}
	size := int(min(length, math.MaxInt))
	if !implicit && (length == 0 || length > uint64(pd.dev.attr.MaxMRSize)) {
		return nil, fmt.Errorf("rnic: RegMR of %d bytes", length)
	}
	sp, err := host.MapProcess(proc, addr, length)
	if err != nil {
		return nil, fmt.Errorf("rnic: RegMR: %w", err)
	}
	mr, err := pd.register(atu.MRSpec{PD: pd.pdn, Space: sp, Length: length, IOVA: iova, Access: atuAccess(access), Implicit: implicit}, nil, size, access)
	if err != nil {
		host.Unmap(sp)
		return nil, err
	}
	mr.unmap = func() { host.Unmap(sp) }
	return mr, nil
}

// reregProcess changes a region of another process in place
// (ibv_rereg_mr, for the host interface): its key stays; its PD, range
// and rights become these. On error the region is as it was.
func (mr *MR) reregProcess(pd *PD, proc *bus.Process, addr, length, iova uint64, access Access) error {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if err := mr.usable(); err != nil {
		return fmt.Errorf("rnic: Rereg: %w", err)
	}
	host, ok := pd.dev.atu.Host().(*bus.Local)
	if !ok || mr.unmap == nil || pd.dev != mr.pd.dev {
		return errors.New("rnic: Rereg: not a region of another process on this device")
	}
	if length == 0 || length > uint64(pd.dev.attr.MaxMRSize) {
		return fmt.Errorf("rnic: Rereg of %d bytes", length)
	}
	if pd != mr.pd {
		if err := pd.get(); err != nil {
			return fmt.Errorf("rnic: Rereg: %w", err)
		}
	}
	sp, err := host.MapProcess(proc, addr, length)
	if err == nil {
		pd.dev.d.Engine(func(_ *engine) {
			// Under the engine lock no DMA into the region is in flight.
			if err = pd.dev.atu.ReregMR(mr.key, atu.MRSpec{PD: pd.pdn, Space: sp, Length: length, IOVA: iova, Access: atuAccess(access)}); err == nil {
				mr.unmap()
			}
		})
		if err != nil {
			host.Unmap(sp)
		}
	}
	if err != nil {
		if pd != mr.pd {
			pd.put()
		}
		if errors.Is(err, atu.ErrBusy) {
			return fmt.Errorf("%w: Rereg: %v", ErrBusy, err)
		}
		return fmt.Errorf("rnic: Rereg: %w", err)
	}
	mr.unmap = func() { host.Unmap(sp) }
	if pd != mr.pd {
		mr.pd.put()
		mr.pd = pd
	}
	mr.size, mr.addr, mr.acc = int(length), iova, access
	if access.Has(AccessZeroBased) {
		mr.addr = 0
	}
	return nil
}

func (pd *PD) register(spec atu.MRSpec, buf []byte, size int, access Access) (*MR, error) {
	if err := pd.get(); err != nil {
		return nil, err
	}
	key, err := pd.dev.atu.RegMR(spec)
	if err != nil {
		pd.put()
		return nil, fmt.Errorf("rnic: RegMR: %w", err)
	}
	iova := spec.IOVA
	if access.Has(AccessZeroBased) {
		iova = 0
	}
	return &MR{pd: pd, buf: buf, size: size, addr: iova, key: key, acc: access}, nil
}

// LKey returns the local key, for SGEs.
func (mr *MR) LKey() uint32 { return mr.key }

// RKey returns the remote key, for peers' RDMA operations.
func (mr *MR) RKey() uint32 { return mr.key }

// Addr returns the region's virtual address (of Bytes()[0]).
func (mr *MR) Addr() uint64 { return mr.addr }

// Len returns the region's length.
func (mr *MR) Len() int { return mr.size }

// Bytes returns the registered buffer.
func (mr *MR) Bytes() []byte { return mr.buf }

// Access returns the region's access rights.
func (mr *MR) Access() Access { return mr.acc }

// PD returns the region's protection domain.
func (mr *MR) PD() *PD { return mr.pd }

// ReadAt copies bytes of the region at offset off into p (io.ReaderAt),
// ordered with the NIC's DMA: it takes the engine's lock, so it sees every
// byte the NIC has placed so far and never a torn packet. A program that
// polls memory a peer writes with RDMA WRITE (perftest's write_lat does)
// reads through ReadAt; reading Bytes() directly while the NIC writes is a
// data race in Go's memory model.
func (mr *MR) ReadAt(p []byte, off int64) (int, error) {
	if err := mr.usable(); err != nil {
		return 0, fmt.Errorf("rnic: ReadAt: %w", err)
	}
	if mr.buf == nil {
		return 0, errors.New("rnic: ReadAt of a region without memory (RegMRMetadata)")
	}
	if off < 0 || off > int64(len(mr.buf)) {
		return 0, fmt.Errorf("rnic: ReadAt offset %d outside the %d-byte region", off, len(mr.buf))
	}
	var n int
	mr.pd.dev.d.Sync(func() { n = copy(p, mr.buf[off:]) })
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt copies p into the region at offset off (io.WriterAt), ordered
// with the NIC's DMA like ReadAt.
func (mr *MR) WriteAt(p []byte, off int64) (int, error) {
	if err := mr.usable(); err != nil {
		return 0, fmt.Errorf("rnic: WriteAt: %w", err)
	}
	if mr.buf == nil {
		return 0, errors.New("rnic: WriteAt of a region without memory (RegMRMetadata)")
	}
	if off < 0 || off > int64(len(mr.buf)) || int64(len(p)) > int64(len(mr.buf))-off { // no off+len: it can overflow
		return 0, fmt.Errorf("rnic: WriteAt of %d bytes at %d outside the %d-byte region", len(p), off, len(mr.buf))
	}
	mr.pd.dev.d.Sync(func() { copy(mr.buf[off:], p) })
	return len(p), nil
}

// SGE returns the SGE of length bytes at offset off of the region, for
// use inline in a work request: SGL: []rnic.SGE{mr.SGE(0, n)}.
//
// A range that is not inside the region (a negative off or length, off +
// length past the end) gives an SGE that the NIC refuses, never one that
// reaches other memory or silently shortens the message: it starts one
// byte past the region's end and is at least one byte long, so the work
// request fails when the NIC uses it, and nothing is read or written. The
// status is WCLocProtErr (the SGE is outside its region), unless a check
// that comes first fails: WCLocLenErr for a receive shorter than the
// message, WCRemAccessErr for a READ whose remote range is also too long;
// an inline send fails at once, in PostSend. This is netip.PrefixFrom's
// approach: the mistake travels as an invalid value and shows where the
// value is used. CheckedSGE returns the error at once instead.
func (mr *MR) SGE(off, length int) SGE {
	s, err := mr.CheckedSGE(off, length)
	if err != nil {
		n := uint64(1)
		if length > 1 {
			n = min(uint64(length), transport.MaxMsgSize) // a length PostSend accepts
		}
		return SGE{Addr: mr.addr + uint64(mr.size), Length: uint32(n), LKey: mr.key}
	}
	return s
}

// CheckedSGE is SGE with the range checked: it returns an error naming the
// range and the region when length bytes at off are not inside it (or
// length does not fit an SGE's 32 bits).
func (mr *MR) CheckedSGE(off, length int) (SGE, error) {
	if off < 0 || length < 0 || off > mr.size || length > mr.size-off || uint64(length) > 1<<32-1 {
		return SGE{}, fmt.Errorf("rnic: SGE of %d bytes at offset %d is outside the %d-byte region %#x (or longer than 2^32-1)", length, off, mr.size, mr.key)
	}
	return SGE{Addr: mr.addr + uint64(off), Length: uint32(length), LKey: mr.key}, nil
}

// Remote returns what a peer needs to access the whole region with RDMA:
// its address, length and rkey (see RemoteRegion, Exchange).
func (mr *MR) Remote() RemoteRegion {
	return RemoteRegion{Addr: mr.addr, Len: uint64(mr.size), RKey: mr.key}
}

// usable returns nil while the region and its device live.
func (mr *MR) usable() error {
	if err := mr.pd.dev.usable(); err != nil {
		return err
	}
	if mr.dead.Load() {
		return fmt.Errorf("%w: MR %#x was deregistered", ErrClosed, mr.key)
	}
	return nil
}

// Dereg deregisters the region (ibv_dereg_mr). It fails with ErrBusy
// while memory windows are bound to it. When it returns, the NIC no
// longer touches the buffer: no DMA into it is in flight. Every later call
// on the region, a second Dereg included, returns an error wrapping
// ErrClosed.
func (mr *MR) Dereg() error {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if err := mr.usable(); err != nil {
		return fmt.Errorf("rnic: Dereg: %w", err)
	}
	var err error
	mr.pd.dev.d.Engine(func(_ *engine) {
		// Under the engine lock no DMA into the region is in flight: the
		// bus mapping of another process's region can go with it.
		if err = mr.pd.dev.atu.DeregMR(mr.key); err == nil && mr.unmap != nil {
			mr.unmap()
		}
	})
	if errors.Is(err, atu.ErrBusy) {
		return fmt.Errorf("%w: Dereg: %v", ErrBusy, err)
	}
	if err != nil {
		return fmt.Errorf("rnic: Dereg: %w", err)
	}
	mr.dead.Store(true)
	mr.pd.put()
	return nil
}

// MWType is a memory window's type (enum ibv_mw_type).
type MWType uint8

const (
	MWType1 MWType = 1 // IBV_MW_TYPE_1: bound by the QP's owner, unbound by a zero-length bind
	MWType2 MWType = 2 // IBV_MW_TYPE_2: bound to one QP, invalidated by SEND_WITH_INV or LOCAL_INV
)

// MW is a memory window (struct ibv_mw): a remotely accessible range of a
// region, bound and invalidated at run time.
type MW struct {
	pd    *PD
	typ   MWType
	first uint32 // the key AllocMW returned; its index names the window

	mu   sync.Mutex // serializes Dealloc
	dead bool
}

// AllocMW allocates an unbound memory window (ibv_alloc_mw). Both types
// are bound with a BIND_MW work request on a QP; a type 2 window stays tied
// to that QP and can be invalidated by the peer with SEND_WITH_INV or
// locally with LOCAL_INV, a type 1 window is unbound by a zero-length bind.
func (pd *PD) AllocMW(t MWType) (*MW, error) {
	kind := atu.KindMW1
	switch t {
	case MWType1:
	case MWType2:
		kind = atu.KindMW2
	default:
		return nil, fmt.Errorf("rnic: memory window type %d", t)
	}
	if err := pd.get(); err != nil {
		return nil, err
	}
	key, err := pd.dev.atu.AllocMW(pd.pdn, kind)
	if err != nil {
		pd.put()
		return nil, fmt.Errorf("rnic: AllocMW: %w", err)
	}
	return &MW{pd: pd, typ: t, first: key}, nil
}

// RKey returns the window's current rkey: its initial key until a bind
// gives it a new one.
func (mw *MW) RKey() uint32 {
	k, _ := mw.pd.dev.atu.CurrentKey(mw.first)
	return k
}

// Type returns the window's type.
func (mw *MW) Type() MWType { return mw.typ }

// NextRKey returns the window's current key with the 8-bit key variant
// advanced (ibv_inc_rkey): the value to pass as MWBindInfo.NewKey.
func (mw *MW) NextRKey() uint32 {
	k := mw.RKey()
	return k&^0xFF | (k+1)&0xFF
}

// Dealloc frees the window (ibv_dealloc_mw), unbinding it. Every later
// call on it, a second Dealloc included, returns an error wrapping
// ErrClosed.
func (mw *MW) Dealloc() error {
	if err := mw.pd.dev.usable(); err != nil {
		return fmt.Errorf("rnic: Dealloc MW: %w", err)
	}
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if mw.dead {
		return fmt.Errorf("rnic: Dealloc MW: %w: memory window %#x was deallocated", ErrClosed, mw.first)
	}
	var err error
	mw.pd.dev.d.Engine(func(_ *engine) { err = mw.pd.dev.atu.DeallocMW(mw.RKey()) })
	if err != nil {
		return fmt.Errorf("rnic: Dealloc MW: %w", err)
	}
	mw.dead = true
	mw.pd.put()
	return nil
}

// atuAccess converts access rights into the ATU's (the same bits).
func atuAccess(a Access) atu.Access { return atu.Access(a) }

// Advice is what AdviseMR tells the NIC of a range of memory
// (enum ibv_advise_mr_advice).
type Advice int

const (
	// AdvisePrefetch: the range will be read by the NIC (sent, or read
	// by a peer): walk its translations now.
	AdvisePrefetch Advice = iota
	// AdvisePrefetchWrite: the range will be written; the regions must
	// grant local write.
	AdvisePrefetchWrite
	// AdvisePrefetchNoFault: map only what is present. The NIC's
	// translations of a registered region are always present, so this
	// walks them as AdvisePrefetch does.
	AdvisePrefetchNoFault
)

func (a Advice) String() string {
	switch a {
	case AdvisePrefetch:
		return "PREFETCH"
	case AdvisePrefetchWrite:
		return "PREFETCH_WRITE"
	case AdvisePrefetchNoFault:
		return "PREFETCH_NO_FAULT"
	}
	return fmt.Sprintf("Advice(%d)", int(a))
}

// AdviseMR prefetches the translations of sgl's ranges into the NIC
// (ibv_advise_mr): the address translation unit walks each range as a
// transfer would — its MPT and MTT entries enter the NIC's caches — so
// that the first operation on it does not wait for them. Each SGE names
// a region of this PD by its lkey. It returns when the walk is done
// (IBV_ADVISE_MR_FLAG_FLUSH's semantics, always). An SGE that names no
// region of the PD, reaches outside its region, or (AdvisePrefetchWrite)
// names a region without local write fails the call; the SGEs before it
// have been walked.
func (pd *PD) AdviseMR(advice Advice, sgl []SGE) error {
	var acc atu.Access
	switch advice {
	case AdvisePrefetch, AdvisePrefetchNoFault:
		acc = atu.LocalRead
	case AdvisePrefetchWrite:
		acc = atu.LocalWrite
	default:
		return fmt.Errorf("rnic: AdviseMR: unknown advice %v", advice)
	}
	if len(sgl) == 0 {
		return errors.New("rnic: AdviseMR: no ranges")
	}
	if err := pd.usable(); err != nil {
		return fmt.Errorf("rnic: AdviseMR: %w", err)
	}
	for i, s := range sgl {
		if s.Length == 0 {
			continue
		}
		r := atu.Request{Key: s.LKey, PD: pd.pdn, VA: s.Addr, Len: uint64(s.Length), Access: acc}
		if _, f := pd.dev.atu.Translate(&r, nil); f != atu.OK {
			return fmt.Errorf("rnic: AdviseMR %v: range %d (lkey %#x, %#x+%d): %v", advice, i, s.LKey, s.Addr, s.Length, f)
		}
	}
	return nil
}
