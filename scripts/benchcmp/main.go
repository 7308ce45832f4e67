// Command benchcmp compares two builds' benchmark results measured in one
// run, interleaved (scripts/bench.sh --against REV runs them A B A B …):
// for each benchmark and unit, each build's median and range over the
// rounds, and the ratio of this tree's to the other's, round by round
// (median and range), so that a machine's noise shows as spread rather
// than as a change.
//
//	go run ./scripts/benchcmp -old 'dir/old.*.txt' -new 'dir/new.*.txt' [-guard 25]
//
// Round i of -old is paired with round i of -new (the files sorted by
// name). With -guard P it exits 1 when a guarded measure — the protocol
// engine's cost per small packet (BenchmarkEnginePairSmall ns/pkt) and
// the simulator's speed (BenchmarkSimSpeed Mpkts/s) — is more than P %
// worse in this tree by the median of the per-round ratios.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// results maps "benchmark unit" to its value in one round.
type results map[string]float64

// parse reads `go test -bench` output. A benchmark named more than once
// in a round (-count, or bench.sh's A B B A rounds) gets the mean of its
// values.
func parse(r io.Reader) (results, error) {
	out := results{}
	n := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				k := name + " " + f[i+1]
				out[k] += v
				n[k]++
			}
		}
	}
	for k := range out {
		out[k] /= n[k]
	}
	return out, sc.Err()
}

// lowerIsBetter says which way a unit improves, where it is known.
func lowerIsBetter(unit string) (lower, known bool) {
	switch {
	case unit == "ns/op", unit == "ns/pkt", unit == "B/op", unit == "allocs/op",
		strings.HasSuffix(unit, "_ns"), strings.HasSuffix(unit, "usec"), strings.HasSuffix(unit, "B/QP"):
		return true, true
	case strings.HasSuffix(unit, "MB/s"), strings.HasSuffix(unit, "/s"):
		return false, true
	}
	return false, false
}

// guarded reports whether a measure is one the guard holds.
func guarded(key string) bool {
	name, unit, _ := strings.Cut(key, " ")
	switch {
	case name == "BenchmarkEnginePairSmall" && unit == "ns/pkt":
		return true
	case strings.HasPrefix(name, "BenchmarkSimSpeed/") && unit == "Mpkts/s":
		return true
	}
	return false
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func span(v []float64) (lo, hi float64) { return slices.Min(v), slices.Max(v) }

// load reads the rounds a glob names, in name order.
func load(glob string) ([]results, error) {
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no files match %q", glob)
	}
	sort.Strings(files)
	var rounds []results
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		r, err := parse(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rounds = append(rounds, r)
	}
	return rounds, nil
}

// fmtv prints a value with three significant digits or more.
func fmtv(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func main() {
	oldGlob := flag.String("old", "", "the other build's rounds (a glob)")
	newGlob := flag.String("new", "", "this tree's rounds (a glob)")
	oldName := flag.String("old-name", "REV", "the other build's name in the table")
	guard := flag.Float64("guard", 0, "fail when a guarded measure is more than this many per cent worse (0: no guard)")
	flag.Parse()
	olds, err := load(*oldGlob)
	if err == nil {
		var news []results
		news, err = load(*newGlob)
		if err == nil {
			os.Exit(compare(os.Stdout, *oldName, olds, news, *guard))
		}
	}
	fmt.Fprintln(os.Stderr, "benchcmp:", err)
	os.Exit(2)
}

// compare prints the table and applies the guard; it returns the exit
// status.
func compare(w io.Writer, oldName string, olds, news []results, guard float64) int {
	keys := map[string]bool{}
	for _, r := range append(slices.Clone(olds), news...) {
		for k := range r {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	fmt.Fprintf(w, "%d rounds of %s and %d of this tree, interleaved in one run; ratio: this tree ÷ %s, round by round\n\n", len(olds), oldName, len(news), oldName)
	fmt.Fprintf(w, "| benchmark | unit | %s median (range) | this tree median (range) | ratio median (range) | |\n", oldName)
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	status := 0
	for _, k := range sorted {
		name, unit, _ := strings.Cut(k, " ")
		var ov, nv, ratios []float64
		for i := range max(len(olds), len(news)) {
			o, okO := 0.0, false
			if i < len(olds) {
				o, okO = olds[i][k]
			}
			n, okN := 0.0, false
			if i < len(news) {
				n, okN = news[i][k]
			}
			if okO {
				ov = append(ov, o)
			}
			if okN {
				nv = append(nv, n)
			}
			if okO && okN && o != 0 {
				ratios = append(ratios, n/o)
			}
		}
		cell := func(v []float64) string {
			if len(v) == 0 {
				return "(not run)"
			}
			lo, hi := span(v)
			return fmt.Sprintf("%s (%s–%s)", fmtv(median(v)), fmtv(lo), fmtv(hi))
		}
		verdict := ""
		rc := "–"
		if len(ratios) > 0 {
			m := median(ratios)
			lo, hi := span(ratios)
			rc = fmt.Sprintf("%.3f (%.3f–%.3f)", m, lo, hi)
			if lower, known := lowerIsBetter(unit); known {
				worse := m > 1
				if !lower {
					worse = m < 1
				}
				// The change, in per cent of the better build's cost.
				pct := (m - 1) * 100
				if !lower {
					pct = (1/m - 1) * 100
				}
				if worse {
					verdict = fmt.Sprintf("%.0f %% worse", pct)
				} else {
					verdict = fmt.Sprintf("%.0f %% better", -pct)
				}
				if guard > 0 && guarded(k) {
					if worse && pct > guard {
						verdict += fmt.Sprintf(", GUARD: more than %.0f %%", guard)
						status = 1
					} else {
						verdict += ", guarded"
					}
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(name, "Benchmark"), unit, cell(ov), cell(nv), rc, verdict)
	}
	if status != 0 {
		fmt.Fprintf(w, "\nThe guard failed: a guarded measure is more than %.0f %% worse than %s in the median of the interleaved rounds.\n", guard, oldName)
	}
	return status
}
