package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rnic/rnic/sim/perf"
)

// A sweep too large for one machine runs as shards: shard i of n runs the
// sweep's points whose index is i-1 modulo n (interleaved, so that each
// shard gets its share of every parameter's cheap and costly values).
// Each point's result depends only on the point (its seed is the sweep's),
// so a point gives the same row whichever shard runs it, on any machine;
// Merge joins the shards' rows back into the sweep's order.

// Shard names share I of N (1 ≤ I ≤ N) of a sweep; the zero Shard is the
// whole sweep.
type Shard struct{ I, N int }

// ParseShard reads "i/N".
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("shard %q: want i/N with 1 <= i <= N", s)
	}
	return Shard{i, n}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.I, s.N) }

// has reports whether point index k is in the shard.
func (s Shard) has(k int) bool { return s.N == 0 || k%s.N == s.I-1 }

// ShardFormat names the shard file's format and version (2: a NIC's
// counters are an object by name, no longer an array in the engine's order).
const ShardFormat = "rnic-sim-shard/2"

// ShardFile is what a shard writes: its rows, and what merging needs to
// check that shards belong together — the rnic version, the sweep's
// command line and a digest of it and of the files it names.
type ShardFile struct {
	Format  string   `json:"format"`
	Version string   `json:"version"`
	Command []string `json:"command"`
	Digest  string   `json:"digest"`
	Shard   int      `json:"shard"`
	Shards  int      `json:"shards"`
	// Points is the number of runs of the whole sweep; Indices the ones
	// this shard ran (all of its share, unless it was interrupted).
	Points  int        `json:"points"`
	Indices []int      `json:"indices"`
	Rows    []shardRow `json:"rows"`
}

// shardRow is a Row as a shard file holds it: its error as text.
type shardRow struct {
	Point  Point         `json:"point"`
	Result *perf.Result  `json:"result,omitempty"`
	Err    string        `json:"error,omitempty"`
	Tenant *perf.Tenant  `json:"tenant,omitempty"`
	Wall   time.Duration `json:"wall_ns"`
}

// NewShardFile records rows, the results of shard sh of a sweep of points
// runs, with the version, command line and digest that identify the sweep.
func NewShardFile(version string, command []string, digest string, sh Shard, points int, rows []Row) *ShardFile {
	f := &ShardFile{Format: ShardFormat, Version: version, Command: command, Digest: digest, Shard: sh.I, Shards: sh.N, Points: points}
	for _, r := range rows {
		if n := len(f.Indices); n == 0 || f.Indices[n-1] != r.Index {
			f.Indices = append(f.Indices, r.Index)
		}
		sr := shardRow{Point: r.Point, Result: r.Result, Tenant: r.Tenant, Wall: r.Wall}
		if r.Err != nil {
			sr.Err = r.Err.Error()
		}
		f.Rows = append(f.Rows, sr)
	}
	return f
}

// Write writes the shard file as JSON.
func (f *ShardFile) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(f)
}

// ReadShardFile reads a shard file, refusing one of another format.
func ReadShardFile(r io.Reader) (*ShardFile, error) {
	var f ShardFile
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, fmt.Errorf("not a shard file: %w", err)
	}
	if f.Format != ShardFormat {
		return nil, fmt.Errorf("shard file format %q, want %q", f.Format, ShardFormat)
	}
	if f.Shards < 1 || f.Shard < 1 || f.Shard > f.Shards || f.Points < 0 {
		return nil, fmt.Errorf("shard %d/%d of %d runs is not a shard", f.Shard, f.Shards, f.Points)
	}
	return &f, nil
}

// Merge joins the shards of one sweep into its rows, in the sweep's
// order: exactly the rows one run of the whole sweep gives. It refuses
// shards of different sweeps (command line or digest), of different rnic
// versions or shard counts, a shard given twice, a shard missing, or a
// shard whose runs are not all there (an interrupted shard: run it
// again). names name the files, for the errors.
func Merge(names []string, files []*ShardFile) ([]Row, error) {
	if len(files) == 0 {
		return nil, errors.New("merge: no shard files")
	}
	first := files[0]
	seen := make(map[int]string)
	for i, f := range files {
		switch {
		case f.Version != first.Version:
			return nil, fmt.Errorf("merge: %s is from rnic %s, %s from rnic %s", names[i], f.Version, names[0], first.Version)
		case !slices.Equal(f.Command, first.Command):
			return nil, fmt.Errorf("merge: %s and %s are shards of different sweeps:\n  %s\n  %s", names[0], names[i],
				strings.Join(first.Command, " "), strings.Join(f.Command, " "))
		case f.Digest != first.Digest:
			return nil, fmt.Errorf("merge: %s and %s ran the same command on different files (profile or scenario)", names[0], names[i])
		case f.Shards != first.Shards || f.Points != first.Points:
			return nil, fmt.Errorf("merge: %s is shard %d/%d of %d runs, %s shard %d/%d of %d", names[i], f.Shard, f.Shards, f.Points,
				names[0], first.Shard, first.Shards, first.Points)
		}
		if other, dup := seen[f.Shard]; dup {
			return nil, fmt.Errorf("merge: %s and %s are both shard %d/%d", other, names[i], f.Shard, f.Shards)
		}
		seen[f.Shard] = names[i]
		sh := Shard{f.Shard, f.Shards}
		want := 0
		for k := range first.Points {
			if sh.has(k) {
				want++
			}
		}
		if len(f.Indices) != want {
			return nil, fmt.Errorf("merge: %s has %d of its shard's %d runs (interrupted?): run shard %s again", names[i], len(f.Indices), want, sh)
		}
		for _, k := range f.Indices {
			if !sh.has(k) || k >= f.Points {
				return nil, fmt.Errorf("merge: %s holds run %d, which is not in shard %s", names[i], k, sh)
			}
		}
	}
	var missing []string
	for s := 1; s <= first.Shards; s++ {
		if _, ok := seen[s]; !ok {
			missing = append(missing, strconv.Itoa(s))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("merge: shards %s of %d missing", strings.Join(missing, ", "), first.Shards)
	}
	byIndex := make([][]Row, first.Points)
	for _, f := range files {
		for _, sr := range f.Rows {
			r := Row{Point: sr.Point, Result: sr.Result, Tenant: sr.Tenant, Wall: sr.Wall}
			if sr.Err != "" {
				r.Err = errors.New(sr.Err)
			}
			if r.Index < 0 || r.Index >= len(byIndex) {
				return nil, fmt.Errorf("merge: a row of run %d in a sweep of %d", r.Index, len(byIndex))
			}
			byIndex[r.Index] = append(byIndex[r.Index], r)
		}
	}
	var rows []Row
	for _, rs := range byIndex {
		rows = append(rows, rs...)
	}
	return rows, nil
}
