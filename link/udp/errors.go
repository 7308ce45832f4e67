package udp

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by Close and SetFaults on a closed link.
var ErrClosed = errors.New("udp: link closed")

// ErrGSOIPv4 explains why IPv4 links never use GSO: the kernel gives the
// segments of one GSO datagram the IPv4 IDs 0, 1, 2, ... (inet_gso_segment
// increments the ID unless the GSO type is FIXEDID, which UDP's is not),
// and the ICRC covers the ID, so every segment but the first would arrive
// with an ICRC that does not verify. TestGSOIPv4IDs measures it.
var ErrGSOIPv4 = errors.New("udp: GSO renumbers the IPv4 ID of each segment, which the ICRC covers")

// errRawGRO is why an IPv4 link with GRO On and RawAuto receives through
// its UDP socket: raw receive reads the raw socket, where GRO does not
// happen.
var errRawGRO = errors.New("udp: GRO is On, and raw receive would bypass it")

// ErrUnsupported is wrapped by a FeatureError when the platform or the
// kernel lacks a feature.
var ErrUnsupported = errors.New("udp: not supported here")

// FeatureError says why a kernel feature is not in use. Open returns it
// for a feature asked On; Features reports it for one left Auto (the
// fallback is then in effect), and for GSO switched off at run time after
// the kernel refused a GSO send. Unwrap gives the cause: a syscall error
// such as EPERM (no CAP_NET_RAW), ErrUnsupported or ErrGSOIPv4.
type FeatureError struct {
	Feature string // "raw", "GSO" or "GRO"
	Err     error
}

func (e *FeatureError) Error() string {
	return fmt.Sprintf("udp: %s unavailable: %v", e.Feature, e.Err)
}

func (e *FeatureError) Unwrap() error { return e.Err }
