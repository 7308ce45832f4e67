// Package bus is host memory as the RNIC reaches it: the DMA bus (on
// hardware, PCIe and the IOMMU behind it). The address translation unit
// (internal/hw/atu) turns a key and a virtual address into extents of
// host memory named by (address space, bus address, length); the DMA
// engines (internal/hw/dma) read, write and execute atomics on them
// through a Bus, never on host memory directly.
//
//	WQE / packet ─▶ ATU: key, VA ─▶ []Extent ─▶ DMA engine ─▶ Bus ─▶ host memory
//
// Implementations:
//   - Local: the program's own memory. Go gives a buffer no stable address,
//     so each registered buffer is an address space of its own (Map), and a
//     bus address is an offset into it; resolving one is a table lookup,
//     with no copy and no allocation.
//   - Faulty: a Bus whose chosen extents fail, as if a page had vanished
//     under the DMA; the NIC must complete the work with an error status.
//   - Another process's memory: Local maps a region of a process held by
//     OpenProcess (MapProcess) as a space too, reached with
//     process_vm_readv/writev, one system call per run of extents.
//
// Space 0 is no memory at all: regions registered without host memory (the
// simulator's metadata mode, which moves lengths only) live there; reads of
// it yield zeros and writes to it are dropped.
package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Space names an address space of host memory.
type Space uint32

// NoMemory is the space of regions without host memory behind them.
const NoMemory Space = 0

// Extent is a run of host memory: Len bytes at bus address Addr of Space.
type Extent struct {
	Addr  uint64
	Space Space
	Len   uint32
}

// AtomicOp selects the atomic operation.
type AtomicOp uint8

const (
	CompareSwap AtomicOp = iota
	FetchAdd
	// Store writes swap (ATOMIC WRITE, IBTA 1.5): an 8-byte store,
	// single-copy atomic with respect to the NIC, returning the value it
	// replaced (0 on another process's memory, which it does not read).
	Store
)

// ErrUnmapped is the error of an access to memory that is not (or no
// longer) mapped: a page fault the NIC cannot resolve.
var ErrUnmapped = errors.New("bus: host memory not mapped")

// Bus is host memory behind the DMA engines. Gather and Scatter are the
// batch forms (one call for a scatter/gather list). On an error, what was
// copied before the failing extent stays copied, as on hardware; the NIC
// completes the work request with an error status.
type Bus interface {
	// Gather copies the extents, in order, into dst and returns the bytes
	// copied: the smaller of len(dst) and the extents' total.
	Gather(dst []byte, src []Extent) (int, error)
	// Scatter copies src across the extents, in order, and returns the
	// bytes copied.
	Scatter(dst []Extent, src []byte) (int, error)
	// Atomic executes an 8-byte atomic at x (8 bytes, 8-byte aligned: the
	// ATU checked) and returns the value before it. The caller serializes
	// atomics (the DMA cluster's atomic unit). Memory holds the value
	// in the host's byte order, as on hardware.
	Atomic(x Extent, op AtomicOp, compareOrAdd, swap uint64) (uint64, error)
}

// Mapper is a Bus that registration can hand buffers of the program's own
// memory to (Local). A Bus without it takes only regions already named by
// space and address.
type Mapper interface {
	Bus
	// Map makes buf addressable on the bus as a space of its own, whose
	// bus address 0 is buf[0]. The buffer is not copied; it stays
	// reachable until Unmap.
	Map(buf []byte) (Space, error)
	// Unmap ends a mapping. Later accesses to its space fail with
	// ErrUnmapped; a space number is reused only after 255 more mappings
	// of its slot.
	Unmap(sp Space) error
}

// Local is the program's own memory (Mapper). It is safe for concurrent
// use (mappings change on the control path while DMA runs), except that
// concurrent atomics on one word need their caller's serialization.
type Local struct {
	mu   sync.Mutex // Map and Unmap
	dir  [dirSize]atomic.Pointer[chunk]
	free []uint32 // free slots
	next uint32   // the first slot never used
}

