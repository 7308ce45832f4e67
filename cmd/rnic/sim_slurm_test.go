package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSlurmScripts: --slurm writes the job array, its merge and
// submit.sh without running anything; the array task runs the sweep's
// canonical command line as shard $i/N with the profile file's path made
// absolute; status reads the tasks' state files.
func TestSlurmScripts(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	prof := filepath.Join(dir, "my profile.toml")
	show, _, err := runRnic(t, "sim", "profile", "show", "cx6")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prof, []byte(show), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runRnic(t, "sim", "--profile", "my profile.toml", "--test", "write_bw", "--size", "64,128,256,512",
		"--metadata", "--iters", "20", "--csv", "out.csv", "--slurm", "sweep", "--slurm-shards", "3", "--slurm-cpus", "2",
		"--slurm-time", "5:00", "--slurm-partition", "short")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "4 runs in 3 shards") || !strings.Contains(out, "submit.sh") {
		t.Errorf("output: %s", out)
	}
	if _, err := os.Stat("out.csv"); err == nil {
		t.Error("--slurm ran the sweep")
	}
	shard, err := os.ReadFile("sweep/shard.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#SBATCH --array=1-3", "#SBATCH --cpus-per-task=2", "#SBATCH --time=5:00", "#SBATCH --partition=short",
		"'--profile=" + prof + "'", "--shard $i/3 --shard-file shards/shard-$i.json -j 2"} {
		if !strings.Contains(string(shard), want) {
			t.Errorf("shard.sbatch lacks %q:\n%s", want, shard)
		}
	}
	for _, f := range []string{"sweep/merge.sbatch", "sweep/submit.sh", "sweep/rnic", "sweep/plan.json"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := runRnic(t, "sim", "--test", "write_bw", "--slurm", "sweep"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a second --slurm into the same directory: %v", err)
	}
	// The tasks' state: 1 done in 40 s, 2 running for 10 s, 3 failed.
	now := time.Now().Unix()
	for name, v := range map[string]int64{"1.started": now - 100, "1.done": now - 60, "2.started": now - 10, "3.started": now - 50, "3.failed": 1} {
		if err := os.WriteFile(filepath.Join("sweep/state", name), fmt.Appendf(nil, "%d\n", v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile("sweep/shards/shard-1.json", []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, _, err := runRnic(t, "sim", "status", "sweep")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"done 1, running 1, failed 1, pending 0", "s left (finished shards took 40s", "sbatch --array=3 sweep/shard.sbatch"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	// Shard 2 has run 10 of the mean 40 s: about 30 s left (a second or
	// two less by the time status reads the clock).
	if !strings.Contains(status, "about 30s left") && !strings.Contains(status, "about 29s left") && !strings.Contains(status, "about 28s left") {
		t.Errorf("status's estimate:\n%s", status)
	}

	// Slurm's queue, from a squeue of our own on PATH: shard 2's task
	// (job 777) still there is running; gone without done or failed, it
	// was killed outright and is failed; a squeue that cannot reach the
	// controller leaves it running, saying so.
	if err := os.WriteFile("sweep/state/2.job", []byte("777\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, c := range []struct {
		squeue string
		want   []string
	}{
		{"echo 123; echo 777", []string{"done 1, running 1, failed 1, pending 0"}},
		{"echo 123", []string{"done 1, running 0, failed 2, pending 0", "shards 2 started and are no longer in Slurm's queue",
			"sbatch --array=2,3 sweep/shard.sbatch"}},
		{"echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1", []string{"done 1, running 1, failed 1, pending 0",
			"(squeue: exit status 1: slurm_load_jobs error: Unable to contact slurm controller; a running shard"}},
	} {
		if err := os.WriteFile(filepath.Join(bin, "squeue"), []byte("#!/bin/sh\n"+c.squeue+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		status, _, err := runRnic(t, "sim", "status", "sweep")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range c.want {
			if !strings.Contains(status, want) {
				t.Errorf("squeue %q: status lacks %q:\n%s", c.squeue, want, status)
			}
		}
	}
	if shard, _ := os.ReadFile("sweep/shard.sbatch"); !strings.Contains(string(shard), `echo "${SLURM_JOB_ID:-}" > state/$i.job`) {
		t.Errorf("shard.sbatch does not record the task's job ID:\n%s", shard)
	}
}

// TestSlurmCluster runs scripts/slurm-test.sh: a sweep on a one-node
// Slurm cluster started on this machine, compared with one process. It
// needs root and Debian's slurm-wlm and munge (scripts/deps.sh installs them),
// and says plainly that it skipped where they are missing.
func TestSlurmCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	script, err := filepath.Abs("../../scripts/slurm-test.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is rnic (TestMain, RNIC_TEST_MAIN=1): no build.
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "RNIC="+os.Args[0], "RNIC_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 77:
		t.Skipf("%s", strings.TrimSpace(string(out)))
	case err != nil:
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
