package experiment

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

// The parsers below read one list element each; the command line splits
// its comma-separated lists and calls them, so that errors name the flag.

// ParseTest reads a test name ("write_bw", also "ib_write_bw").
func ParseTest(s string) (perf.Test, error) {
	name := strings.TrimPrefix(strings.TrimSpace(s), "ib_")
	for _, known := range perf.Tests {
		if name == known.String() {
			return known, nil
		}
	}
	names := make([]string, len(perf.Tests))
	for i, known := range perf.Tests {
		names[i] = known.String()
	}
	return 0, fmt.Errorf("unknown test %q (tests: %s)", s, strings.Join(names, ", "))
}

// ParseSize reads a non-negative count of bytes or things, with an
// optional binary suffix: 64, 4K, 4KiB, 4KB, 2M, 1G.
func ParseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if u, ok := strings.CutSuffix(t, "ib"); ok {
		t = u
	} else {
		t = strings.TrimSuffix(t, "b")
	}
	mult := 1
	if n := len(t); n > 0 {
		if shift := strings.IndexByte("kmg", t[n-1]); shift >= 0 {
			mult = 1 << (10 * (shift + 1))
			t = t[:n-1]
		}
	}
	v, err := strconv.Atoi(t)
	if err != nil || v < 0 || v > math.MaxInt/mult {
		return 0, fmt.Errorf("%q is not a non-negative number (64, 4K, 2M, 1G)", s)
	}
	return v * mult, nil
}

// ParseSizes reads one list element: a size, or a range "a..b" of the
// powers of two from a up to b (1..4096: 1, 2, 4, …, 4096).
func ParseSizes(s string) ([]int, error) {
	lo, hi, isRange := strings.Cut(s, "..")
	if !isRange {
		v, err := ParseSize(s)
		return []int{v}, err
	}
	a, err := ParseSize(lo)
	if err != nil {
		return nil, err
	}
	b, err := ParseSize(hi)
	if err != nil {
		return nil, err
	}
	if a <= 0 || b < a {
		return nil, fmt.Errorf("range %q: want 0 < start <= end", s)
	}
	var out []int
	for v := a; v <= b; v *= 2 {
		out = append(out, v)
	}
	return out, nil
}

// ParseDuration reads a virtual time: a Go duration ("10us", "1ms") or a
// number of nanoseconds.
func ParseDuration(s string) (sim.Time, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil && n >= 0 {
		return sim.Time(n), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (10us, 1ms, or nanoseconds)", s)
	}
	return sim.Time(d.Nanoseconds()), nil
}

// ParseSet reads a profile override "key=value" or a swept one
// "key=v1,v2,…". Commas inside brackets, braces or quotes belong to the
// value ("pcie.read_latency=[{bytes=64, ns=500}]").
func ParseSet(s string) (Set, error) {
	key, vals, ok := strings.Cut(s, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return Set{}, fmt.Errorf("%q: want key=value (caches.qpc.entries=1024)", s)
	}
	set := Set{Key: key}
	for _, v := range splitTop(vals) {
		v = strings.TrimSpace(v)
		if v == "" {
			return Set{}, fmt.Errorf("%q: empty value for %s", s, key)
		}
		set.Values = append(set.Values, v)
	}
	return set, nil
}

// splitTop splits s at the commas outside brackets, braces and quotes.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote rune
	for i, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
