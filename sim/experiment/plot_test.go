package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/perf"
)

func TestSavePlot(t *testing.T) {
	sw := tinySweep()
	rows := tinyRows(t)
	cols := sw.Columns(false)
	dir := t.TempDir()
	for _, tc := range []struct {
		file  string
		ps    PlotSpec
		magic string
	}{
		{"mops.png", PlotSpec{X: "qps", Y: "mops", Series: "test", LogX: true}, "\x89PNG"},
		{"mops.svg", PlotSpec{X: "qps", Y: "mops", Series: "test"}, "<?xml"},
		{"lat.svg", PlotSpec{X: "qps", Y: "lat_p99_ns", LogY: true, Title: "p99"}, "<?xml"},
		{"auto-series.pdf", PlotSpec{X: "qps", Y: "gbps"}, "%PDF"},
	} {
		path := filepath.Join(dir, tc.file)
		if err := SavePlot(path, sw, cols, rows, tc.ps); err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte(tc.magic)) {
			t.Errorf("%s: %d bytes starting %q, %v", tc.file, len(b), b[:min(len(b), 8)], err)
		}
	}
}

func TestPlotLines(t *testing.T) {
	sw := tinySweep()
	cols := sw.Columns(false)
	rows := tinyRows(t)
	for _, tc := range []struct {
		ps   PlotSpec
		want []string
	}{
		{PlotSpec{X: "qps", Y: "mops", Series: "test"}, []string{"write_lat", "write_bw"}},
		{PlotSpec{X: "qps", Y: "mops"}, []string{"test=write_lat", "test=write_bw"}},
		// lat_p99_ns has no value for bandwidth tests.
		{PlotSpec{X: "qps", Y: "lat_p99_ns", Series: "test"}, []string{"write_lat"}},
		{PlotSpec{X: "qps", Y: "mops", Series: "size"}, []string{"64 test=write_lat", "64 test=write_bw"}},
	} {
		lines, err := tc.ps.lines(sw, cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range lines {
			names = append(names, l.name)
			if len(l.xy) != 2 || l.xy[0].X != 1 || l.xy[1].X != 2 {
				t.Errorf("%+v: line %q has points %v; want x = 1, 2", tc.ps, l.name, l.xy)
			}
		}
		if strings.Join(names, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%+v: lines %q, want %q", tc.ps, names, tc.want)
		}
	}
}

func TestPlotErrors(t *testing.T) {
	sw := tinySweep()
	cols := sw.Columns(false)
	rows := tinyRows(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		file string
		ps   PlotSpec
		want string
	}{
		{"p.txt", PlotSpec{X: "qps", Y: "mops"}, "must end in .png, .svg, .pdf"},
		{"p.png", PlotSpec{X: "qpz", Y: "mops"}, `x: no column "qpz"`},
		{"p.png", PlotSpec{X: "qps", Y: "test"}, "y: column test is not numeric"},
		{"p.png", PlotSpec{X: "qps", Y: "mops", Series: "color"}, `series: no column "color"`},
		{"p.png", PlotSpec{X: "mr_churn_ns", Y: "mops", LogX: true}, "log scale needs positive values"},
		{"p.png", PlotSpec{X: "qps", Y: "c_rx_drops", LogY: true}, "log scale needs positive values"},
	} {
		path := filepath.Join(dir, tc.file)
		err := SavePlot(path, sw, cols, rows, tc.ps)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: error %v, want %q", tc.file, tc.ps, err, tc.want)
		}
		if _, statErr := os.Stat(path); statErr == nil {
			t.Errorf("%s %+v: file written despite the error", tc.file, tc.ps)
		}
	}
}

func TestFirstSwept(t *testing.T) {
	sw := tinySweep()
	if got := sw.FirstSwept(sw.Columns(false)); got != "qps" {
		t.Errorf("FirstSwept = %q, want qps (test is not numeric)", got)
	}
	one := &Sweep{QPs: []int{4}}
	if got := one.FirstSwept(one.Columns(false)); got != "" {
		t.Errorf("FirstSwept of a single run = %q", got)
	}
}

func TestLineKeys(t *testing.T) {
	sw := &Sweep{Tests: []perf.Test{perf.WriteBW, perf.ReadBW}, Pairs: []int{1, 2}, QPs: []int{1, 8}, Sizes: []int{64}}
	cols := sw.Columns(false)
	for _, tc := range []struct {
		ps   PlotSpec
		want string
	}{
		{PlotSpec{X: "qps", Series: "test"}, "test pairs"},
		{PlotSpec{X: "qps"}, "test pairs"},
		{PlotSpec{X: "pairs", Series: "test"}, "test qps"},
		{PlotSpec{X: "hosts", Series: "test"}, "test qps"}, // hosts and pairs vary together
		{PlotSpec{X: "qps", Series: "hosts"}, "hosts test"},
		{PlotSpec{X: "size", Series: "qps"}, "qps test pairs"},
	} {
		var names []string
		for _, c := range tc.ps.lineKeys(sw, cols) {
			names = append(names, c.Name)
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("%+v: line keys %q, want %q", tc.ps, got, tc.want)
		}
	}
}