// A space is gen<<24 | slot (slot ≥ 1): 2^24 mappings at once, each slot's
// generation counting its reuses so that a stale extent finds nothing.
const (
	slotBits  = 24
	slotMask  = 1<<slotBits - 1
	chunkBits = 12
	chunkSize = 1 << chunkBits
	dirSize   = 1 << (slotBits - chunkBits)
)

type chunk [chunkSize]atomic.Pointer[mapping]

// mapping is a space: the program's own buffer, or a region of another
// process (rem).
type mapping struct {
	buf  []byte
	rem  *remote
	sp   Space
	live bool // false: a tombstone, the slot's last space
	Loan      // buf lent (Lend); Unmap takes it back
}

// Loan is memory lent to a reader outside the DMA engines' calls (a
// link.Lender): a frame sent by reference (link.Buf.SetRef) whose
// receiving NIC copies its payload straight from the sender's region.
// Its owner takes it back once (TakeBack): a mapping when Unmap ends it,
// a QP when it is destroyed. The zero Loan is lent.
type Loan struct {
	// The borrowers (the receiving NICs, on their own cores) write this
	// line for every frame: it is kept apart from the owner's fields,
	// which the sending NIC reads for every frame.
	_       [64]byte
	borrows atomic.Int32
	gone    atomic.Bool
	_       [56]byte
}

// Borrow reports whether the memory is still lent and keeps it so
// until Return. A borrow counts itself before it looks at
// gone, and TakeBack sets gone before it counts the borrows (both
// sequentially consistent): one of them sees the other, so no borrow
// succeeds after TakeBack returns.
func (l *Loan) Borrow() bool {
	l.borrows.Add(1)
	if l.gone.Load() {
		l.borrows.Add(-1)
		return false
	}
	return true
}

// Return ends a Borrow that succeeded.
func (l *Loan) Return() { l.borrows.Add(-1) }

// TakeBack ends the loan: it waits for the borrows in progress (a copy
// of a payload each: they do not wait on anything), and every later
// Borrow fails.
func (l *Loan) TakeBack() {
	l.gone.Store(true)
	for l.borrows.Load() != 0 {
		runtime.Gosched()
	}
}

// Lend returns the bytes behind an extent of the program's own memory
// and their space's Loan, for a reader that copies them later without
// the bus. It reports false for another process's memory, space
// NoMemory and anything not mapped: those are gathered.
func (l *Local) Lend(x Extent) ([]byte, *Loan, bool) {
	b, m, err := l.bytes(x)
	if err != nil || m == nil || m.rem != nil {
		return nil, nil, false
	}
	return b, &m.Loan, true
}

// Map makes buf a space of its own (Mapper).
func (l *Local) Map(buf []byte) (Space, error) {
	return l.add(&mapping{buf: buf})
}

// add gives m a space: a free slot, with the slot's next generation.
func (l *Local) add(m *mapping) (Space, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var slot uint32
	if n := len(l.free); n > 0 {
		slot, l.free = l.free[n-1], l.free[:n-1]
	} else {
		if l.next == 0 {
			l.next = 1 // slot 0 would make space 0, which is NoMemory
		}
		if l.next > slotMask {
			return 0, fmt.Errorf("bus: %d buffers mapped", slotMask)
		}
		slot = l.next
		l.next++
	}
	c := l.dir[slot>>chunkBits].Load()
	if c == nil {
		c = new(chunk)
		l.dir[slot>>chunkBits].Store(c)
	}
	p := &c[slot&(chunkSize-1)]
	gen := Space(1)
	if old := p.Load(); old != nil {
		gen = old.sp>>slotBits + 1
		if gen > 0xFF {
			gen = 1
		}
	}
	m.sp, m.live = gen<<slotBits|Space(slot), true
	p.Store(m)
	return m.sp, nil
}

