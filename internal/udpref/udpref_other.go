//go:build !linux

package udpref

import (
	"context"
	"net/netip"
)

// Stream is Linux-only: it needs sendmmsg and recvmmsg.
func Stream(ctx context.Context, o StreamOptions) (StreamResult, error) {
	return StreamResult{}, ErrUnsupported
}

// PingPong is Linux-only.
func PingPong(ctx context.Context, a, b netip.Addr, size, iters int) (PingPongResult, error) {
	return PingPongResult{}, ErrUnsupported
}
