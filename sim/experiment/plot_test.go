package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/perf"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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

// TestLogTicks: a logarithmic axis always has at least two labelled ticks
// inside its range; gonum's LogTicks labelled only powers of ten, so
// latencies between 1007 and 6367 ns had none.
func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string // the labels, in order
	}{
		{1, 4096, "1 10 100 1000"},
		{8, 32768, "10 100 1000 10000"},
		{64, 4096, "100 1000"},
		{1007, 6367, "2000 3000 4000 5000 6000"},
		{1.5, 40, "2 5 10 20"},
		{0.2, 0.9, "0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9"},
		{1007, 1063, "1020 1040 1060"}, // within one multiple: linear ticks
		{1e6, 1e9, "1000000 10000000 100000000 1e+09"},
	} {
		var labels []string
		for _, tk := range (logTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Value < tc.lo || tk.Value > tc.hi {
				t.Errorf("[%g, %g]: tick %g outside the range", tc.lo, tc.hi, tk.Value)
			}
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("[%g, %g]: labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestPlotLayout: the legend lies beside the data area, not over it, its
// top level with the data's; the Y axis of a --logy plot of values within
// one decade has labels; axis titles fit their axes.
func TestPlotLayout(t *testing.T) {
	sw := tinySweep()
	cols := sw.Columns(false)
	rows := tinyRows(t)
	for _, ps := range []PlotSpec{
		{X: "qps", Y: "mops", Series: "test"},
		{X: "qps", Y: "lat_p50_ns", Series: "test", LogX: true, LogY: true},
		{X: "qps", Y: "mops", Series: "test", Width: 10 * vg.Centimeter, Height: 6 * vg.Centimeter},
	} {
		p, legend, err := ps.build(sw, cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		w, h := ps.size()
		dc := draw.New(vgimg.New(w, h))
		plotArea, legendArea := layout(p, &legend, dc)
		data := p.DataCanvas(plotArea)
		if legendArea.Min.X < data.Max.X || legendArea.Max.X > dc.Max.X {
			t.Errorf("%+v: legend x in [%v, %v], data area ends at %v, image at %v", ps, legendArea.Min.X, legendArea.Max.X, data.Max.X, dc.Max.X)
		}
		if legendArea.Max.Y != data.Max.Y {
			t.Errorf("%+v: legend top %v, data area top %v", ps, legendArea.Max.Y, data.Max.Y)
		}
		if r := legend.Rectangle(legendArea); r.Size().X > legendArea.Size().X || r.Size().Y > legendArea.Size().Y {
			t.Errorf("%+v: legend of %v does not fit its area %v", ps, r.Size(), legendArea.Size())
		}
		labels := 0
		for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
			if tk.Label != "" && tk.Value >= p.Y.Min && tk.Value <= p.Y.Max {
				labels++
			}
		}
		if labels < 2 {
			t.Errorf("%+v: Y axis [%g, %g] has %d tick labels", ps, p.Y.Min, p.Y.Max, labels)
		}
		if lw := p.Y.Label.TextStyle.Width(p.Y.Label.Text); lw > data.Size().Y+2*vg.Centimeter {
			t.Errorf("%+v: Y title %q (%v) is longer than the axis (%v)", ps, p.Y.Label.Text, lw, data.Size().Y)
		}
	}
}