// Unmap ends a mapping (Mapper). The slot keeps a tombstone with the
// space's number, so that the next mapping of the slot gets a new
// generation.
//
// Memory lent (Lend) is taken back: Unmap waits for the borrows in
// progress, which are copies of a payload each, and every later Borrow
// fails, so nothing reads the buffer after Unmap returns.
func (l *Local) Unmap(sp Space) error {
	l.mu.Lock()
	m := l.lookup(sp)
	if m == nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: space %#x", ErrUnmapped, uint32(sp))
	}
	slot := uint32(sp) & slotMask
	l.dir[slot>>chunkBits].Load()[slot&(chunkSize-1)].Store(&mapping{sp: sp}) // not live: a tombstone
	l.free = append(l.free, slot)
	l.mu.Unlock()
	m.TakeBack()
	return nil
}

// lookup returns sp's live mapping, or nil.
func (l *Local) lookup(sp Space) *mapping {
	slot := uint32(sp) & slotMask
	c := l.dir[slot>>chunkBits].Load()
	if c == nil {
		return nil
	}
	m := c[slot&(chunkSize-1)].Load()
	if m == nil || m.sp != sp || !m.live {
		return nil
	}
	return m
}

// bytes resolves an extent of the program's own memory to the bytes
// behind it; nil, false for space NoMemory and for another process's
// region (which the caller moves with remoteRun).
func (l *Local) bytes(x Extent) ([]byte, *mapping, error) {
	if x.Space == NoMemory {
		return nil, nil, nil
	}
	m := l.lookup(x.Space)
	if m == nil {
		return nil, nil, fmt.Errorf("%w: space %#x", ErrUnmapped, uint32(x.Space))
	}
	if m.rem != nil {
		return nil, m, nil
	}
	end := x.Addr + uint64(x.Len)
	if end < x.Addr || end > uint64(len(m.buf)) {
		return nil, nil, fmt.Errorf("%w: %d bytes at %#x of a %d-byte space", ErrUnmapped, x.Len, x.Addr, len(m.buf))
	}
	return m.buf[x.Addr:end:end], m, nil
}

// Bytes returns the memory behind an extent of a mapped space of the
// program's own memory (tests and debugging; the DMA engines use Gather,
// Scatter and Atomic).
func (l *Local) Bytes(x Extent) ([]byte, error) {
	b, m, err := l.bytes(x)
	if err == nil && m != nil && m.rem != nil {
		return nil, fmt.Errorf("bus: space %#x is another process's memory", uint32(x.Space))
	}
	return b, err
}

// Gather implements Bus.
func (l *Local) Gather(dst []byte, src []Extent) (int, error) {
	n := 0
	for i := 0; i < len(src) && n < len(dst); i++ {
		x := src[i]
		b, m, err := l.bytes(x)
		switch {
		case err != nil:
			return n, err
		case m != nil && m.rem != nil:
			k, used, err := l.remoteRun(false, dst[n:], src[i:])
			n += k
			if err != nil {
				return n, err
			}
			i += used - 1
		case m != nil:
			n += copy(dst[n:], b)
		default:
			k := min(int(x.Len), len(dst)-n)
			clear(dst[n : n+k])
			n += k
		}
	}
	return n, nil
}

// VectorGatherer is a Bus that gathers into several buffers with one
// access where it can (Local, for another process's memory): the
// payloads of a burst of packets.
type VectorGatherer interface {
	// GatherV is Gather into the buffers of dsts in turn: the extents'
	// bytes fill dsts[0], then dsts[1], and so on. It returns the bytes
	// copied; on an error, what was copied before it stays copied (in
	// which buffers, the caller does not rely on).
	GatherV(dsts [][]byte, src []Extent) (int, error)
}

// vecCursor walks buffers in turn, handing out the next piece of them.
type vecCursor struct {
	bufs [][]byte
	i    int // the current buffer
	off  int // bytes of it already handed out
}

