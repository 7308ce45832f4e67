package main

import (
	"strings"
	"testing"
)

func rounds(t *testing.T, outs ...string) []results {
	t.Helper()
	var rs []results
	for _, o := range outs {
		r, err := parse(strings.NewReader(o))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestGuard: the guard fails on the median of the per-round ratios, so
// one noisy round cannot fail it, and judges each unit in its direction
// (ns/pkt lower is better, Mpkts/s higher).
func TestGuard(t *testing.T) {
	engine := func(ns string) string {
		return "BenchmarkEnginePairSmall-2   1000   30000 ns/op   " + ns + " ns/pkt\n"
	}
	sim := func(m string) string {
		return "BenchmarkSimSpeed/qps=1/metadata-2   1   " + m + " Mpkts/s   2.0 Mops/s\n"
	}
	for _, tc := range []struct {
		name     string
		old, new []string
		fail     bool
		want     string
	}{
		{"same", []string{engine("400"), engine("410"), engine("390")}, []string{engine("405"), engine("400"), engine("395")}, false, "guarded"},
		{"engine 20% slower", []string{engine("400"), engine("400"), engine("400")}, []string{engine("480"), engine("480"), engine("480")}, false, "20 % worse, guarded"},
		{"engine 30% slower", []string{engine("400"), engine("400"), engine("400")}, []string{engine("520"), engine("520"), engine("520")}, true, "GUARD"},
		{"one noisy round", []string{engine("400"), engine("400"), engine("400")}, []string{engine("900"), engine("400"), engine("400")}, false, "guarded"},
		{"sim 30% slower", []string{sim("1.0"), sim("1.0"), sim("1.0")}, []string{sim("0.7"), sim("0.7"), sim("0.7")}, true, "GUARD"},
		{"sim faster", []string{sim("1.0"), sim("1.0"), sim("1.0")}, []string{sim("2.0"), sim("2.0"), sim("2.0")}, false, "50 % better"},
	} {
		var sb strings.Builder
		status := compare(&sb, "base", rounds(t, tc.old...), rounds(t, tc.new...), 25)
		if (status != 0) != tc.fail || !strings.Contains(sb.String(), tc.want) {
			t.Errorf("%s: status %d, output:\n%s\nwant fail %v and %q", tc.name, status, sb.String(), tc.fail, tc.want)
		}
	}
}

// TestNotRun: a benchmark one build does not have is shown as not run,
// with no ratio and no verdict.
func TestNotRun(t *testing.T) {
	var sb strings.Builder
	old := rounds(t, "BenchmarkA-2 10 5 ns/op\n")
	new := rounds(t, "BenchmarkA-2 10 5 ns/op\nBenchmarkB-2 10 7 ns/op\n")
	if compare(&sb, "base", old, new, 25) != 0 {
		t.Fatal("guard failed")
	}
	if !strings.Contains(sb.String(), "| B | ns/op | (not run) | 7.00 (7.00–7.00) | – |") {
		t.Errorf("output:\n%s", sb.String())
	}
}

// TestMeanOfRepeats: a benchmark run twice in one round (bench.sh's A B B
// A) counts as the mean of its two values.
func TestMeanOfRepeats(t *testing.T) {
	r := rounds(t, "BenchmarkA-2 10 100 ns/op\nBenchmarkA-2 10 300 ns/op\n")
	if got := r[0]["BenchmarkA ns/op"]; got != 200 {
		t.Errorf("mean of 100 and 300 = %v, want 200", got)
	}
}
