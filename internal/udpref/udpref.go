// Package udpref measures the physical reference for rnic over UDP: the
// same datagrams an RDMA workload puts on the wire, moved through the same
// kind of socket as link/udp uses (unconnected, non-blocking under the
// runtime's poller, 8 MiB buffers, sendmmsg/recvmmsg batches), with no
// RDMA processing at all. A benchmark reports rnic's rate as a fraction of
// this one, measured in the same run on the same machine.
//
// Both ends live in one process (the reference is for loopback and for
// namespaces on one host): the sender's window is the receiver's count,
// so the reference loses nothing to flow control and nothing to drops.
package udpref

import (
	"errors"
	"net/netip"
	"time"
)

// StreamResult is what Stream measured.
type StreamResult struct {
	Datagrams int           // datagrams received
	Bytes     int64         // UDP payload bytes received
	Elapsed   time.Duration // first send to last receive
	Drops     int64         // datagrams the receiving kernel dropped (socket buffer full)
}

// MBps is the received payload in MB/s (10^6 bytes, as perftest).
func (r StreamResult) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6
}

// StreamOptions shape a one-way stream.
type StreamOptions struct {
	Src, Dst netip.Addr // the two ends' addresses (loopback: 127.0.0.2 → 127.0.0.1)
	Size     int        // UDP payload of each datagram
	Count    int        // datagrams to move
	Batch    int        // datagrams per sendmmsg/recvmmsg (default 64, link/udp's)
	Window   int        // datagrams in flight at most (default 1024: 4 MiB of 4 KiB datagrams, half the socket buffer)
}

// PingPongResult is what PingPong measured: round-trip times.
type PingPongResult struct {
	RTTs []time.Duration // one per iteration, in order
}

// ErrUnsupported is returned where the reference has no implementation.
var ErrUnsupported = errors.New("udpref: not supported on this platform")

const sockBuf = 8 << 20 // link/udp's socket buffers
