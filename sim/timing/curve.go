package timing

import (
	"fmt"

	"github.com/rnic/rnic/sim"
)

// Point is one measured latency: an operation of Bytes bytes took Ns
// nanoseconds (unloaded, median).
type Point struct {
	Bytes int   `toml:"bytes"`
	Ns    int64 `toml:"ns"`
}

// Curve is a latency as a function of transfer size, interpolated
// linearly between measured points: flat below the first point (small
// transfers cost the same fixed round trip) and extrapolated along the
// last segment beyond the last one (large transfers grow with bandwidth).
type Curve struct {
	pts []Point
}

// NewCurve validates points (sizes strictly increasing and positive,
// latencies positive) and returns their curve. It copies points.
func NewCurve(points []Point) (Curve, error) {
	if len(points) == 0 {
		return Curve{}, fmt.Errorf("timing: latency curve has no points")
	}
	for i, p := range points {
		switch {
		case p.Bytes <= 0:
			return Curve{}, fmt.Errorf("timing: latency point %d: bytes %d is not positive", i, p.Bytes)
		case p.Ns <= 0:
			return Curve{}, fmt.Errorf("timing: latency point %d: ns %d is not positive", i, p.Ns)
		case i > 0 && p.Bytes <= points[i-1].Bytes:
			return Curve{}, fmt.Errorf("timing: latency point %d: bytes %d not above the previous point's %d", i, p.Bytes, points[i-1].Bytes)
		}
	}
	return Curve{pts: append([]Point(nil), points...)}, nil
}

// Points returns a copy of the curve's points.
func (c Curve) Points() []Point { return append([]Point(nil), c.pts...) }

// Ps returns the latency of an n-byte transfer in picoseconds (rounded
// down), so that composing it with picosecond serialization times stays
// exact at measured points.
func (c Curve) Ps(n int) int64 {
	p := c.pts
	switch {
	case len(p) == 0:
		return 0
	case n <= p[0].Bytes || len(p) == 1:
		return p[0].Ns * psPerNs
	}
	i := 1
	for i < len(p)-1 && p[i].Bytes < n {
		i++
	}
	a, b := p[i-1], p[i]
	// Interpolate (or, past the last point, extrapolate) on segment a-b.
	num := (b.Ns - a.Ns) * psPerNs * int64(n-a.Bytes)
	den := int64(b.Bytes - a.Bytes)
	v := a.Ns*psPerNs + floorDiv(num, den)
	return max(v, 0)
}

// Latency returns the latency of an n-byte transfer, rounded up to the
// nanosecond.
func (c Curve) Latency(n int) sim.Time { return ceilNs(c.Ps(n)) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// PCIeBenchXeonE52630v4 are the median latencies of DMA reads from host
// memory measured by pcie-bench (Neugebauer et al., "Understanding PCIe
// performance for end host networking", SIGCOMM 2018) with a Netronome
// NFP-6000 (PCIe Gen3 x8) in a Broadwell Xeon E5-2630 v4 host (Dell
// T430), device and memory on the same socket, warm host cache, IOMMU
// off: test LAT_DMA_RD, sequential pattern, 8 KiB window, column "Med(ns)"
// of lat_dma_sizes.dat in github.com/pcie-bench/data, directory
// nfp6000-1.2GHz_bdw-Xeon-E5-2630v4-dell-t430-s0-s0-s0. These are the
// paper's latency-by-size figure for that host: 546 ns up to 64 B, 1133
// ns at 2 KiB. The 4 to 48 B points (533-560 ns) are left out: they are
// flat within noise, and the curve is flat below its first point anyway.
var PCIeBenchXeonE52630v4 = []Point{
	{Bytes: 64, Ns: 546},
	{Bytes: 128, Ns: 573},
	{Bytes: 256, Ns: 626},
	{Bytes: 512, Ns: 706},
	{Bytes: 768, Ns: 773},
	{Bytes: 1024, Ns: 853},
	{Bytes: 1280, Ns: 920},
	{Bytes: 1520, Ns: 986},
	{Bytes: 2048, Ns: 1133},
}
