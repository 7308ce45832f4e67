package experiment

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/perf"
)

// shardSweep is a small sweep of 12 runs: two tests, three sizes, an
// incast of two pairs and one pair, in metadata mode.
func shardSweep() *Sweep {
	return &Sweep{Tests: []perf.Test{perf.WriteLat, perf.WriteBW}, Sizes: []int{64, 1024, 8192}, Pairs: []int{1, 2},
		Incast: []bool{true}, Iters: []int{40}, Warmup: []int{4}, Metadata: []bool{true}}
}

// outputs writes everything a run of the sweep writes from rows: CSV,
// JSON, the table, the plot's data, the timelines and the ports.
func outputs(t *testing.T, sw *Sweep, rows []Row) map[string][]byte {
	t.Helper()
	cols := sw.Columns(false)
	out := map[string][]byte{}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"csv":      func(b *bytes.Buffer) error { return WriteCSV(b, cols, rows) },
		"json":     func(b *bytes.Buffer) error { return WriteJSON(b, cols, rows) },
		"table":    func(b *bytes.Buffer) error { return WriteTable(b, sw.TableColumns(cols, rows), rows) },
		"timeline": func(b *bytes.Buffer) error { return WriteTimelineCSV(b, rows) },
		"ports":    func(b *bytes.Buffer) error { return WritePortsCSV(b, rows) },
		"plot": func(b *bytes.Buffer) error {
			ps := PlotSpec{X: "size", Y: "gbps"}
			lines, err := ps.lines(sw, cols, rows)
			fmt.Fprintf(b, "%+v", lines)
			return err
		},
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b.Bytes()
	}
	return out
}

// TestShardsMerge: the sweep split into 1, 3 and 7 shards, each written
// to a shard file and read back, and merged, gives byte for byte the CSV,
// JSON, table, plot data, timelines and port counters of the sweep run
// in one process.
func TestShardsMerge(t *testing.T) {
	sw := shardSweep()
	whole, err := Run(context.Background(), sw, Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := outputs(t, sw, whole)
	points, _ := sw.Points()
	for _, n := range []int{1, 3, 7} {
		var names []string
		var files []*ShardFile
		for i := 1; i <= n; i++ {
			rows, err := Run(context.Background(), sw, Options{Shard: Shard{i, n}})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := NewShardFile("test", []string{"sim", "--sizes", "64,1024,8192"}, "d", Shard{i, n}, len(points), rows).Write(&b); err != nil {
				t.Fatal(err)
			}
			f, err := ReadShardFile(&b)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, fmt.Sprintf("shard-%d-of-%d", i, n))
			files = append(files, f)
		}
		// The order the files are given in does not matter.
		for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
			files[i], files[j], names[i], names[j] = files[j], files[i], names[j], names[i]
		}
		merged, err := Merge(names, files)
		if err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		got := outputs(t, sw, merged)
		for name := range want {
			if !bytes.Equal(got[name], want[name]) {
				t.Errorf("%d shards: %s differs:\n got:\n%s\nwant:\n%s", n, name, got[name], want[name])
			}
		}
	}
}

// TestMergeRefuses: shards that do not make one sweep are refused, with
// the reason.
func TestMergeRefuses(t *testing.T) {
	sw := shardSweep()
	points, _ := sw.Points()
	shard := func(i, n int, version, digest string, cmd ...string) *ShardFile {
		rows, err := Run(context.Background(), sw, Options{Shard: Shard{i, n}})
		if err != nil {
			t.Fatal(err)
		}
		if len(cmd) == 0 {
			cmd = []string{"sim", "--size", "64"}
		}
		return NewShardFile(version, cmd, digest, Shard{i, n}, len(points), rows)
	}
	a, b := shard(1, 2, "v1", "d"), shard(2, 2, "v1", "d")
	interrupted := shard(2, 2, "v1", "d")
	interrupted.Indices, interrupted.Rows = interrupted.Indices[:2], interrupted.Rows[:2]
	for _, tc := range []struct {
		name  string
		files []*ShardFile
		want  string
	}{
		{"version", []*ShardFile{a, shard(2, 2, "v2", "d")}, "from rnic v2"},
		{"sweep", []*ShardFile{a, shard(2, 2, "v1", "d", "sim", "--size", "128")}, "shards of different sweeps"},
		{"files", []*ShardFile{a, shard(2, 2, "v1", "e")}, "different files"},
		{"count", []*ShardFile{a, shard(2, 3, "v1", "d")}, "shard 2/3"},
		{"twice", []*ShardFile{a, a, b}, "both shard 1/2"},
		{"missing", []*ShardFile{a}, "shards 2 of 2 missing"},
		{"interrupted", []*ShardFile{a, interrupted}, "run shard 2/2 again"},
	} {
		names := make([]string, len(tc.files))
		for i := range names {
			names[i] = fmt.Sprintf("f%d", i)
		}
		_, err := Merge(names, tc.files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if rows, err := Merge([]string{"a", "b"}, []*ShardFile{a, b}); err != nil || len(rows) != len(points) {
		t.Errorf("the two shards: %d rows, %v", len(rows), err)
	}
	if _, err := ParseShard("0/3"); err == nil {
		t.Error("shard 0/3 accepted")
	}
	if s, err := ParseShard("3/7"); err != nil || !reflect.DeepEqual(s, Shard{3, 7}) {
		t.Errorf("3/7: %v %v", s, err)
	}
}
