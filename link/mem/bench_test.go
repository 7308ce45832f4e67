package mem_test

import (
	"fmt"
	"testing"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// releaser is the cheapest real dispatcher: it takes the frames and
// releases them.
type releaser struct{}

func (releaser) Deliver(bufs []*link.Buf) {
	for _, b := range bufs {
		b.Release()
	}
}

// BenchmarkPipe measures Send through Deliver of 4 KiB frames, buffer pool
// included (link.Get by the sender, Release by the receiver).
func BenchmarkPipe(b *testing.B) {
	for _, fc := range []struct {
		name   string
		faults mem.Faults
	}{
		{"perfect", mem.Faults{}},
		{"loss1%", mem.Faults{Seed: 1, Loss: 0.01}},
	} {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/batch=%d", fc.name, batch), func(b *testing.B) {
				a, p, err := mem.Pipe(v4a, v4b, fc.faults, mem.Faults{})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				defer p.Close()
				p.Attach(releaser{})
				var tmpl [4096 + 48]byte
				fill(tmpl[:], v4b, 0, 20)
				bufs := make([]*link.Buf, batch)
				b.SetBytes(int64(len(tmpl) * batch))
				b.ReportAllocs()
				for b.Loop() {
					for i := range bufs {
						bufs[i] = link.Get(len(tmpl))
						copy(bufs[i].Bytes()[:48], tmpl[:48]) // headers only: the link never reads the payload
					}
					a.Send(bufs)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/frame")
			})
		}
	}
}

// BenchmarkPipeLink isolates the link's own cost: the same buffers go
// round and round (the receiver hands them back instead of releasing).
func BenchmarkPipeLink(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			a, p, err := mem.Pipe(v4a, v4b, mem.Faults{}, mem.Faults{})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			defer p.Close()
			p.Attach(&sink{})
			bufs := make([]*link.Buf, batch)
			for i := range bufs {
				bufs[i] = link.Get(4096 + 48)
				fill(bufs[i].Bytes(), v4b, 0, 20)
			}
			b.ReportAllocs()
			for b.Loop() {
				a.Send(bufs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/frame")
		})
	}
}

// BenchmarkMemcpy4K is the physical reference for the in-process link:
// copying one 4 KiB payload, which each side of a real transfer does once.
func BenchmarkMemcpy4K(b *testing.B) {
	src, dst := make([]byte, 4096), make([]byte, 4096)
	b.SetBytes(4096)
	for b.Loop() {
		copy(dst, src)
	}
}
