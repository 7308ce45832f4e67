package udp

import (
	"fmt"
	"net/netip"

	"github.com/rnic/rnic/wire"
)

// Mode turns a kernel feature on, off, or on when the kernel and the
// process's privileges allow it. The zero value is Auto.
type Mode uint8

const (
	// Auto uses the feature when it is available and useful, and
	// otherwise falls back; Features says which way it went and why.
	Auto Mode = iota
	// On requires the feature: Open fails with a *FeatureError if it
	// cannot be had.
	On
	// Off never uses the feature.
	Off
)

// RawMode says whether received IPv4 frames come through a raw socket,
// which sees the IP header the sender's kernel wrote (see the package doc).
type RawMode = Mode

// The raw receive modes, named after the option they set.
const (
	RawAuto = Auto // raw receive when permitted (CAP_NET_RAW), else rebuilt headers
	RawOn   = On   // Open fails unless every received frame can have its ICRC verified
	RawOff  = Off  // always rebuild IPv4 headers (frames marked link.FlagIPRebuilt)
)

func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case On:
		return "on"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Options configure a Link.
type Options struct {
	// Addr is the local IP address to bind (required, not unspecified):
	// the source of every frame sent and the destination of every frame
	// received. An IPv4-mapped address means IPv4. A zone names the
	// interface of a link-local IPv6 address.
	Addr netip.Addr

	// Port is the UDP port to bind; 0 means wire.UDPPort (4791). It is
	// also the source port of every frame sent (SourcePort), while the
	// destination port of each frame is whatever the frame says.
	Port uint16

	// MTU is the largest frame, IP header through ICRC, the link sends; 0
	// means the MTU of the interface that holds Addr (65536 on loopback).
	MTU int

	// Batch is the number of datagrams per sendmmsg and recvmmsg call; 0
	// means DefaultBatch.
	Batch int

	// Raw selects raw receive for IPv4 (RawAuto by default). IPv6 needs
	// no raw socket: its rebuilt header is exact (see the package doc),
	// so RawOn is always satisfied there.
	Raw RawMode

	// GSO selects UDP generic segmentation offload (UDP_SEGMENT) on send.
	// It is used for IPv6 only: the kernel numbers the IPv4 ID of GSO
	// segments 0, 1, 2, ... and the ICRC covers the ID, so On is an
	// error for an IPv4 link (ErrGSOIPv4).
	GSO Mode

	// GRO selects UDP generic receive offload (UDP_GRO) on the socket
	// receive path: the kernel may hand over several frames of one flow
	// in one super-datagram, which the link splits (one copy per frame).
	// Auto turns it on for IPv6, where peer links send GSO; it is never
	// used with raw receive.
	GRO Mode

	// Faults injects seeded, deterministic loss.
	Faults Faults

	// Siblings makes the link reach the other links of this process
	// that set it too, in memory: frames to their address and port are
	// handed to them with no system call (sibling.go); frames to every
	// other destination go through the socket.
	Siblings bool
}

// DefaultBatch is the default number of datagrams per sendmmsg/recvmmsg
// call: enough to amortize a system call over a burst of MTU frames
// without holding much memory per link.
const DefaultBatch = 64

// maxBatch bounds Options.Batch (the kernel caps one sendmmsg/recvmmsg
// call at UIO_MAXIOV = 1024 messages).
const maxBatch = 1024

// minMTU is the smallest link MTU accepted: an IPv6 frame carrying the
// smallest RoCE MTU (256) with the largest headers.
const minMTU = 256 + wire.IPv6HeaderSize + wire.UDPHeaderSize + wire.BTHSize + 28 + 3 + wire.ICRCSize

// resolved is Options with defaults filled in and the address normalized.
type resolved struct {
	Options
	v6 bool
}

// resolve checks o and fills in defaults; the MTU is looked up later.
func resolve(o Options) (resolved, error) {
	r := resolved{Options: o}
	if !o.Addr.IsValid() || o.Addr.IsUnspecified() {
		return r, fmt.Errorf("udp: Options.Addr %v: a local unicast address is required", o.Addr)
	}
	zone := o.Addr.Zone()
	r.Addr = o.Addr.Unmap()
	if zone != "" && r.Addr.Is6() {
		r.Addr = r.Addr.WithZone(zone)
	}
	r.v6 = r.Addr.Is6()
	if r.Port == 0 {
		r.Port = wire.UDPPort
	}
	if r.Batch == 0 {
		r.Batch = DefaultBatch
	}
	if r.Batch < 1 || r.Batch > maxBatch {
		return r, fmt.Errorf("udp: Options.Batch %d, want 1..%d", o.Batch, maxBatch)
	}
	if r.MTU != 0 && (r.MTU < minMTU || r.MTU > maxMTU(r.v6)) {
		return r, fmt.Errorf("udp: Options.MTU %d, want %d..%d", o.MTU, minMTU, maxMTU(r.v6))
	}
	for _, m := range []struct {
		name string
		m    Mode
	}{{"Raw", r.Raw}, {"GSO", r.GSO}, {"GRO", r.GRO}} {
		if m.m > Off {
			return r, fmt.Errorf("udp: Options.%s = %v", m.name, m.m)
		}
	}
	if !r.v6 && r.Raw == On && r.GRO == On {
		return r, &FeatureError{Feature: "GRO", Err: errRawGRO}
	}
	if !r.v6 && r.GSO == On {
		return r, &FeatureError{Feature: "GSO", Err: ErrGSOIPv4}
	}
	if err := r.Faults.validate(); err != nil {
		return r, err
	}
	return r, nil
}

// maxMTU is the largest frame the IP length fields can describe: the IPv4
// total length includes the header, the IPv6 payload length does not.
func maxMTU(v6 bool) int {
	if v6 {
		return 65535 + wire.IPv6HeaderSize
	}
	return 65535
}

// headerLen is the size of the IP and UDP headers of the link's frames.
func (r *resolved) headerLen() int {
	if r.v6 {
		return wire.IPv6HeaderSize + wire.UDPHeaderSize
	}
	return wire.IPv4HeaderSize + wire.UDPHeaderSize
}

// netAddrPort returns the address and port the link binds, for messages.
func netAddrPort(r *resolved) netip.AddrPort { return netip.AddrPortFrom(r.Addr, r.Port) }
