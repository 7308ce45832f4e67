package experiment

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	plottext "gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotFormats are the file formats a plot can be written in, by file
// extension.
var PlotFormats = []string{"png", "svg", "pdf"}

// PlotSpec says what to plot: column Y against column X, one line per
// value of column Series.
type PlotSpec struct {
	X, Y string
	// Series names the column that tells lines apart; other parameters
	// that vary in the sweep (except X) split lines further, so that a
	// line never mixes runs that differ in more than X.
	Series     string
	LogX, LogY bool
	// Title defaults to "Y vs X (profile)".
	Title string
	// Width and Height default to 16 cm × 10 cm.
	Width, Height vg.Length
}

// Check verifies that the columns exist and can be plotted, and that the
// file name has a plot format's extension, so that a sweep does not run
// for nothing. Errors start with what is wrong: "x", "y", "series" or
// "plot FILE".
func (ps *PlotSpec) Check(cols []Column, file string) error {
	if _, err := plotFormat(file); err != nil {
		return err
	}
	for _, a := range []struct{ flag, name string }{{"x", ps.X}, {"y", ps.Y}} {
		c, err := Find(cols, a.name)
		if err != nil {
			return fmt.Errorf("%s: %w", a.flag, err)
		}
		if !c.Numeric {
			return fmt.Errorf("%s: column %s is not numeric", a.flag, c.Name)
		}
	}
	if ps.Series != "" {
		if _, err := Find(cols, ps.Series); err != nil {
			return fmt.Errorf("series: %w", err)
		}
	}
	return nil
}

// plotFormat returns the format of a plot file from its extension.
func plotFormat(file string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	if !slices.Contains(PlotFormats, ext) {
		return "", fmt.Errorf("plot %s: the file name must end in .%s", file, strings.Join(PlotFormats, ", ."))
	}
	return ext, nil
}

