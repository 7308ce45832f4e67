package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimShardMerge runs a sweep whole and as 3 shards (flags in another
// order, with -j), merges the shard files and compares what merge prints
// and writes with the whole run's, byte for byte; then refuses a merge
// with a shard missing and one with a shard of another sweep.
func TestSimShardMerge(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	sweep := []string{"sim", "--test", "write_bw,write_lat", "--size", "64,4K", "--qps", "1,2", "--iters", "40",
		"--metadata", "--csv", "out.csv", "--json", "out.json", "-q"}
	whole, _, err := runRnic(t, sweep...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"table": []byte(whole)}
	for _, name := range []string{"out.csv", "out.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = b
		os.Remove(name)
	}
	var shards []string
	for i := 1; i <= 3; i++ {
		// The same sweep, its flags in another order.
		args := []string{"sim", "--json", "out.json", "--qps", "1,2", "--size", "64,4K", "--test", "write_bw,write_lat",
			"--metadata", "--iters", "40", "--csv", "out.csv", "-q", "-j", "2", "--shard", fmt.Sprintf("%d/3", i)}
		if _, stderr, err := runRnic(t, args...); err != nil || !strings.Contains(stderr, "written to rnic-sim-shard") {
			t.Fatalf("shard %d: %v %s", i, err, stderr)
		}
		shards = append(shards, fmt.Sprintf("rnic-sim-shard-%d-of-3.json", i))
	}
	if _, err := os.Stat("out.csv"); err == nil {
		t.Fatal("a shard wrote the sweep's CSV: that is merge's to write")
	}
	merged, _, err := runRnic(t, append([]string{"sim", "merge"}, shards...)...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{"table": []byte(merged)}
	for _, name := range []string{"out.csv", "out.json"} {
		if got[name], err = os.ReadFile(name); err != nil {
			t.Fatal(err)
		}
	}
	for name := range want {
		if !bytes.Equal(got[name], want[name]) {
			t.Errorf("%s after merge differs from the whole run's:\n got:\n%s\nwant:\n%s", name, got[name], want[name])
		}
	}
	if _, _, err := runRnic(t, "sim", "merge", shards[0], shards[2]); err == nil || !strings.Contains(err.Error(), "shards 2 of 3 missing") {
		t.Errorf("a merge without shard 2: %v", err)
	}
	other := filepath.Join(dir, "other.json")
	if _, _, err := runRnic(t, "sim", "--test", "write_bw", "--size", "64", "--iters", "20", "--metadata", "-q", "--shard", "2/3", "--shard-file", other); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runRnic(t, "sim", "merge", shards[0], other, shards[2]); err == nil || !strings.Contains(err.Error(), "different sweeps") {
		t.Errorf("a merge with another sweep's shard: %v", err)
	}
}