func (v *vecCursor) done() bool {
	for v.i < len(v.bufs) && v.off == len(v.bufs[v.i]) {
		v.i, v.off = v.i+1, 0
	}
	return v.i == len(v.bufs)
}

// next returns the next piece, of at most max bytes; !done() first.
func (v *vecCursor) next(max int) []byte {
	b := v.bufs[v.i][v.off:]
	b = b[:min(len(b), max)]
	v.off += len(b)
	return b
}

// GatherV implements VectorGatherer: runs of another process's memory
// move with one system call (process_vm_readv, a local vector per
// buffer) where Gather makes one per buffer.
func (l *Local) GatherV(dsts [][]byte, src []Extent) (int, error) {
	return l.vectored(false, src, dsts)
}

// VectorScatterer is a Bus that writes several buffers with one access
// where it can (Local, for another process's memory): the payloads of
// the packets of a burst a NIC received.
type VectorScatterer interface {
	// ScatterV is Scatter of the buffers of srcs in turn: srcs[0]'s
	// bytes fill the extents first, then srcs[1]'s, and so on. It
	// returns the bytes copied; on an error, what was copied before it
	// stays copied (which, the caller does not rely on).
	ScatterV(dst []Extent, srcs [][]byte) (int, error)
}

// ScatterV implements VectorScatterer: runs of another process's memory
// move with one system call (process_vm_writev, a local vector per
// buffer) where Scatter makes one per buffer.
func (l *Local) ScatterV(dst []Extent, srcs [][]byte) (int, error) {
	return l.vectored(true, dst, srcs)
}

// vectored moves bytes between the extents and the buffers in turn
// (write: from the buffers into the extents), a run of another process's
// extents with one system call (remoteV).
func (l *Local) vectored(write bool, xs []Extent, bufs [][]byte) (int, error) {
	v := vecCursor{bufs: bufs}
	n := 0
	for i := 0; i < len(xs) && !v.done(); i++ {
		x := xs[i]
		b, m, err := l.bytes(x)
		switch {
		case err != nil:
			return n, err
		case m != nil && m.rem != nil:
			k, used, err := l.remoteV(write, &v, xs[i:])
			n += k
			if err != nil {
				return n, err
			}
			i += used - 1
		default:
			for left := int(x.Len); left > 0 && !v.done(); {
				d := v.next(left)
				at := int(x.Len) - left
				switch {
				case m != nil && write:
					copy(b[at:], d)
				case m != nil:
					copy(d, b[at:])
				case !write:
					clear(d) // no memory (metadata) reads as zeros
				}
				n += len(d)
				left -= len(d)
			}
		}
	}
	return n, nil
}

// Scatter implements Bus.
func (l *Local) Scatter(dst []Extent, src []byte) (int, error) {
	n := 0
	for i := 0; i < len(dst) && n < len(src); i++ {
		x := dst[i]
		b, m, err := l.bytes(x)
		switch {
		case err != nil:
			return n, err
		case m != nil && m.rem != nil:
			k, used, err := l.remoteRun(true, src[n:], dst[i:])
			n += k
			if err != nil {
				return n, err
			}
			i += used - 1
		case m != nil:
			n += copy(b, src[n:])
		default:
			n += min(int(x.Len), len(src)-n)
		}
	}
	return n, nil
}

