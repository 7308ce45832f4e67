package experiment

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// CheckTimeline verifies a timeline file's name before anything runs: a
// plot format's extension, or .csv for the data.
func CheckTimeline(file string) error {
	if strings.EqualFold(filepath.Ext(file), ".csv") {
		return nil
	}
	if _, err := plotFormat(file); err != nil {
		return fmt.Errorf("timeline %s: the file name must end in .%s or .csv", file, strings.Join(PlotFormats, ", ."))
	}
	return nil
}

// SaveTimeline writes what each row's workload completed over virtual
// time (perf.Result.Timeline): as CSV (run, label, tenant, t_ns,
// width_ns, gbps, mops, rate_gbps, queue_bytes) for a .csv file, else as
// plots, one per run of the sweep (the file name of run i of several gets
// "-i" before its extension): throughput over time, one line per tenant,
// with the congestion control's rate of each tenant's chosen QP
// (perf.Spec.TimelineQP) dashed beside it when there is one; and the
// queue of the chosen port (perf.Spec.TimelinePort, by default the switch
// port towards the run's first server) over time, in a second file whose
// name gets "-queue" before its extension.
func SaveTimeline(file string, rows []Row) error {
	if strings.EqualFold(filepath.Ext(file), ".csv") {
		var b bytes.Buffer
		if err := WriteTimelineCSV(&b, rows); err != nil {
			return err
		}
		return os.WriteFile(file, b.Bytes(), 0o644)
	}
	format, err := plotFormat(file)
	if err != nil {
		return err
	}
	runs := groupRuns(rows)
	for i, run := range runs {
		name := file
		if len(runs) > 1 {
			ext := filepath.Ext(file)
			name = strings.TrimSuffix(file, ext) + "-" + strconv.Itoa(i) + ext
		}
		var b bytes.Buffer
		if err := writeTimelinePlot(&b, format, run); err != nil {
			return err
		}
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			return err
		}
		b.Reset()
		if err := writeQueuePlot(&b, format, run); err != nil {
			return err
		}
		ext := filepath.Ext(name)
		if err := os.WriteFile(strings.TrimSuffix(name, ext)+"-queue"+ext, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// groupRuns splits rows into the runs they came from, in order.
func groupRuns(rows []Row) [][]Row {
	var runs [][]Row
	for i := range rows {
		if n := len(runs); n > 0 && runs[n-1][0].Index == rows[i].Index {
			runs[n-1] = append(runs[n-1], rows[i])
			continue
		}
		runs = append(runs, rows[i:i+1:i+1])
	}
	return runs
}

// firstResult returns the first row of a run that has a result (the
// fabric's timeline and counters are the run's, the same in each of its
// tenants' rows), or nil.
func firstResult(run []Row) *Row {
	for i := range run {
		if run[i].Result != nil {
			return &run[i]
		}
	}
	return nil
}

// runLabel is a row's label without its tenant: the run's.
func runLabel(r *Row) string { return strings.TrimSuffix(r.Label, " tenant="+rowName(r)) }

// rowName names a row's line: its tenant, or its test.
func rowName(r *Row) string {
	if r.Tenant != nil {
		return r.Tenant.Name
	}
	return r.spec().Test.String()
}

// WriteTimelineCSV writes the rows' timelines as CSV.
func WriteTimelineCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"run", "label", "tenant", "t_ns", "width_ns", "gbps", "mops", "rate_gbps", "queue_bytes"})
	for i := range rows {
		r := &rows[i]
		if r.Result == nil {
			continue
		}
		for _, pt := range r.Result.Timeline {
			cw.Write([]string{strconv.Itoa(r.Index), r.Label, rowName(r), strconv.FormatInt(int64(pt.At), 10),
				strconv.FormatInt(int64(pt.Width), 10), strconv.FormatFloat(pt.Gbps, 'g', 6, 64), strconv.FormatFloat(pt.Mops, 'g', 6, 64),
				strconv.FormatFloat(pt.RateGbps, 'g', 6, 64), strconv.FormatInt(pt.QueueBytes, 10)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeTimelinePlot draws one run's throughput over time, a line per
// row (tenant).
func writeTimelinePlot(w io.Writer, format string, run []Row) error {
	p := plot.New()
	p.Title.Text = "throughput over time: " + runLabel(&run[0])
	p.X.Label.Text = "virtual time, µs"
	p.Y.Label.Text = "Gb/s (payload)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	var args []any
	var rates []plotter.XYs
	for i := range run {
		r := &run[i]
		if r.Result == nil {
			continue
		}
		xy := make(plotter.XYs, len(r.Result.Timeline))
		rate := make(plotter.XYs, 0, len(r.Result.Timeline))
		for k, pt := range r.Result.Timeline {
			xy[k].X = float64(pt.At+pt.Width/2) / 1e3
			xy[k].Y = pt.Gbps
			if pt.RateGbps > 0 {
				rate = append(rate, plotter.XY{X: xy[k].X, Y: pt.RateGbps})
			}
		}
		args = append(args, rowName(r), xy)
		if len(rate) == 0 {
			rate = nil
		}
		rates = append(rates, rate)
	}
	if len(args) == 0 {
		return fmt.Errorf("timeline: no run of %q finished", run[0].Label)
	}
	// Throughput solid, each tenant's rate dashed in its colour.
	for i := 0; i < len(args); i += 2 {
		l, err := plotter.NewLine(args[i+1].(plotter.XYs))
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i / 2)
		p.Add(l)
		p.Legend.Add(args[i].(string), l)
		if rates[i/2] == nil {
			continue
		}
		rl, err := plotter.NewLine(rates[i/2])
		if err != nil {
			return err
		}
		rl.Color = l.Color
		rl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(rl)
		p.Legend.Add(args[i].(string)+" rate", rl)
	}
	width, height := (&PlotSpec{}).size()
	return render(w, format, p, finishLines(p, true), width, height)
}

// writeQueuePlot draws one run's queue at its chosen port over time (the
// deepest in each bin), the port named in the title.
func writeQueuePlot(w io.Writer, format string, run []Row) error {
	r := firstResult(run)
	if r == nil {
		return fmt.Errorf("timeline: no run of %q finished", run[0].Label)
	}
	p := plot.New()
	p.Title.Text = "queue of port " + r.Result.QueuePort + ": " + runLabel(&run[0])
	p.X.Label.Text = "virtual time, µs"
	p.Y.Label.Text = "KiB queued (deepest in each bin)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	xy := make(plotter.XYs, 0, len(r.Result.Timeline))
	for _, pt := range r.Result.Timeline {
		if pt.QueueBytes >= 0 {
			xy = append(xy, plotter.XY{X: float64(pt.At+pt.Width/2) / 1e3, Y: float64(pt.QueueBytes) / 1024})
		}
	}
	if len(xy) == 0 {
		xy = append(xy, plotter.XY{})
	}
	if err := plotutil.AddLines(p, "queue", xy); err != nil {
		return err
	}
	width, height := (&PlotSpec{}).size()
	return render(w, format, p, finishLines(p, true), width, height)
}
