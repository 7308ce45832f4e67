package fabric

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/timing"
	"github.com/rnic/rnic/wire"
)

// arrival records one delivered frame.
type arrival struct {
	at   sim.Time
	src  HostID
	psn  uint32
	ecn  uint8
	size int
}

// sink is a Receiver that records what arrives.
type sink struct {
	got []arrival
}

func (k *sink) Receive(s *sim.Sim, f Frame) {
	k.got = append(k.got, arrival{at: s.Now(), src: f.Src, psn: f.Meta.PSN, ecn: f.ECN, size: f.Len})
	if f.Buf != nil {
		f.Buf.Release()
	}
}

// build makes a fabric of n hosts with cfg, each with a sink.
func build(t testing.TB, seed uint64, cfg Config, n int) (*sim.Sim, *Fabric, []*Port, []*sink) {
	t.Helper()
	s := sim.New(seed)
	f, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ports []*Port
	var sinks []*sink
	for _, a := range HostAddrs(n) {
		p, err := f.AddHost(a)
		if err != nil {
			t.Fatal(err)
		}
		k := &sink{}
		p.SetReceiver(k)
		ports = append(ports, p)
		sinks = append(sinks, k)
	}
	return s, f, ports, sinks
}

func cfg100G(prop sim.Time) Config {
	return Config{Link: timing.WireConfig{RateGbps: 100, Propagation: prop}}
}

// roceFrame builds a real RoCEv2 RC SEND-only frame from src to dst with
// payload bytes of payload and the given ECN codepoint.
func roceFrame(t testing.TB, src, dst netip.Addr, payload int, ecn uint8) *link.Buf {
	t.Helper()
	r := wire.Route{Src: wire.GIDFromAddr(src), Dst: wire.GIDFromAddr(dst), TrafficClass: ecn}
	n := wire.FrameLen(&r, wire.OpRCSendOnly, payload)
	b := link.Get(n)
	fr := b.Bytes()
	clear(fr)
	wire.BTH(fr[r.HeaderLen():]).Encode(&wire.BTHFields{
		Opcode:   wire.OpRCSendOnly,
		PadCount: uint8(wire.PadLen(payload)),
		DestQP:   0x11,
		PSN:      7,
	})
	r.Finish(fr)
	if err := wire.CheckICRC(fr); err != nil {
		t.Fatal(err)
	}
	return b
}

func (a arrival) String() string {
	return fmt.Sprintf("%v from %d psn %d ecn %d (%d B)", a.at, a.src, a.psn, a.ecn, a.size)
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
