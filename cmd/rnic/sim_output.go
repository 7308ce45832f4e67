package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rnic/rnic/sim/experiment"
)

// write writes the results: the table on out (unless CSV or JSON go
// there), then the CSV, JSON and plot files asked for.
func (f *simFlags) write(out io.Writer, sw *experiment.Sweep, cols []experiment.Column, rows []experiment.Row, ps experiment.PlotSpec) error {
	var errs []error
	if f.csv != "-" && f.json != "-" {
		tcols := sw.TableColumns(cols, rows)
		if len(f.columns) > 0 {
			tcols, _ = experiment.Select(cols, f.columns) // checked before the sweep
		}
		errs = append(errs, experiment.WriteTable(out, tcols, rows))
	}
	if f.csv != "" {
		errs = append(errs, writeTo(out, f.csv, func(w io.Writer) error { return experiment.WriteCSV(w, cols, rows) }))
	}
	if f.json != "" {
		errs = append(errs, writeTo(out, f.json, func(w io.Writer) error { return experiment.WriteJSON(w, cols, rows) }))
	}
	if f.plot != "" {
		if err := experiment.SavePlot(f.plot, sw, cols, rows, ps); err != nil {
			errs = append(errs, fmt.Errorf("--plot: %w", err))
		}
	}
	if f.ports != "" {
		errs = append(errs, writeTo(out, f.ports, func(w io.Writer) error { return experiment.WritePortsCSV(w, rows) }))
	}
	if f.timeline != "" {
		if err := experiment.SaveTimeline(f.timeline, rows); err != nil {
			errs = append(errs, fmt.Errorf("--timeline: %w", err))
		}
	}
	return errors.Join(errs...)
}

// writeTo writes to the file called name, or to out for "-".
func writeTo(out io.Writer, name string, write func(io.Writer) error) error {
	if name == "-" {
		return write(out)
	}
	fd, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(fd); err != nil {
		fd.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	return fd.Close()
}
