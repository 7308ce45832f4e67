package sim

import (
	"math"
	"strconv"
)

// Time is a point in virtual time, or a duration, in nanoseconds since the
// start of the simulation. An int64 of nanoseconds covers 292 years.
type Time int64

// Units of Time.
const (
	Nanosecond  Time = 1
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Never is a time after every event: a deadline that is not armed.
const Never Time = math.MaxInt64

// String formats t with the largest unit that keeps it at least 1, with up
// to 9 significant decimals and ASCII unit names ("0ns", "512ns",
// "1.5us", "2.000001ms", "3s"), so traces stay greppable and identical on
// every platform.
func (t Time) String() string {
	if t == Never {
		return "never"
	}
	neg := t < 0
	u := uint64(t)
	if neg {
		u = -u
	}
	var unit string
	var div uint64
	switch {
	case u < uint64(Microsecond):
		unit, div = "ns", 1
	case u < uint64(Millisecond):
		unit, div = "us", uint64(Microsecond)
	case u < uint64(Second):
		unit, div = "ms", uint64(Millisecond)
	default:
		unit, div = "s", uint64(Second)
	}
	b := make([]byte, 0, 24)
	if neg {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, u/div, 10)
	if frac := u % div; frac != 0 {
		// div is a power of ten, so frac+div printed without its leading
		// 1 is frac zero-padded to the unit's width.
		s := strconv.FormatUint(frac+div, 10)[1:]
		for len(s) > 0 && s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		b = append(b, '.')
		b = append(b, s...)
	}
	return string(append(b, unit...))
}
