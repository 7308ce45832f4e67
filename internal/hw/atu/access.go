package atu

import "strings"

// Access is a set of memory access rights. The bit values are those of
// libibverbs' enum ibv_access_flags, so that the public API can pass them
// through unchanged.
type Access uint32

const (
	LocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	RemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	RemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	RemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
	MWBind       Access = 1 << 4 // IBV_ACCESS_MW_BIND
	ZeroBased    Access = 1 << 5 // IBV_ACCESS_ZERO_BASED
	// FLUSH (IBTA 1.5) to global visibility, and to persistence; the bits
	// of rdma-core 45's IBV_ACCESS_FLUSH_GLOBAL and _PERSISTENT (and the
	// kernel's IB_ACCESS_FLUSH_*).
	FlushGlobal     Access = 1 << 8
	FlushPersistent Access = 1 << 9

	// LocalRead is the right to read local memory: every valid lkey has it,
	// so it is the zero value.
	LocalRead Access = 0

	remoteAny  = RemoteWrite | RemoteRead | RemoteAtomic
	validMR    = LocalWrite | RemoteWrite | RemoteRead | RemoteAtomic | MWBind | ZeroBased | FlushGlobal | FlushPersistent
	validMW    = RemoteWrite | RemoteRead | RemoteAtomic | ZeroBased
	needsLocal = RemoteWrite | RemoteAtomic // IBTA o10-36: remote write/atomic need local write
)

// Has reports whether every right in want is in a.
func (a Access) Has(want Access) bool { return a&want == want }

func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	names := [...]string{"local_write", "remote_write", "remote_read", "remote_atomic", "mw_bind", "zero_based", "", "", "flush_global", "flush_persistent"}
	var parts []string
	for i, n := range names {
		if a&(1<<i) != 0 && n != "" {
			parts = append(parts, n)
		}
	}
	named := Access(1<<len(names)-1) &^ (1<<6 | 1<<7)
	if rest := a &^ named; rest != 0 {
		parts = append(parts, "0x"+hex32(uint32(rest)))
	}
	return strings.Join(parts, "|")
}

func hex32(v uint32) string {
	const digits = "0123456789abcdef"
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return strings.TrimLeft(string(b[:]), "0")
}
