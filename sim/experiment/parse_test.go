package experiment

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"64", []int{64}, false},
		{"0", []int{0}, false},
		{"4K", []int{4096}, false},
		{"4k", []int{4096}, false},
		{"4KiB", []int{4096}, false},
		{"4KB", []int{4096}, false},
		{"2M", []int{2 << 20}, false},
		{"1G", []int{1 << 30}, false},
		{" 8 ", []int{8}, false},
		{"1..16", []int{1, 2, 4, 8, 16}, false},
		{"1K..4K", []int{1024, 2048, 4096}, false},
		{"3..20", []int{3, 6, 12}, false},
		{"", nil, true},
		{"-1", nil, true},
		{"x", nil, true},
		{"4T", nil, true},
		{"1.5K", nil, true},
		{"9999999999G", nil, true},
		{"0..8", nil, true},
		{"8..1", nil, true},
		{"1..x", nil, true},
	} {
		got, err := ParseSizes(tc.in)
		if (err != nil) != tc.err || (!tc.err && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want sim.Time
		err  bool
	}{
		{"0", 0, false},
		{"1500", 1500, false},
		{"10us", 10 * sim.Microsecond, false},
		{"1ms", sim.Millisecond, false},
		{"2s", 2 * sim.Second, false},
		{"-1ms", 0, true},
		{"soon", 0, true},
	} {
		got, err := ParseDuration(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseSet(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Set
		err  bool
	}{
		{"caches.qpc.entries=100", Set{"caches.qpc.entries", []string{"100"}}, false},
		{"caches.qpc.entries=1, 2,4", Set{"caches.qpc.entries", []string{"1", "2", "4"}}, false},
		{"pcie.read_latency=[{bytes=64, ns=500}, {bytes=128, ns=600}]",
			Set{"pcie.read_latency", []string{"[{bytes=64, ns=500}, {bytes=128, ns=600}]"}}, false},
		{`name="a,b",c`, Set{"name", []string{`"a,b"`, "c"}}, false},
		{"caches.qpc.entries", Set{}, true},
		{"=5", Set{}, true},
		{"a=", Set{}, true},
		{"a=1,,2", Set{}, true},
	} {
		got, err := ParseSet(tc.in)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSet(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseTest(t *testing.T) {
	for _, known := range perf.Tests {
		for _, in := range []string{known.String(), "ib_" + known.String()} {
			if got, err := ParseTest(in); err != nil || got != known {
				t.Errorf("ParseTest(%q) = %v, %v", in, got, err)
			}
		}
	}
	if _, err := ParseTest("write_mops"); err == nil || !strings.Contains(err.Error(), "write_bw") {
		t.Errorf("ParseTest of an unknown test: %v; want an error listing the tests", err)
	}
}
