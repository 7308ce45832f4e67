package timing

import (
	"encoding/json"
	"fmt"
	"math/bits"
)

// DefaultHistBits is the sub-bucket resolution of a zero Histogram:
// 2^3 sub-buckets per power of two keep values within 12.5% of their true
// size, enough for percentiles of queueing delay.
const DefaultHistBits = 3

// Histogram counts non-negative values (nanoseconds of delay) in
// log-linear buckets: exact below 2^Bits, then 2^Bits buckets per power
// of two. Its buckets are allocated by the first Add; recording never
// allocates after that.
type Histogram struct {
	// Bits sets the resolution: values are kept within 2^-Bits of their
	// true size (0: DefaultHistBits; 7 gives under 1%, for latencies).
	// Set it before the first Add.
	Bits   uint8
	counts []uint64
	n      uint64
	sum    int64
	max    int64
}

func (h *Histogram) bits() uint {
	if h.Bits == 0 {
		return DefaultHistBits
	}
	return uint(min(h.Bits, 16))
}

// histBuckets is the number of buckets at sb sub-bucket bits: values are
// int64, at most 63 bits.
func histBuckets(sb uint) int { return (63 - int(sb) + 1) << sb }

func histBucket(v int64, sb uint) int {
	sub := int64(1) << sb
	if v < sub {
		return int(v)
	}
	e := uint(bits.Len64(uint64(v))) - 1 - sb // shift that leaves sb+1 bits
	return int(int64(e+1)*sub + int64(uint64(v)>>e) - sub)
}

// histUpper returns the largest value that falls in bucket b.
func histUpper(b int, sb uint) int64 {
	sub := 1 << sb
	if b < sub {
		return int64(b)
	}
	e := uint(b/sub - 1)
	m := int64(b%sub + sub)
	return (m+1)<<e - 1
}

// Add records v (negative values count as 0).
func (h *Histogram) Add(v int64) {
	v = max(v, 0)
	sb := h.bits()
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets(sb))
	}
	h.counts[histBucket(v, sb)]++
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

// Quantile returns an upper bound (within 2^-Bits) of the q-quantile,
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
			return min(histUpper(b, h.bits()), h.max)
		}
	}
	return h.max
}

// Reset clears the histogram.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.n, h.sum, h.max = 0, 0, 0
}

// histJSON is a Histogram's form in JSON: its resolution, totals, and the
// buckets that counted anything as [bucket, count] pairs (a latency
// histogram has thousands of buckets, a few dozen of them used).
type histJSON struct {
	Bits    uint8       `json:"bits"`
	N       uint64      `json:"n"`
	Sum     int64       `json:"sum"`
	Max     int64       `json:"max"`
	Buckets [][2]uint64 `json:"buckets,omitempty"`
}

// MarshalJSON writes the histogram so that UnmarshalJSON restores it
// exactly (a sweep's shards are merged from it).
func (h *Histogram) MarshalJSON() ([]byte, error) {
	j := histJSON{Bits: h.Bits, N: h.n, Sum: h.sum, Max: h.max}
	for b, c := range h.counts {
		if c != 0 {
			j.Buckets = append(j.Buckets, [2]uint64{uint64(b), c})
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON restores a histogram written by MarshalJSON.
func (h *Histogram) UnmarshalJSON(data []byte) error {
	var j histJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*h = Histogram{Bits: j.Bits, n: j.N, sum: j.Sum, max: j.Max}
	if len(j.Buckets) > 0 {
		sb := h.bits()
		h.counts = make([]uint64, histBuckets(sb))
		for _, bc := range j.Buckets {
			if bc[0] >= uint64(len(h.counts)) {
				return fmt.Errorf("timing: histogram bucket %d out of range", bc[0])
			}
			h.counts[bc[0]] = bc[1]
		}
	}
	return nil
}
