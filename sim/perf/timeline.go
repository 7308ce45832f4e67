package perf

import "github.com/rnic/rnic/sim"

// timeline counts what a workload completes over virtual time, in bins
// that start at 1 µs and double in width (merging pairs) whenever the
// run outgrows maxBins of them: memory stays bounded however long the
// run, and a short run keeps its detail.
type timeline struct {
	width sim.Time // bin width (0: nothing recorded yet)
	ops   []int64
	bytes []int64
}

const (
	firstBin   = sim.Microsecond
	maxBins    = 2048
	reportBins = 128
)

// add records ops operations of bytes bytes completed at t.
func (tl *timeline) add(t sim.Time, ops int, bytes int64) {
	if tl.width == 0 {
		tl.width = firstBin
	}
	i := int(t / tl.width)
	for i >= maxBins {
		tl.halve()
		i = int(t / tl.width)
	}
	for len(tl.ops) <= i {
		tl.ops, tl.bytes = append(tl.ops, 0), append(tl.bytes, 0)
	}
	tl.ops[i] += int64(ops)
	tl.bytes[i] += bytes
}

// halve doubles the bin width, merging neighbouring bins.
func (tl *timeline) halve() {
	n := (len(tl.ops) + 1) / 2
	for i := range n {
		o, b := tl.ops[2*i], tl.bytes[2*i]
		if 2*i+1 < len(tl.ops) {
			o, b = o+tl.ops[2*i+1], b+tl.bytes[2*i+1]
		}
		tl.ops[i], tl.bytes[i] = o, b
	}
	tl.ops, tl.bytes = tl.ops[:n], tl.bytes[:n]
	tl.width *= 2
}

// TimelinePoint is one bin of a workload's timeline: what it completed in
// [At, At+Width) of virtual time, as rates.
type TimelinePoint struct {
	At, Width sim.Time
	Gbps      float64
	Mops      float64
}

// points returns the timeline in at most reportBins bins (wider ones
// merged from the recorded): a rate over a bin that holds a few
// operations at least, rather than one that aliases with them.
func (tl *timeline) points() []TimelinePoint {
	for len(tl.ops) > reportBins {
		tl.halve()
	}
	out := make([]TimelinePoint, len(tl.ops))
	sec := float64(tl.width) / 1e9
	for i := range tl.ops {
		out[i] = TimelinePoint{At: sim.Time(i) * tl.width, Width: tl.width,
			Gbps: float64(tl.bytes[i]) * 8 / sec / 1e9, Mops: float64(tl.ops[i]) / sec / 1e6}
	}
	return out
}
