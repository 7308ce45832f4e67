package bus

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Another process's memory, as the verbs device reaches the registered
// memory of the programs it serves: the NIC copies between its packet
// buffers and the program's pages with process_vm_readv/writev, one
// system call per scatter/gather list, and never pins a page (a page the
// program unmapped fails that DMA, as an unresolvable page fault does on
// hardware).
//
// The kernel lets a process do this to another of the same user unless
// the target is not dumpable or a Linux security module forbids it
// (Yama's ptrace_scope 1, Ubuntu's default, allows only a process the
// target named with prctl(PR_SET_PTRACER); 2 and 3 allow no one
// unprivileged). Those refusals come back as ErrNoAccess, naming the
// cause. A process is held by a pidfd from OpenProcess to Close, and the
// process's exit is checked on the pidfd before an access, so that a pid
// the kernel reuses for another process is never read or written.
//
// The check is a system call (poll), and a busy NIC makes an access per
// packet, so an answer "alive" stands for aliveFor: the pid can pass to
// another process only after this one has exited, been reaped, and the
// kernel's cyclic pid allocator has gone round every other pid
// (pid_max, at least 301 and 32768 or more by default), which no system
// does in a millisecond. On the 2-core development VM the poll was a
// tenth of a receiving NIC's CPU time under ib_write_bw.

// ErrNoAccess is the error of an access the kernel refused: the NIC may
// not read or write that process's memory.
var ErrNoAccess = errors.New("bus: no access to the process's memory")

// Process is another process, whose memory regions can be mapped on a
// Local bus (MapProcess).
type Process struct {
	pid     int
	pidfd   int
	dead    atomic.Bool
	checked atomic.Int64 // when the pidfd last said alive (nanoseconds since epoch, monotonic)
}

// aliveFor is how long an "alive" from the pidfd is taken as true.
const aliveFor = time.Millisecond

// epoch is the monotonic origin of Process.checked.
var epoch = time.Now()

// OpenProcess holds process pid for DMA into its memory. It fails if the
// process does not exist or the kernel gives no pidfd (Linux < 5.3).
func OpenProcess(pid int) (*Process, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("bus: process %d: pidfd_open: %w", pid, err)
	}
	p := &Process{pid: pid, pidfd: fd}
	p.checked.Store(-int64(aliveFor)) // never checked: the first access polls
	return p, nil
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.pid }

// Read copies len(buf) bytes at address addr of the process into buf,
// outside any mapped space: the host interface's check, when a program
// connects, that the kernel lets the NIC reach its memory at all (an
// ErrNoAccess then names the cause before any QP depends on it).
func (p *Process) Read(addr uint64, buf []byte) error {
	_, err := vm(p, false, buf, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}})
	return err
}

// Close ends every access to the process: later DMA into its regions
// fails with ErrUnmapped. The NIC calls it when the process's control
// connection closes (the process exited or crashed).
func (p *Process) Close() error {
	if p.dead.Swap(true) {
		return nil
	}
	return unix.Close(p.pidfd)
}

// alive reports whether the process may still be accessed: not closed,
// and its pidfd not readable (a pidfd becomes readable when the process
// exits, before its pid can be given to another).
func (p *Process) alive() bool {
	if p.dead.Load() {
		return false
	}
	now := int64(time.Since(epoch))
	if now-p.checked.Load() < int64(aliveFor) {
		return true
	}
	fds := [1]unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds[:], 0)
		if err == unix.EINTR {
			continue // a signal (Go's preemption signal among them) is not the process's exit
		}
		ok := err == nil && n == 0
		if ok {
			p.checked.Store(now)
		}
		return ok
	}
}

// remote is a region of another process: length bytes at address base
// of its address space.
type remote struct {
	proc   *Process
	base   uint64
	length uint64
}

// MapProcess makes length bytes at address addr of process p a space of
// its own, whose bus address 0 is addr: the region the program
// registered. Nothing is read, mapped or pinned now; each DMA reaches the
// pages as they are then.
func (l *Local) MapProcess(p *Process, addr, length uint64) (Space, error) {
	if length == 0 || addr+length < addr {
		return 0, fmt.Errorf("bus: process region of %d bytes at %#x", length, addr)
	}
	return l.add(&mapping{rem: &remote{proc: p, base: addr, length: length}})
}

// remoteRun moves bytes between buf and the run of extents at the start
// of xs that are regions of one process, with one system call, and
// returns the bytes moved and the extents used.
func (l *Local) remoteRun(write bool, buf []byte, xs []Extent) (n, used int, err error) {
	var iov [16]unix.RemoteIovec
	r := iov[:0]
	var proc *Process
	for _, x := range xs {
		m := l.lookup(x.Space)
		if m == nil || m.rem == nil || proc != nil && m.rem.proc != proc {
			break
		}
		proc = m.rem.proc
		end := x.Addr + uint64(x.Len)
		if end < x.Addr || end > m.rem.length {
			if used == 0 {
				return 0, 0, fmt.Errorf("%w: %d bytes at %#x of a %d-byte region", ErrUnmapped, x.Len, x.Addr, m.rem.length)
			}
			break
		}
		k := min(int(x.Len), len(buf)-n)
		if k > 0 {
			r = append(r, unix.RemoteIovec{Base: uintptr(m.rem.base + x.Addr), Len: k})
		}
		n += k
		used++
		if n == len(buf) {
			break
		}
	}
	if n == 0 {
		return 0, used, nil
	}
	got, err := vm(proc, write, buf[:n], r)
	return got, used, err
}

