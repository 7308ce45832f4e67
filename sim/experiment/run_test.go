package experiment

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// tinySweep is a sweep that runs in milliseconds: a latency and a
// bandwidth test, on one and two QPs.
func tinySweep() *Sweep {
	return &Sweep{Tests: []perf.Test{perf.WriteLat, perf.WriteBW}, Sizes: []int{64}, QPs: []int{1, 2},
		Iters: []int{50}, Warmup: []int{5}}
}

var tiny struct {
	once sync.Once
	rows []Row
	err  error
}

// tinyRows returns the rows of tinySweep, run once for all tests.
func tinyRows(t *testing.T) []Row {
	t.Helper()
	tiny.once.Do(func() { tiny.rows, tiny.err = Run(context.Background(), tinySweep(), Options{}) })
	if tiny.err != nil {
		t.Fatal(tiny.err)
	}
	return tiny.rows
}

// golden compares got with testdata/name, or rewrites it with -update.
// When the model changes on purpose, its numbers change: run
// go test ./sim/experiment -update and review the diff.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestGolden(t *testing.T) {
	sw := tinySweep()
	rows := tinyRows(t)
	cols := sw.Columns(false)
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"tiny.csv", func(b *bytes.Buffer) error { return WriteCSV(b, cols, rows) }},
		{"tiny.json", func(b *bytes.Buffer) error { return WriteJSON(b, cols, rows) }},
		{"tiny.txt", func(b *bytes.Buffer) error { return WriteTable(b, sw.TableColumns(cols, rows), rows) }},
	} {
		var b bytes.Buffer
		if err := tc.write(&b); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, b.Bytes())
	}
}

func TestJobsDoNotChangeResults(t *testing.T) {
	sw := tinySweep()
	cols := sw.Columns(false)
	var want bytes.Buffer
	if err := WriteCSV(&want, cols, tinyRows(t)); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	rows, err := Run(context.Background(), sw, Options{Jobs: 3, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := WriteCSV(&got, cols, rows); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("-j 3 gave other results:\n%s\nthan -j 1:\n%s", got.Bytes(), want.Bytes())
	}
	lines := strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("progress: %d lines, want 4:\n%s", len(lines), progress.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "["+string(rune('1'+i))+"/4] write_") || !strings.HasSuffix(l, " s)") {
			t.Errorf("progress line %q", l)
		}
	}
	if !strings.Contains(progress.String(), "write_bw qps=2: ") || !strings.Contains(progress.String(), "Mops") ||
		!strings.Contains(progress.String(), "write_lat qps=1: latency avg ") {
		t.Errorf("progress lacks a run:\n%s", progress.String())
	}
}

func TestFailedRun(t *testing.T) {
	// 20 µs of virtual time is enough for five small WRITEs, not for 1000.
	sw := &Sweep{Tests: []perf.Test{perf.WriteLat}, Iters: []int{5, 1000}, Limit: 20 * sim.Microsecond}
	rows, err := Run(context.Background(), sw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Err != nil || rows[1].Err == nil || Failed(rows) != 1 {
		t.Fatalf("rows %+v; want the second run to fail", rows)
	}
	cols := sw.Columns(false)
	var csv, js bytes.Buffer
	if err := WriteCSV(&csv, cols, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, cols, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(csv.String(), "\n")
	if !strings.Contains(lines[2], ",,") || !strings.Contains(lines[2], "did not finish") {
		t.Errorf("failed run in CSV: %q; want empty metrics and the error", lines[2])
	}
	if !strings.Contains(js.String(), `"gbps": null`) || !strings.Contains(js.String(), `"error": "perf: write_lat did not finish`) {
		t.Errorf("failed run in JSON:\n%s", js.String())
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rows, err := Run(ctx, tinySweep(), Options{Jobs: 2})
	if err != context.Canceled || len(rows) != 0 {
		t.Errorf("Run after cancel = %d rows, %v", len(rows), err)
	}
}

func TestRunBadProfile(t *testing.T) {
	sw := &Sweep{Profiles: []string{"cx6", "cx7"}}
	if _, err := Run(context.Background(), sw, Options{}); err == nil || !strings.Contains(err.Error(), "cx7") {
		t.Errorf("a sweep with an unknown profile: %v", err)
	}
	sw = &Sweep{Sets: []Set{{"caches.qpc.entries", []string{"16", "x"}}}}
	if _, err := Run(context.Background(), sw, Options{}); err == nil || !strings.Contains(err.Error(), "caches.qpc.entries=x") {
		t.Errorf("a sweep with a bad override: %v", err)
	}
}

// TestTableShowsLosses checks that the table adds the drop and
// retransmission columns when a run had any, and only then.
func TestTableShowsLosses(t *testing.T) {
	sw := tinySweep()
	cols := sw.Columns(false)
	rows := tinyRows(t)
	has := func(rows []Row, name string) bool {
		for _, c := range sw.TableColumns(cols, rows) {
			if c.Name == name {
				return true
			}
		}
		return false
	}
	if has(rows, "wire_drops") || has(rows, "retrans") {
		t.Errorf("loss columns in the table of a sweep without losses")
	}
	lossy := append([]Row(nil), rows...)
	res := *lossy[1].Result
	res.WireDrop, res.Retrans, res.Timeouts = 3, 7, 1
	lossy[1].Result = &res
	for _, name := range []string{"wire_drops", "retrans", "timeouts"} {
		if !has(lossy, name) {
			t.Errorf("no %s column in the table of a sweep with drops", name)
		}
	}
}
