package udp

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/rnic/rnic/link"
)

// Link carries RoCEv2 frames over kernel UDP sockets. See the package doc.
type Link struct {
	o    resolved
	addr netip.Addr // unmapped, zone dropped: the frames' source and destination address
	src  [16]byte   // addr as frames carry it: IPv4 in the first 4 bytes, or IPv6
	mtu  int
	hl   int // IP + UDP header length of the link's frames

	netdev link.Netdev // the interface that holds addr (zero if none was found)

	closeOnce sync.Once
	closed    atomic.Bool
	done      chan struct{} // closed when the receive goroutine has returned

	d      atomic.Pointer[dispatcher] // nil until Attach
	txLoss lossy
	rxLoss lossy

	feat struct {
		sync.Mutex
		Features
	}

	tx sync.Pool // *txScratch, so that concurrent Sends do not share state

	sys sys   // the platform's sockets (sock_linux.go, sock_default.go)
	sib inbox // frames from siblings a full receiver did not take (sibling.go)
	c   counters
}

// dispatcher boxes the interface for atomic.Pointer.
type dispatcher struct{ link.Dispatcher }

var (
	_ link.Link         = (*Link)(nil)
	_ link.SourcePorter = (*Link)(nil)
	_ link.Addresser    = (*Link)(nil)
	_ link.Poller       = (*Link)(nil)
	_ link.Netdever     = (*Link)(nil)
	_ link.Counted      = (*Link)(nil)
)

// Features reports which kernel features a link uses and, for those it
// wanted but does not use, why.
type Features struct {
	Raw bool // IPv4 frames are received through the raw socket
	GSO bool // sends coalesce equal-size frames into UDP_SEGMENT datagrams (IPv6)
	GRO bool // the UDP socket receives UDP_GRO super-datagrams

	// The fallbacks taken, each a *FeatureError (nil if the feature is in
	// use, or was not wanted).
	RawErr, GSOErr, GROErr error
}

// Open binds the link's sockets and starts its receive goroutine. Frames
// that arrive before Attach are dropped (Unattached).
func Open(o Options) (*Link, error) {
	r, err := resolve(o)
	if err != nil {
		return nil, err
	}
	l := &Link{o: r, hl: r.headerLen(), done: make(chan struct{})}
	l.addr = r.Addr.WithZone("")
	if r.v6 {
		l.src = l.addr.As16()
	} else {
		a := l.addr.As4()
		copy(l.src[:], a[:])
	}
	// The interface that holds the address: the link's netdev, and its
	// MTU unless Options.MTU sets one (then an address no interface holds
	// is the kernel's to refuse at bind).
	nd, err := interfaceOf(r.Addr)
	if err != nil && r.MTU == 0 {
		return nil, fmt.Errorf("%w (set Options.MTU to skip the lookup)", err)
	}
	l.netdev = nd
	l.mtu = r.MTU
	if l.mtu == 0 {
		l.mtu = min(nd.MTU, maxMTU(r.v6))
		if l.mtu < minMTU {
			return nil, fmt.Errorf("udp: interface MTU %d of %v (%s) is below %d", nd.MTU, r.Addr, nd.Name, minMTU)
		}
	}
	l.txLoss.reset(r.Faults.Loss, r.Faults.Seed, streamSeed(l.addr, r.Port, false))
	l.rxLoss.reset(r.Faults.RxLoss, r.Faults.Seed, streamSeed(l.addr, r.Port, true))
	l.tx.New = func() any { return l.newTxScratch() }
	if err := l.sys.open(l); err != nil {
		return nil, err
	}
	go l.routineReceive()
	l.joinSiblings()
	return l, nil
}

// Addr returns the link's address (unmapped, without zone).
func (l *Link) Addr() netip.Addr { return l.addr }

// SourcePort returns the bound UDP port. The kernel writes it as the
// source port of every datagram, and the ICRC covers it, so the NIC must
// build every frame with it (link.SourcePorter); Send drops frames with
// another source port (Mismatch).
func (l *Link) SourcePort() uint16 { return l.o.Port }

// Netdev returns the interface that holds the link's address, as it was
// when the link opened; its Name is empty if none did (Options.MTU was
// set and no interface held the address).
func (l *Link) Netdev() link.Netdev { return l.netdev }

// MTU returns the largest frame the link sends, IP header through ICRC.
func (l *Link) MTU() int { return l.mtu }

// ICRCVerified reports whether frames the link delivers carry every
// header field their ICRC covers as the sender's kernel wrote it, so that
// the NIC can verify the ICRC: always for IPv6, and for IPv4 when raw
// receive is in use. Otherwise received frames are marked
// link.FlagIPRebuilt and the NIC counts them as unverified.
func (l *Link) ICRCVerified() bool { return l.o.v6 || l.sys.rawReceive() }

// Features returns the kernel features in use and the fallbacks taken.
func (l *Link) Features() Features {
	l.feat.Lock()
	defer l.feat.Unlock()
	return l.feat.Features
}

// Attach sets the dispatcher that receives inbound frames. Until it is
// called, received frames are dropped (Unattached); Attach(nil) detaches.
func (l *Link) Attach(d link.Dispatcher) {
	if d == nil {
		l.d.Store(nil)
		return
	}
	l.d.Store(&dispatcher{d})
}

// SetFaults changes the link's loss at run time and re-seeds both
// directions' decisions from f.Seed.
func (l *Link) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	if l.closed.Load() {
		return ErrClosed
	}
	l.txLoss.reset(f.Loss, f.Seed, streamSeed(l.addr, l.o.Port, false))
	l.rxLoss.reset(f.RxLoss, f.Seed, streamSeed(l.addr, l.o.Port, true))
	return nil
}

// Stats returns the link's counters, each read atomically (but not all at
// one instant while frames move).
func (l *Link) Stats() Stats { return l.c.snapshot() }

// Close closes the sockets and waits for the receive goroutine, which
// releases its receive buffers: after Close returns no Deliver starts.
// Sends that are in flight or come later release their frames
// (ClosedDrops). Close must not be called from inside the link's
// dispatcher. Closing again returns ErrClosed.
func (l *Link) Close() error {
	err := ErrClosed
	l.closeOnce.Do(func() {
		err = nil
		l.closed.Store(true)
		l.leaveSiblings()
		err = l.sys.close()
		<-l.done
	})
	return err
}

// Closed reports whether Close was called. rnic.Open refuses a closed
// link instead of starting a NIC that can send nothing.
func (l *Link) Closed() bool { return l.closed.Load() }

// fallback records why an Auto feature is not used.
func (l *Link) fallback(feature string, cause error) {
	fe := &FeatureError{Feature: feature, Err: cause}
	l.feat.Lock()
	defer l.feat.Unlock()
	switch feature {
	case "raw":
		l.feat.Raw, l.feat.RawErr = false, fe
	case "GSO":
		l.feat.GSO, l.feat.GSOErr = false, fe
	case "GRO":
		l.feat.GRO, l.feat.GROErr = false, fe
	}
}
