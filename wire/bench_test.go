package wire_test

import (
	"testing"

	"github.com/rnic/rnic/wire"
)

func BenchmarkParse(b *testing.B) {
	frame := build(opSpec(false, wire.OpRCWriteFirst, 4096))
	var p wire.Packet
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCheckICRC(b *testing.B) {
	frame := build(opSpec(false, wire.OpRCWriteFirst, 4096))
	var p wire.Packet
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(frame); err != nil {
			b.Fatal(err)
		}
		if err := wire.CheckICRC(p.Frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBTHEncode(b *testing.B) {
	bth := wire.BTH(make([]byte, wire.BTHSize))
	f := wire.BTHFields{Opcode: wire.OpRCWriteMiddle, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: 1}
	b.ReportAllocs()
	for b.Loop() {
		f.PSN = f.PSN.Next()
		bth.Encode(&f)
	}
}

// BenchmarkICRC measures SetICRC on IPv4 frames with 64 B, 1 KiB and
// 4 KiB payloads; bytes/s counts the whole frame.
func BenchmarkICRC(b *testing.B) {
	for _, bc := range []struct {
		name string
		n    int
	}{{"64B", 64}, {"1KiB", 1024}, {"4KiB", 4096}} {
		b.Run(bc.name, func(b *testing.B) {
			frame := build(opSpec(false, wire.OpRCWriteMiddle, bc.n))
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				wire.SetICRC(frame)
			}
		})
	}
}

// BenchmarkFinish measures building the outer headers and ICRC of a 4 KiB
// WRITE, as a requester does per packet.
func BenchmarkFinish(b *testing.B) {
	s := opSpec(false, wire.OpRCWriteMiddle, 4096)
	frame := build(s)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		s.route.Finish(frame)
	}
}
