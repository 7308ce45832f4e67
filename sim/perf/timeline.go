package perf

import (
	"sort"

	"github.com/rnic/rnic/sim"
)

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
	// RateGbps is the congestion control's rate of the workload's first
	// client QP (its flow) averaged over the bin; 0 without congestion
	// control.
	RateGbps float64
	// QueueBytes is the deepest the watched switch port's queue (towards
	// the run's first server) got in the bin, or, if nothing changed it
	// in the bin, its depth then; -1 before the first frame.
	QueueBytes int64
}

// points returns the timeline in at most reportBins bins (wider ones
// merged from the recorded): a rate over a bin that holds a few
// operations at least, rather than one that aliases with them. The
// flow's rate and the queue's depth are set in the same bins.
func (tl *timeline) points(rates *rateLog, queue *gauge) []TimelinePoint {
	for len(tl.ops) > reportBins {
		tl.halve()
	}
	out := make([]TimelinePoint, len(tl.ops))
	sec := float64(tl.width) / 1e9
	for i := range tl.ops {
		at := sim.Time(i) * tl.width
		out[i] = TimelinePoint{At: at, Width: tl.width,
			Gbps: float64(tl.bytes[i]) * 8 / sec / 1e9, Mops: float64(tl.ops[i]) / sec / 1e6,
			RateGbps: rates.average(at, at+tl.width) / 1e9, QueueBytes: queue.level(at, at+tl.width)}
	}
	return out
}

// rateLog is a flow's rate as a step function: the rate from each change
// on (before the first, the start rate).
type rateLog struct {
	start float64  // bits/s before the first change (0: no congestion control)
	from  sim.Time // the flow's start: no rate before it
	at    []sim.Time
	bps   []float64
}

func (l *rateLog) add(t sim.Time, bps float64) {
	l.at = append(l.at, t)
	l.bps = append(l.bps, bps)
}

// average returns the time-weighted mean rate over [from, to).
func (l *rateLog) average(from, to sim.Time) float64 {
	if l == nil || l.start == 0 {
		return 0
	}
	if from = max(from, l.from); to <= from {
		return 0
	}
	i := sort.Search(len(l.at), func(i int) bool { return l.at[i] > from })
	cur := l.start
	if i > 0 {
		cur = l.bps[i-1]
	}
	var sum float64
	t := from
	for ; i < len(l.at) && l.at[i] < to; i++ {
		sum += cur * float64(l.at[i]-t)
		t, cur = l.at[i], l.bps[i]
	}
	sum += cur * float64(to-t)
	return sum / float64(to-from)
}

// gauge records a level over virtual time (a queue's depth) in bins like
// timeline's: the largest value and the last one of each.
type gauge struct {
	width     sim.Time
	max, last []int64 // -1: no sample in the bin
}

func (g *gauge) add(t sim.Time, v int) {
	if g.width == 0 {
		g.width = firstBin
	}
	i := int(t / g.width)
	for i >= maxBins {
		g.halve()
		i = int(t / g.width)
	}
	for len(g.max) <= i {
		g.max, g.last = append(g.max, -1), append(g.last, -1)
	}
	g.max[i] = max(g.max[i], int64(v))
	g.last[i] = int64(v)
}

func (g *gauge) halve() {
	n := (len(g.max) + 1) / 2
	for i := range n {
		m, l := g.max[2*i], g.last[2*i]
		if 2*i+1 < len(g.max) && g.last[2*i+1] >= 0 {
			m, l = max(m, g.max[2*i+1]), g.last[2*i+1]
		}
		g.max[i], g.last[i] = m, l
	}
	g.max, g.last = g.max[:n], g.last[:n]
	g.width *= 2
}

// level returns the largest value recorded in [from, to), or the last
// one before from if none was (-1 if none ever was).
func (g *gauge) level(from, to sim.Time) int64 {
	if g == nil || g.width == 0 {
		return -1
	}
	lo, hi := int(from/g.width), int((to-1)/g.width)
	best := int64(-1)
	for i := lo; i <= hi && i < len(g.max); i++ {
		best = max(best, g.max[i])
	}
	if best >= 0 {
		return best
	}
	for i := min(lo, len(g.last)) - 1; i >= 0; i-- {
		if g.last[i] >= 0 {
			return g.last[i]
		}
	}
	return -1
}
