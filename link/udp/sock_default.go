//go:build !linux

package udp

import (
	"errors"
	"net"
	"net/netip"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/wire"
)

// sys is the portable fallback: one net.UDPConn, a datagram per system
// call, no raw receive, GSO or GRO, and no control over the IPv4 DF flag,
// so the IPv4 ID is whatever the kernel picks. Peers that verify the ICRC
// (rxe, a link/udp with raw receive) then reject this link's IPv4 frames;
// IPv6 frames are fine. It exists so that the package builds and its
// tests run everywhere; real use is on Linux.
type sys struct {
	conn *net.UDPConn
}

// Poll delivers nothing: the fallback reads one datagram per system call
// on its receive goroutine only (link.Poller).
func (l *Link) Poll() int { return 0 }

// Drained does nothing: the fallback hands every frame over with Deliver,
// which drops what the NIC has no room for (link.Drainer).
func (l *Link) Drained() { l.drainInbox() }

// rawReceive reports false: the fallback has no raw socket.
func (s *sys) rawReceive() bool { return false }

// sysTx is empty: the fallback has no vectors to reuse.
type sysTx struct{}

func (x *sysTx) init(*Link) {}

func (s *sys) open(l *Link) error {
	o := &l.o
	if !o.v6 && o.Raw == On {
		return &FeatureError{Feature: "raw", Err: ErrUnsupported}
	}
	if o.GSO == On {
		return &FeatureError{Feature: "GSO", Err: ErrUnsupported}
	}
	if o.GRO == On {
		return &FeatureError{Feature: "GRO", Err: ErrUnsupported}
	}
	if !o.v6 && o.Raw == Auto {
		l.fallback("raw", ErrUnsupported)
	}
	network := "udp4"
	if o.v6 {
		network = "udp6"
	}
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netAddrPort(o)))
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

func (s *sys) close() error {
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
}

func (s *sys) send(l *Link, _ *sysTx, frames []txFrame, t *txTally) {
	for i, fr := range frames {
		dst := netip.AddrFrom16(fr.dst)
		if !l.o.v6 {
			dst = netip.AddrFrom4([4]byte(fr.dst[:4]))
		}
		_, err := s.conn.WriteToUDPAddrPort(fr.b.Bytes()[l.hl:], netip.AddrPortFrom(dst, fr.port))
		t.batches++
		switch {
		case err == nil:
			t.sent++
			t.sentBytes += uint64(fr.b.Len())
		case errors.Is(err, net.ErrClosed):
			for _, r := range frames[i:] {
				r.b.Release()
			}
			t.cls += uint64(len(frames) - i)
			return
		default:
			t.errs++
		}
		fr.b.Release()
	}
}

// routineReceive reads one datagram at a time until Close.
func (l *Link) routineReceive() {
	defer close(l.done)
	out := make([]*link.Buf, 1)
	keep := make([]bool, 1)
	for {
		b := link.Get(link.MaxFrame)
		n, from, err := l.sys.conn.ReadFromUDPAddrPort(b.Bytes()[l.hl:])
		if err != nil {
			b.Release()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.c.rxErrors.Add(1)
			continue
		}
		t := rxTally{batch: 1, socket: 1}
		if n < minPayload || l.hl+n >= link.MaxFrame { // a full buffer may be a truncated datagram
			b.Release()
			if n < minPayload {
				t.malformed++
			} else {
				t.oversize++
			}
			t.addTo(&l.c)
			continue
		}
		b.SetLen(l.hl + n)
		var src [16]byte
		a := from.Addr().Unmap()
		if l.o.v6 {
			src = a.As16()
		} else {
			a4 := a.As4()
			copy(src[:], a4[:])
		}
		l.rebuild(b, &src, from.Port(), 0, wire.DefaultHopLimit)
		out[0] = b
		l.deliver(out, keep, &t, false, false)
		t.addTo(&l.c)
	}
}