// vm moves n bytes between buf and the remote vectors with one system
// call (a process_vm_* call takes up to IOV_MAX vectors; longer lists are
// split).
func vm(p *Process, write bool, buf []byte, r []unix.RemoteIovec) (int, error) {
	if !p.alive() {
		return 0, fmt.Errorf("%w: process %d has exited", ErrUnmapped, p.pid)
	}
	done := 0
	for len(r) > 0 {
		k := min(len(r), 1024)
		total := 0
		for _, v := range r[:k] {
			total += v.Len
		}
		var lv [1]unix.Iovec
		lv[0].Base = unsafe.SliceData(buf[done:])
		lv[0].SetLen(total)
		got, err := vmCall(p, write, lv[:], r[:k], total, done)
		done += got
		if err != nil {
			return done, err
		}
		r = r[k:]
	}
	return done, nil
}

// vmCall is one process_vm_* call of total bytes, retried on EINTR; its
// error says why the kernel stopped.
func vmCall(p *Process, write bool, local []unix.Iovec, remote []unix.RemoteIovec, total, done int) (int, error) {
	var got int
	var err error
	for {
		got, err = processVM(write, p.pid, local, remote)
		if err != unix.EINTR {
			break
		}
	}
	got = max(got, 0)
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return got, fmt.Errorf("%w: process %d (%v: another user, a non-dumpable program, or Yama's ptrace_scope — with scope 1 the program must name the NIC with prctl(PR_SET_PTRACER))", ErrNoAccess, p.pid, err)
	case errors.Is(err, unix.ESRCH):
		return got, fmt.Errorf("%w: process %d has exited", ErrUnmapped, p.pid)
	case err != nil:
		return got, fmt.Errorf("%w: process %d: %v", ErrUnmapped, p.pid, err)
	case got < total:
		// The kernel stops at the first page it cannot reach.
		return got, fmt.Errorf("%w: process %d: a page at or after byte %d of the transfer", ErrUnmapped, p.pid, done+got)
	}
	return got, nil
}

// maxVectors bounds the vectors of one call of remoteV on each
// side: a burst of 16 packets needs 16 local ones and, for a region of
// contiguous pages, one remote one.
const maxVectors = 64

// remoteV moves bytes between the buffers of v, from its cursor on, and
// the run of extents at the start of xs that are regions of one process
// (write: from the buffers into the extents), with one system call per
// maxVectors vectors (usually one for a burst), and returns the bytes
// moved and the extents used.
func (l *Local) remoteV(write bool, v *vecCursor, xs []Extent) (n, used int, err error) {
	var liov [maxVectors]unix.Iovec
	var riov [maxVectors]unix.RemoteIovec
	lv, rv := liov[:0], riov[:0]
	var proc *Process
	pending := 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		got, err := vmCall(proc, write, lv, rv, pending, n)
		n += got
		lv, rv, pending = liov[:0], riov[:0], 0
		return err
	}
	for _, x := range xs {
		if v.done() {
			break
		}
		m := l.lookup(x.Space)
		if m == nil || m.rem == nil || proc != nil && m.rem.proc != proc {
			break
		}
		if proc == nil {
			proc = m.rem.proc
			if !proc.alive() {
				return 0, 0, fmt.Errorf("%w: process %d has exited", ErrUnmapped, proc.pid)
			}
		}
		end := x.Addr + uint64(x.Len)
		if end < x.Addr || end > m.rem.length {
			if used == 0 {
				return 0, 0, fmt.Errorf("%w: %d bytes at %#x of a %d-byte region", ErrUnmapped, x.Len, x.Addr, m.rem.length)
			}
			break
		}
		addr, left := uintptr(m.rem.base+x.Addr), int(x.Len)
		for left > 0 && !v.done() {
			if len(lv) == maxVectors || len(rv) == maxVectors {
				if err := flush(); err != nil {
					return n, used, err
				}
			}
			dst := v.next(left)
			if k := len(rv) - 1; k >= 0 && rv[k].Base+uintptr(rv[k].Len) == addr {
				rv[k].Len += len(dst)
			} else {
				rv = append(rv, unix.RemoteIovec{Base: addr, Len: len(dst)})
			}
			if k := len(lv) - 1; k >= 0 && uintptr(unsafe.Pointer(lv[k].Base))+uintptr(lv[k].Len) == uintptr(unsafe.Pointer(unsafe.SliceData(dst))) {
				lv[k].SetLen(int(lv[k].Len) + len(dst))
			} else {
				lv = append(lv, unix.Iovec{Base: unsafe.SliceData(dst)})
				lv[len(lv)-1].SetLen(len(dst))
			}
			pending += len(dst)
			addr += uintptr(len(dst))
			left -= len(dst)
		}
		used++
	}
	return n, used, flush()
}

// processVM is process_vm_writev or process_vm_readv as a raw system
// call: it copies memory and never waits for an event, so the Go
// scheduler is not told (a Syscall would let sysmon hand the NIC's
// processor to another thread when the copy takes more than 20 µs, and
// take it back after: futex wake-ups on every packet of a busy NIC).
func processVM(write bool, pid int, local []unix.Iovec, remote []unix.RemoteIovec) (int, error) {
	trap := uintptr(unix.SYS_PROCESS_VM_READV)
	if write {
		trap = unix.SYS_PROCESS_VM_WRITEV
	}
	n, _, e := unix.RawSyscall6(trap, uintptr(pid), uintptr(unsafe.Pointer(&local[0])), uintptr(len(local)),
		uintptr(unsafe.Pointer(&remote[0])), uintptr(len(remote)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
