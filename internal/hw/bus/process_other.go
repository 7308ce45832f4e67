//go:build !linux

package bus

import (
	"errors"
	"fmt"
)

// ErrNoAccess is the error of an access the kernel refused.
var ErrNoAccess = errors.New("bus: no access to the process's memory")

// Process is another process; reaching its memory needs Linux
// (process_vm_readv/writev).
type Process struct{ pid int }

// OpenProcess fails: only Linux reaches another process's memory.
func OpenProcess(pid int) (*Process, error) {
	return nil, fmt.Errorf("bus: process %d: another process's memory needs Linux", pid)
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.pid }

// Close does nothing.
func (p *Process) Close() error { return nil }

type remote struct {
	proc         *Process
	base, length uint64
}

// MapProcess fails: only Linux reaches another process's memory.
func (l *Local) MapProcess(p *Process, addr, length uint64) (Space, error) {
	return 0, errors.New("bus: another process's memory needs Linux")
}

func (l *Local) remoteRun(write bool, buf []byte, xs []Extent) (int, int, error) {
	return 0, 0, errors.New("bus: another process's memory needs Linux")
}

func (l *Local) remoteV(write bool, v *vecCursor, xs []Extent) (int, int, error) {
	return 0, 0, errors.New("bus: another process's memory needs Linux")
}
