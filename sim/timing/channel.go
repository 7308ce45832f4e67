package timing

import (
	"fmt"
	"math"
	"math/bits"
)

// Channel is one direction of a serial link whose bandwidth is shared by
// many transfers that interleave at packet granularity, like the TLPs of
// concurrent DMA reads on PCIe. A transfer becomes ready at some time,
// possibly in the future (read completions are ready only after the
// host's memory latency), and occupies the channel for its serialization
// time, taken from the earliest free time at or after it is ready: it may
// be split around transfers reserved earlier. Reserving in the order
// transfers are issued is therefore first-ready-first-served at TLP
// granularity, with no head-of-line blocking of a short completion behind
// a long one that is not ready yet.
//
// The channel keeps the busy intervals that lie in the future, in
// picoseconds; intervals that ended before the caller's "now" are dropped,
// so the list stays as short as the number of transfers in flight.
type Channel struct {
	bytesPerSec int64
	busy        []span // sorted, disjoint, non-adjacent
	st          ChannelStats
}

// span is a busy interval [start, end) in picoseconds.
type span struct{ start, end int64 }

// ChannelStats count a channel's traffic.
type ChannelStats struct {
	Transfers uint64 // reservations
	Bytes     uint64 // bytes carried, framing included
	BusyPs    int64  // serialization time of those bytes
}

// Utilization returns the fraction of a window of windowPs picoseconds the
// channel was busy.
func (s ChannelStats) Utilization(windowPs int64) float64 {
	if windowPs <= 0 {
		return 0
	}
	return float64(s.BusyPs) / float64(windowPs)
}

// NewChannel returns an idle channel carrying bytesPerSec bytes per second.
func NewChannel(bytesPerSec int64) (*Channel, error) {
	if bytesPerSec <= 0 {
		return nil, fmt.Errorf("timing: channel bandwidth %d B/s is not positive", bytesPerSec)
	}
	return &Channel{bytesPerSec: bytesPerSec}, nil
}

// BytesPerSec returns the channel's bandwidth.
func (c *Channel) BytesPerSec() int64 { return c.bytesPerSec }

// TransferPs returns the serialization time of n bytes in picoseconds,
// rounded up.
func (c *Channel) TransferPs(n int) int64 {
	return transferPs(int64(n), 1, c.bytesPerSec)
}

// transferPs returns ceil(units*scale*1e12/perSec) picoseconds, in
// 128-bit arithmetic so no transfer size can overflow.
func transferPs(units, scale, perSec int64) int64 {
	hi, lo := bits.Mul64(uint64(units*scale), 1e12)
	lo, carry := bits.Add64(lo, uint64(perSec-1), 0)
	hi += carry
	if hi >= uint64(perSec) {
		panic(fmt.Sprintf("timing: transfer of %d units overflows", units))
	}
	q, _ := bits.Div64(hi, lo, uint64(perSec))
	if q > math.MaxInt64 {
		panic(fmt.Sprintf("timing: transfer of %d units overflows", units))
	}
	return int64(q)
}

// Reserve books durPs picoseconds of the channel for a transfer of n bytes
// that is ready at readyPs, at or after nowPs (the caller's current time,
// below which history is forgotten), and returns when its last byte is
// sent.
func (c *Channel) Reserve(nowPs, readyPs, durPs int64, n int) (endPs int64) {
	if readyPs < nowPs || durPs < 0 {
		panic(fmt.Sprintf("timing: channel reservation ready %d ps before now %d ps, or negative duration %d", readyPs, nowPs, durPs))
	}
	c.forget(nowPs)
	c.st.Transfers++
	c.st.Bytes += uint64(n)
	c.st.BusyPs += durPs
	if durPs == 0 {
		return readyPs
	}
	if n := len(c.busy); n == 0 || readyPs >= c.busy[n-1].end {
		// Ready after everything booked (the usual case): no gap to
		// fill, the transfer goes at the end, or extends the last span
		// it touches.
		endPs = readyPs + durPs
		if n > 0 && readyPs == c.busy[n-1].end {
			c.busy[n-1].end = endPs
		} else {
			c.busy = append(c.busy, span{readyPs, endPs})
		}
		return endPs
	}
	// Walk the gaps from readyPs on, filling them until durPs is placed.
	// first is the start of the first piece; every gap after it up to the
	// last piece is filled completely, so the pieces and the spans between
	// them merge into the single interval [first, endPs).
	t, left := readyPs, durPs
	first := int64(-1)
	i := 0
	for ; i < len(c.busy) && left > 0; i++ {
		sp := c.busy[i]
		if sp.end <= t {
			continue
		}
		if gap := sp.start - t; gap > 0 {
			if first < 0 {
				first = t
			}
			if gap >= left {
				t += left
				left = 0
				break
			}
			left -= gap
		}
		t = sp.end
	}
	if first < 0 {
		first = t
	}
	endPs = t + left
	c.insert(first, endPs)
	return endPs
}

// forget drops intervals that end at or before nowPs: no later
// reservation can be ready before now.
func (c *Channel) forget(nowPs int64) {
	k := 0
	for k < len(c.busy) && c.busy[k].end <= nowPs {
		k++
	}
	if k > 0 {
		c.busy = c.busy[:copy(c.busy, c.busy[k:])]
	}
}

// insert marks [a, b) busy, merging it with every span it overlaps or
// touches.
func (c *Channel) insert(a, b int64) {
	i := 0
	for i < len(c.busy) && c.busy[i].end < a {
		i++
	}
	j := i
	for j < len(c.busy) && c.busy[j].start <= b {
		a = min(a, c.busy[j].start)
		b = max(b, c.busy[j].end)
		j++
	}
	switch {
	case j > i: // replace busy[i:j] by one span
		c.busy[i] = span{a, b}
		c.busy = append(c.busy[:i+1], c.busy[j:]...)
	default: // insert before busy[i]
		c.busy = append(c.busy, span{})
		copy(c.busy[i+1:], c.busy[i:])
		c.busy[i] = span{a, b}
	}
}

// FreeAtPs returns when the channel finishes everything booked so far.
func (c *Channel) FreeAtPs() int64 {
	if len(c.busy) == 0 {
		return 0
	}
	return c.busy[len(c.busy)-1].end
}

// Stats returns the channel's counters.
func (c *Channel) Stats() ChannelStats { return c.st }