// SavePlot writes the plot to file, in the format its extension names.
func SavePlot(file string, sw *Sweep, cols []Column, rows []Row, ps PlotSpec) error {
	format, err := plotFormat(file)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := WritePlot(&b, format, sw, cols, rows, ps); err != nil {
		return err
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}

// line is one line of a plot: its legend and points.
type line struct {
	name string
	xy   plotter.XYs
}

// WritePlot draws a line plot of the rows in format ("png", "svg",
// "pdf"). Failed runs are left out.
func WritePlot(w io.Writer, format string, sw *Sweep, cols []Column, rows []Row, ps PlotSpec) error {
	if err := ps.Check(cols, "plot."+format); err != nil {
		return err
	}
	p, legend, err := ps.build(sw, cols, rows)
	if err != nil {
		return err
	}
	width, height := ps.size()
	return render(w, format, p, legend, width, height)
}

// render draws a plot and its legend (see layout) as an image of format.
func render(w io.Writer, format string, p *plot.Plot, legend plot.Legend, width, height vg.Length) error {
	cv, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	plotArea, legendArea := layout(p, &legend, draw.New(cv))
	p.Draw(plotArea)
	legend.Draw(legendArea)
	_, err = cv.WriteTo(w)
	return err
}

// finishLines gives a plot of lines on a linear Y axis headroom above its
// highest point, and takes its legend out to be drawn beside it (see
// layout).
func finishLines(p *plot.Plot, linearY bool) plot.Legend {
	if linearY {
		p.Y.Max += 0.05 * (p.Y.Max - p.Y.Min)
	}
	legend := p.Legend
	p.Legend = plot.NewLegend()
	legend.Top, legend.Left = true, true
	return legend
}

// size returns the image's width and height: 20 cm × 10 cm by default.
func (ps *PlotSpec) size() (width, height vg.Length) {
	width, height = ps.Width, ps.Height
	if width == 0 {
		width = 20 * vg.Centimeter
	}
	if height == 0 {
		height = 10 * vg.Centimeter
	}
	return width, height
}

// build makes the plot of the rows, and its legend apart from it (the
// plot's own is left empty; see layout).
func (ps *PlotSpec) build(sw *Sweep, cols []Column, rows []Row) (*plot.Plot, plot.Legend, error) {
	lines, err := ps.lines(sw, cols, rows)
	if err != nil {
		return nil, plot.Legend{}, err
	}
	width, height := ps.size()
	p := plot.New()
	x, _ := Find(cols, ps.X)
	y, _ := Find(cols, ps.Y)
	p.Title.Text = ps.Title
	if p.Title.Text == "" {
		p.Title.Text = y.Name + " vs " + x.Name
		if profiles := sw.Profiles; len(profiles) == 1 {
			p.Title.Text += " (" + profiles[0] + ")"
		}
	}
	p.X.Label.Text = axisLabel(p.X.Label.TextStyle, x, width-6*vg.Centimeter)
	p.Y.Label.Text = axisLabel(p.Y.Label.TextStyle, y, height-3*vg.Centimeter)
	if ps.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if ps.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	} else {
		p.Y.Min = 0 // a linear Y axis from 0 does not exaggerate differences
	}
	p.Add(plotter.NewGrid())
	var args []any
	for _, l := range lines {
		if l.name != "" {
			args = append(args, l.name)
		}
		args = append(args, l.xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, plot.Legend{}, err
	}
	return p, finishLines(p, !ps.LogY), nil
}

// layout splits the image into the plot's area and the legend's, to the
// right of the plot with its top at the data area's: the legend is beside
// the data rather than over it (inside the axes it covered the lines that
// start in its corner). A plot without a legend takes the whole image.
func layout(p *plot.Plot, legend *plot.Legend, dc draw.Canvas) (plotArea, legendArea draw.Canvas) {
	legendW := legend.Rectangle(dc).Size().X
	if legendW == 0 {
		return dc, draw.Crop(dc, dc.Size().X, 0, 0, 0)
	}
	gap := 0.6 * vg.Centimeter
	plotArea = draw.Crop(dc, 0, -(legendW + 2*gap), 0, 0)
	top := p.DataCanvas(plotArea).Max.Y
	legendArea = draw.Crop(dc, plotArea.Max.X-dc.Min.X+gap, 0, 0, top-dc.Max.Y)
	return plotArea, legendArea
}

// lines groups the rows into lines, in the order they first appear, each
// sorted by X.
func (ps *PlotSpec) lines(sw *Sweep, cols []Column, rows []Row) ([]line, error) {
	x, _ := Find(cols, ps.X)
	y, _ := Find(cols, ps.Y)
	keys := ps.lineKeys(sw, cols)
	var lines []line
	index := map[string]int{}
	for r := range rows {
		row := &rows[r]
		xv, okx := x.Float(row)
		yv, oky := y.Float(row)
		if !okx || !oky {
			continue
		}
		if (ps.LogX && xv <= 0) || (ps.LogY && yv <= 0) {
			return nil, fmt.Errorf("plot: log scale needs positive values, and %s has %s=%g, %s=%g", row.Label, x.Name, xv, y.Name, yv)
		}
		var name []string
		for _, k := range keys {
			v := text(k.Value(row))
			if k.Name != ps.Series {
				v = k.Name + "=" + v
			}
			name = append(name, v)
		}
		key := strings.Join(name, " ")
		i, ok := index[key]
		if !ok {
			i = len(lines)
			index[key] = i
			lines = append(lines, line{name: key})
		}
		lines[i].xy = append(lines[i].xy, plotter.XY{X: xv, Y: yv})
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("plot: no run has both %s and %s", x.Name, y.Name)
	}
	for _, l := range lines {
		sort.SliceStable(l.xy, func(i, j int) bool { return l.xy[i].X < l.xy[j].X })
	}
	return lines, nil
}

// FirstSwept returns the name of the first numeric parameter with several
// values in the sweep ("" if none): the natural X axis.
func (s *Sweep) FirstSwept(cols []Column) string {
	vary := s.varying()
	for _, c := range cols {
		if c.Kind == Param && c.Numeric && vary[c.Name] {
			return c.Name
		}
	}
	return ""
}

// lineKeys returns the columns that tell lines apart: Series, then every
// other swept parameter with several values, except X. Pairs and hosts
// count as one parameter.
func (ps *PlotSpec) lineKeys(sw *Sweep, cols []Column) []*Column {
	vary := sw.varying()
	same := map[string]string{"hosts": "pairs", "pairs": "hosts"}
	var keys []*Column
	if ps.Series != "" {
		c, _ := Find(cols, ps.Series)
		keys = append(keys, c)
	}
	for i := range cols {
		c := &cols[i]
		linked := same[c.Name]
		if !vary[c.Name] || c.Name == ps.Series || c.Name == ps.X || (linked != "" && (linked == ps.X || linked == ps.Series)) {
			continue
		}
		keys = append(keys, c)
	}
	return keys
}

// axisLabel is an axis's title: the column's name and what it is, or a
// shorter form if that does not fit in room (a label longer than its axis
// is cut off at the image's edge).
func axisLabel(sty plottext.Style, c *Column, room vg.Length) string {
	for _, l := range []string{
		c.Name + " (" + c.Doc + ")",
		c.Name + " (" + strings.TrimSpace(strings.Split(c.Doc, "(")[0]) + ")",
	} {
		if sty.Width(l) <= room {
			return l
		}
	}
	return c.Name
}

// logTicks marks a logarithmic axis at each power of ten and, where the
// axis spans too little for two of those, at 2 and 5 times them (if that
// gives three), else at every multiple: gonum's LogTicks labels powers of ten only, so an axis
// within one decade (latencies from 1 to 6 µs) had no label at all. Below
// that, a range too narrow for two such marks gets linear ticks.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi >= lo) {
		return nil
	}
	const eps = 1e-9
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	for _, try := range []struct {
		labelled string
		enough   int
	}{{"1", 2}, {"125", 3}, {"123456789", 2}} {
		labelled := try.labelled
		var ticks []plot.Tick
		labels := 0
		for e := first; e <= last; e++ {
			for m := 1; m <= 9; m++ {
				v := float64(m) * math.Pow10(e)
				if e < 0 {
					v = float64(m) / math.Pow10(-e) // 0.3, not 0.30000000000000004
				}
				if v < lo*(1-eps) || v > hi*(1+eps) {
					continue
				}
				t := plot.Tick{Value: v}
				if strings.ContainsRune(labelled, rune('0'+m)) {
					t.Label = tickLabel(v)
					labels++
				}
				ticks = append(ticks, t)
			}
		}
		if labels >= try.enough {
			return ticks
		}
	}
	return plot.DefaultTicks{}.Ticks(lo, hi)
}

// tickLabel writes a tick's value without an exponent where it is short
// enough (1000000, not 1e+06).
func tickLabel(v float64) string {
	if v >= 1e-3 && v < 1e9 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