// Atomic implements Bus. It does not serialize atomics itself: the caller
// does (the DMA cluster's atomic unit, internal/hw/dma), and nothing
// orders them with the host CPU's own accesses, as on an RNIC without
// PCIe atomics (IBV_ATOMIC_HCA). On another process's memory it is a read
// and a write of the word, atomic with respect to the NIC only.
func (l *Local) Atomic(x Extent, op AtomicOp, compareOrAdd, swap uint64) (uint64, error) {
	if x.Len != 8 {
		return 0, fmt.Errorf("bus: atomic on %d bytes", x.Len)
	}
	b, m, err := l.bytes(x)
	if err != nil || m == nil {
		return 0, err
	}
	var word [8]byte
	if op == Store {
		if m.rem != nil {
			// One aligned 8-byte write of the other process's memory.
			binary.NativeEndian.PutUint64(word[:], swap)
			_, _, err := l.remoteRun(true, word[:], []Extent{x})
			return 0, err
		}
		if uintptr(unsafe.Pointer(&b[0]))%8 == 0 {
			return atomic.SwapUint64((*uint64)(unsafe.Pointer(&b[0])), swap), nil
		}
		orig := binary.NativeEndian.Uint64(b)
		binary.NativeEndian.PutUint64(b, swap)
		return orig, nil
	}
	if m.rem != nil {
		if _, _, err := l.remoteRun(false, word[:], []Extent{x}); err != nil {
			return 0, err
		}
		b = word[:]
	}
	orig := binary.NativeEndian.Uint64(b)
	var next uint64
	switch {
	case op == FetchAdd:
		next = orig + compareOrAdd
	case orig == compareOrAdd:
		next = swap
	default:
		return orig, nil // a compare that fails writes nothing
	}
	binary.NativeEndian.PutUint64(b, next)
	if m.rem != nil {
		if _, _, err := l.remoteRun(true, word[:], []Extent{x}); err != nil {
			return 0, err
		}
	}
	return orig, nil
}

// Faulty is a Bus whose extents for which Fail reports true fail with
// ErrUnmapped, as if the page had vanished under the DMA: the fault
// injection the NIC's error paths are tested with.
type Faulty struct {
	Mapper
	Fail func(x Extent) bool
}

func (f *Faulty) check(xs []Extent) error {
	for _, x := range xs {
		if f.Fail(x) {
			return fmt.Errorf("%w: %d bytes at %#x of space %#x (injected)", ErrUnmapped, x.Len, x.Addr, uint32(x.Space))
		}
	}
	return nil
}

// Vectored reports whether the bus under the fault injection gathers
// into and scatters from several buffers at once (GatherV and ScatterV
// work).
func (f *Faulty) Vectored() bool {
	_, g := f.Mapper.(VectorGatherer)
	_, s := f.Mapper.(VectorScatterer)
	return g && s
}

// GatherV implements VectorGatherer when the bus under it does (Vectored);
// on another it fails.
func (f *Faulty) GatherV(dsts [][]byte, src []Extent) (int, error) {
	if err := f.check(src); err != nil {
		return 0, err
	}
	v, ok := f.Mapper.(VectorGatherer)
	if !ok {
		return 0, errors.New("bus: no vectored gather under the fault injection")
	}
	return v.GatherV(dsts, src)
}

// ScatterV implements VectorScatterer when the bus under it does; on
// another it fails.
func (f *Faulty) ScatterV(dst []Extent, srcs [][]byte) (int, error) {
	if err := f.check(dst); err != nil {
		return 0, err
	}
	v, ok := f.Mapper.(VectorScatterer)
	if !ok {
		return 0, errors.New("bus: no vectored scatter under the fault injection")
	}
	return v.ScatterV(dst, srcs)
}

// Gather implements Bus.
func (f *Faulty) Gather(dst []byte, src []Extent) (int, error) {
	if err := f.check(src); err != nil {
		return 0, err
	}
	return f.Mapper.Gather(dst, src)
}

// Scatter implements Bus.
func (f *Faulty) Scatter(dst []Extent, src []byte) (int, error) {
	if err := f.check(dst); err != nil {
		return 0, err
	}
	return f.Mapper.Scatter(dst, src)
}

// Atomic implements Bus.
func (f *Faulty) Atomic(x Extent, op AtomicOp, compareOrAdd, swap uint64) (uint64, error) {
	if err := f.check([]Extent{x}); err != nil {
		return 0, err
	}
	return f.Mapper.Atomic(x, op, compareOrAdd, swap)
}
