//go:build !linux

package udp

import (
	"errors"

	"github.com/rnic/rnic/wire"
)

// WireHeaders implements link.WireWriter for the portable fallback, whose
// socket computes the UDP checksum of every datagram (it has no
// SO_NO_CHECK); the TTL or hop limit is the system's default there, which
// the link cannot learn, so the frame's stays.
func (l *Link) WireHeaders(frame []byte, sent bool) {
	// CheckUDPChecksum fails with another error only where it finds no UDP header.
	if err := wire.CheckUDPChecksum(frame); err == nil || errors.Is(err, wire.ErrUDPChecksum) {
		wire.SetUDPChecksum(frame)
	}
}
