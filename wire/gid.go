package wire

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
)

// GID is a 128-bit global identifier. In RoCEv2 a GID is an IP address:
// an IPv6 address, or an IPv4 address in IPv4-mapped form ::ffff:a.b.c.d,
// which is how rxe and hardware RNICs build GIDs from IPv4 addresses.
type GID [16]byte

// GIDFromAddr returns the GID of an IP address; an IPv4 address becomes
// IPv4-mapped. The zone is dropped.
func GIDFromAddr(a netip.Addr) GID {
	if !a.IsValid() {
		return GID{}
	}
	return GID(a.As16())
}

// gidFromIPv4 returns the IPv4-mapped GID of a 4-byte address.
func gidFromIPv4(a [4]byte) GID {
	return GID{10: 0xFF, 11: 0xFF, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}
}

// Addr returns the GID as an IP address; an IPv4-mapped GID becomes an
// IPv4 address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsIPv4 reports whether g is IPv4-mapped, so that RoCEv2 carries it in
// IPv4.
func (g GID) IsIPv4() bool {
	// Two words, not twelve bytes: every packet's route asks (Route.IPv6).
	return binary.LittleEndian.Uint64(g[:8]) == 0 && binary.LittleEndian.Uint32(g[8:12]) == 0xFFFF0000
}

// IsZero reports whether g is all zeros (no GID).
func (g GID) IsZero() bool { return g == GID{} }

// ipv4 returns the IPv4 address of an IPv4-mapped GID (the last 4 bytes).
func (g GID) ipv4() [4]byte { return [4]byte(g[12:]) }

// String returns the GID in IPv6 text form; an IPv4-mapped GID prints as
// "::ffff:a.b.c.d". ParseGID accepts the result.
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// ParseGID parses an IP address (IPv4 becomes IPv4-mapped), or 32 hex digits
// optionally separated by ':' as ibv_devinfo, perftest and rc_pingpong print
// GIDs (e.g. "fe80:0000:...", "00:00:...:ff:ff:c6:12:00:0b", or
// "00000000000000000000ffffc612000b").
func ParseGID(s string) (GID, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return GIDFromAddr(a), nil
	}
	digits := strings.ReplaceAll(s, ":", "")
	var g GID
	if len(digits) != 2*len(g) || strings.HasPrefix(s, ":") || strings.HasSuffix(s, ":") {
		return GID{}, &gidError{s}
	}
	if _, err := hex.Decode(g[:], []byte(digits)); err != nil {
		return GID{}, &gidError{s}
	}
	return g, nil
}

// gidError names the string that failed to parse; it unwraps to
// ErrGIDSyntax.
type gidError struct{ s string }

func (e *gidError) Error() string { return ErrGIDSyntax.Error() + ": " + strconv.Quote(e.s) }

func (e *gidError) Unwrap() error { return ErrGIDSyntax }
