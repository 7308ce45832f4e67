package timing

import "math/bits"

// histSub is the number of sub-buckets per power of two: values are kept
// within 1/histSub (12.5%) of their true size, enough for percentiles of
// queueing delay.
const (
	histSubBits = 3
	histSub     = 1 << histSubBits
	histBuckets = (63 - histSubBits + 1) * histSub // values are int64: at most 63 bits
)

// Histogram counts non-negative values (nanoseconds of delay) in
// log-linear buckets: exact below histSub, then histSub buckets per power
// of two. It is a fixed array, so recording never allocates.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    int64
	max    int64
}

func histBucket(v int64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 - histSubBits // shift that leaves histSubBits+1 bits
	return (e+1)*histSub + int(uint64(v)>>uint(e)) - histSub
}

// histUpper returns the largest value that falls in bucket b.
func histUpper(b int) int64 {
	if b < histSub {
		return int64(b)
	}
	e := b/histSub - 1
	m := int64(b%histSub + histSub)
	return (m+1)<<uint(e) - 1
}

// Add records v (negative values count as 0).
func (h *Histogram) Add(v int64) {
	v = max(v, 0)
	h.counts[histBucket(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Mean returns the average value, or 0 if none was recorded.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

// Max returns the largest value recorded.
func (h *Histogram) Max() int64 { return h.max }

// Quantile returns an upper bound (within 12.5%) of the q-quantile,
// q in [0, 1]; the exact maximum for q = 1.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(q*float64(h.n)) + 1
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(histUpper(b), h.max)
		}
	}
	return h.max
}

// Reset clears the histogram.
func (h *Histogram) Reset() { *h = Histogram{} }
