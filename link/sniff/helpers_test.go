package sniff_test

import (
	"net/netip"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/wire"
)

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

// hdrs sets the extension headers and flags of a test frame.
type hdrs struct {
	se, fecn, becn, ackReq bool
	tos                    uint8
	fill                   func(p *wire.Packet) // writes extension headers through the views
}

// buildFrame returns a finished frame (valid ICRC) from src to dst with a
// payload of n bytes (byte i is i).
func buildFrame(src, dst netip.Addr, op wire.Opcode, qpn uint32, psn wire.PSN, n int, h hdrs) []byte {
	r := wire.Route{Src: wire.GIDFromAddr(src), Dst: wire.GIDFromAddr(dst), TrafficClass: h.tos}
	f := make([]byte, wire.FrameLen(&r, op, n))
	t := f[r.HeaderLen():]
	wire.BTH(t).Encode(&wire.BTHFields{
		Opcode: op, SE: h.se, FECN: h.fecn, BECN: h.becn, AckReq: h.ackReq,
		PadCount: uint8(wire.PadLen(n)), PKey: wire.DefaultPKey, DestQP: qpn, PSN: psn,
	})
	info := op.Info()
	for i := range n {
		t[info.HdrLen+i] = byte(i)
	}
	r.WriteHeaders(f) // lengths, so that Parse accepts the frame
	if h.fill != nil {
		var p wire.Packet
		if err := p.Parse(f); err != nil {
			panic(err)
		}
		h.fill(&p)
	}
	r.Finish(f)
	return f
}

// sendFrame builds a SEND_ONLY frame carrying tag in its PSN.
func sendFrame(src, dst netip.Addr, tag int) []byte {
	return buildFrame(src, dst, wire.OpRCSendOnly, 0x12, wire.PSN(tag), 64+tag%7, hdrs{ackReq: true})
}

// bufOf copies frame into a pool buffer.
func bufOf(frame []byte) *link.Buf {
	b := link.Get(len(frame))
	copy(b.Bytes(), frame)
	return b
}

// collector is a dispatcher that keeps copies of the frames it receives
// and releases the buffers, as a NIC does.
type collector struct {
	ch chan []byte
}

func newCollector(n int) *collector { return &collector{ch: make(chan []byte, n)} }

func (c *collector) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		c.ch <- append([]byte(nil), b.Bytes()...)
		b.Release()
	}
}

// pipe returns two connected mem ports, closed at the end of the test.
func pipe(t *testing.T) (*mem.Port, *mem.Port) {
	t.Helper()
	pa, pb, err := mem.Pipe(addrA, addrB, mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pa.Close(); pb.Close() })
	return pa, pb
}
