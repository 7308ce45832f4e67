package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A sweep on a Slurm cluster: --slurm DIR writes, instead of running,
//
//	DIR/rnic           this rnic binary (the tasks run the same version)
//	DIR/plan.json      the sweep: its command line, runs and shards
//	DIR/shard.sbatch   a job array, task i runs shard i/N into DIR/shards
//	DIR/merge.sbatch   the merge of the shards into DIR (the sweep's outputs)
//	DIR/submit.sh      sbatch of the array, then of the merge after it
//
// and the tasks record their state in DIR/state (i.job, i.started,
// i.done, i.failed) for "rnic sim status DIR". The directory must be on a file
// system the cluster's nodes share, as Slurm users' home directories are.

// slurmFlags are the sim flags of a Slurm sweep.
type slurmFlags struct {
	dir                  string
	shards, cpus         int
	timeLimit, partition string
}

func (s *slurmFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&s.dir, "slurm", "", "instead of running the sweep, write a Slurm job array that runs it as shards, and its merge, into this directory (see \"rnic sim status\")")
	fl.IntVar(&s.shards, "slurm-shards", 0, "with --slurm: the number of shards, one array task each (default: the runs, at most 64)")
	fl.IntVar(&s.cpus, "slurm-cpus", 1, "with --slurm: CPUs per task (sbatch --cpus-per-task; the task runs that many runs at once)")
	fl.StringVar(&s.timeLimit, "slurm-time", "1:00:00", "with --slurm: time limit per task (sbatch --time)")
	fl.StringVar(&s.partition, "slurm-partition", "", "with --slurm: the partition (sbatch --partition; default: the cluster's)")
	for _, n := range []string{"slurm", "slurm-shards", "slurm-cpus", "slurm-time", "slurm-partition"} {
		shardNeutralFlags[n] = true
	}
}

// slurmPlan is DIR/plan.json.
type slurmPlan struct {
	Version string    `json:"version"`
	Command []string  `json:"command"`
	Points  int       `json:"points"`
	Shards  int       `json:"shards"`
	Created time.Time `json:"created"`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=.,/:+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// absFiles rewrites the command's profile files and scenario to absolute
// paths: the tasks run in DIR.
func absFiles(command []string) ([]string, error) {
	out := slices.Clone(command)
	for i, a := range out {
		name, val, _ := strings.Cut(a, "=")
		switch name {
		case "--scenario":
			p, err := filepath.Abs(val)
			if err != nil {
				return nil, err
			}
			out[i] = name + "=" + p
		case "--profile":
			vs := strings.Split(val, ",")
			for j, v := range vs {
				if builtinProfile(v) {
					continue
				}
				p, err := filepath.Abs(v)
				if err != nil {
					return nil, err
				}
				vs[j] = p
			}
			out[i] = name + "=" + strings.Join(vs, ",")
		}
	}
	return out, nil
}

// writeSlurm writes the Slurm sweep of points runs into s.dir, and tells
// w how to submit it.
func (s *slurmFlags) write(w io.Writer, fl *pflag.FlagSet, points int) error {
	if s.cpus < 1 {
		return fmt.Errorf("--slurm-cpus %d: want at least 1", s.cpus)
	}
	n := s.shards
	if n == 0 {
		n = min(points, 64)
	}
	if n < 1 || n > points {
		return fmt.Errorf("--slurm-shards %d: want 1 to the sweep's %d runs", s.shards, points)
	}
	command, err := absFiles(sweepCommand(fl))
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("--slurm %s: the directory is not empty", s.dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, "shards"), filepath.Join(dir, "state"), filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := copyExecutable(filepath.Join(dir, "rnic")); err != nil {
		return fmt.Errorf("--slurm: copying rnic: %w", err)
	}
	plan := slurmPlan{Version: simVersion(), Command: command, Points: points, Shards: n, Created: time.Now().UTC().Truncate(time.Second)}
	b, err := json.MarshalIndent(plan, "", " ")
	if err != nil {
		return err
	}
	quoted := make([]string, len(command))
	for i, a := range command {
		quoted[i] = shellQuote(a)
	}
	partition := ""
	if s.partition != "" {
		partition = "#SBATCH --partition=" + shellQuote(s.partition) + "\n"
	}
	q := shellQuote(dir)
	shard := fmt.Sprintf(`#!/bin/bash
# rnic sim sweep: task i of this job array runs shard i/%[1]d of the sweep
# (written by rnic sim --slurm; re-run a failed shard K alone with
# "sbatch --array=K shard.sbatch", then "sbatch merge.sbatch").
#SBATCH --job-name=rnic-sim
#SBATCH --array=1-%[1]d
#SBATCH --cpus-per-task=%[2]d
#SBATCH --time=%[3]s
#SBATCH --output=%[4]s/logs/shard-%%a.log
%[5]sset -u
i=$SLURM_ARRAY_TASK_ID
cd %[4]s || exit 1
rm -f state/$i.done state/$i.failed state/$i.job
# The task's job ID, before it counts as started: status asks squeue
# whether a started task is still there (one killed outright writes
# neither done nor failed).
echo "${SLURM_JOB_ID:-}" > state/$i.job
date +%%s > state/$i.started
# Slurm ends a task past its time limit (or scancel) with SIGTERM: it
# is a failure, for status.
trap 'echo 143 > state/$i.failed; exit 143' TERM
if ./rnic sim %[6]s --shard $i/%[1]d --shard-file shards/shard-$i.json -j %[2]d -q; then
	date +%%s > state/$i.done
else
	rc=$?
	echo $rc > state/$i.failed
	exit $rc
fi
`, n, s.cpus, shellQuote(s.timeLimit), q, partition, strings.Join(quoted, " "))
	merge := fmt.Sprintf(`#!/bin/bash
# rnic sim sweep: the merge of its shards into this directory (the
# sweep's table in result.txt, and the files its command line names).
#SBATCH --job-name=rnic-sim-merge
#SBATCH --time=%[1]s
#SBATCH --output=%[2]s/logs/merge.log
%[3]scd %[2]s || exit 1
./rnic sim merge shards/shard-*.json > result.txt.tmp && mv result.txt.tmp result.txt
`, shellQuote(s.timeLimit), q, partition)
	submit := `#!/bin/sh
# Submits the sweep's job array, and its merge to run once every shard
# has succeeded.
set -e
cd "$(dirname "$0")"
jid=$(sbatch --parsable shard.sbatch)
jid=${jid%%;*}
mid=$(sbatch --parsable --dependency=afterok:$jid merge.sbatch)
echo "submitted job array $jid (shards) and job ${mid%%;*} (merge); rnic sim status $(pwd)"
`
	for _, f := range []struct {
		name, text string
		mode       os.FileMode
	}{{"plan.json", string(b) + "\n", 0o644}, {"shard.sbatch", shard, 0o755}, {"merge.sbatch", merge, 0o755}, {"submit.sh", submit, 0o755}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.text), f.mode); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "wrote a Slurm sweep of %d runs in %d shards to %s; submit it with\n  %s/submit.sh\nfollow it with\n  rnic sim status %s\n",
		points, n, dir, q, q)
	return nil
}

// copyExecutable copies the running binary to name.
func copyExecutable(name string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// newSimStatusCmd returns "rnic sim status DIR".
func newSimStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status DIR",
		Short: "Show how far a Slurm sweep (rnic sim --slurm DIR) has got",
		Long: `status reads a Slurm sweep's directory and shows how many shards are done,
running, failed and pending, the time left estimated from the finished
shards, and how to re-run the failed ones. A shard that started but is no
longer in Slurm's queue (squeue) without having finished counts as failed:
it was killed outright, ran out of memory, or its node failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := readSlurmStatus(args[0], time.Now(), squeueJobs)
			if err != nil {
				return err
			}
			st.print(cmd.OutOrStdout(), args[0])
			return nil
		},
	}
}

// slurmStatus is what the state files of a Slurm sweep say, and of the
// shards that started and did not finish, which are gone from Slurm's
// queue (lost; failed lists them too).
type slurmStatus struct {
	plan                           slurmPlan
	done, running, failed, pending []int
	lost                           []int
	took                           []time.Duration // of the done shards
	runningFor                     []time.Duration
	merged                         bool
	queueErr                       error // why Slurm's queue could not be read
}

// squeueJobs returns the IDs of the jobs in Slurm's queue (squeue's %A: a
// job array's tasks each have their own, SLURM_JOB_ID in the task).
func squeueJobs() (map[string]bool, error) {
	out, err := exec.Command("squeue", "-h", "-o", "%A").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(bytes.TrimSpace(ee.Stderr)) > 0 {
			lines := strings.Split(strings.TrimSpace(string(ee.Stderr)), "\n")
			err = fmt.Errorf("%w: %s", err, lines[len(lines)-1]) // the last says why
		}
		return nil, err
	}
	jobs := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		jobs[f] = true
	}
	return jobs, nil
}

// readSlurmStatus reads the sweep's state files, then Slurm's queue
// (queued) if a shard has started and not finished: one whose job is
// gone from the queue is lost unless its state files, read again, say it
// finished meanwhile (a task writes done or failed before it leaves the
// queue, unless it was killed outright). A task that starts after the
// state files were read counts as pending, never as lost.
func readSlurmStatus(dir string, now time.Time, queued func() (map[string]bool, error)) (*slurmStatus, error) {
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a Slurm sweep of rnic sim --slurm: %w", dir, err)
	}
	st := &slurmStatus{}
	if err := json.Unmarshal(b, &st.plan); err != nil {
		return nil, fmt.Errorf("%s/plan.json: %w", dir, err)
	}
	read := func(i int, what string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(dir, "state", fmt.Sprintf("%d.%s", i, what)))
		return strings.TrimSpace(string(b)), err == nil
	}
	stamp := func(i int, what string) (time.Time, bool) {
		v, ok := read(i, what)
		n, err := strconv.ParseInt(v, 10, 64)
		return time.Unix(n, 0), ok && err == nil
	}
	// finished classes shard i if its state files say it ended.
	finished := func(i int, start time.Time) bool {
		end, done := stamp(i, "done")
		_, failed := read(i, "failed")
		_, err := os.Stat(filepath.Join(dir, "shards", fmt.Sprintf("shard-%d.json", i)))
		switch {
		case failed:
			st.failed = append(st.failed, i)
		case done && err == nil:
			st.done = append(st.done, i)
			st.took = append(st.took, end.Sub(start))
		default:
			return false
		}
		return true
	}
	type open struct {
		i     int
		start time.Time
		job   string
	}
	var started []open
	for i := 1; i <= st.plan.Shards; i++ {
		start, ok := stamp(i, "started")
		switch {
		case finished(i, start):
		case ok:
			job, _ := read(i, "job")
			started = append(started, open{i, start, job})
		default:
			st.pending = append(st.pending, i)
		}
	}
	var jobs map[string]bool
	if len(started) > 0 {
		jobs, st.queueErr = queued()
	}
	for _, o := range started {
		switch {
		case st.queueErr != nil || o.job == "" || jobs[o.job]:
			// Still queued, or nobody can tell (squeue failed; a task
			// run by hand records no job ID).
			st.running = append(st.running, o.i)
			st.runningFor = append(st.runningFor, now.Sub(o.start))
		case finished(o.i, o.start):
		default:
			st.failed = append(st.failed, o.i)
			st.lost = append(st.lost, o.i)
		}
	}
	slices.Sort(st.done)
	slices.Sort(st.failed)
	_, err = os.Stat(filepath.Join(dir, "result.txt"))
	st.merged = err == nil
	return st, nil
}

// eta estimates the time left from the finished shards' mean: the
// running ones' rest, and the pending ones as many at a time as run now.
func (st *slurmStatus) eta() (time.Duration, bool) {
	if len(st.took) == 0 {
		return 0, false
	}
	mean := meanOf(st.took)
	var left time.Duration
	for _, d := range st.runningFor {
		left = max(left, mean-d)
	}
	width := max(len(st.running), 1)
	waves := (len(st.pending) + width - 1) / width
	return left + time.Duration(waves)*mean, true
}

func (st *slurmStatus) print(w io.Writer, dir string) {
	p := &st.plan
	fmt.Fprintf(w, "sweep of %d runs in %d shards (rnic %s)\n", p.Points, p.Shards, p.Version)
	fmt.Fprintf(w, "done %d, running %d, failed %d, pending %d\n", len(st.done), len(st.running), len(st.failed), len(st.pending))
	switch eta, ok := st.eta(); {
	case st.merged:
		fmt.Fprintf(w, "merged: %s/result.txt\n", dir)
	case len(st.done) == p.Shards:
		fmt.Fprintln(w, "every shard done; the merge job writes the results")
	case ok && len(st.running)+len(st.pending) > 0:
		fmt.Fprintf(w, "about %v left (finished shards took %v on average)\n", eta.Round(time.Second), meanOf(st.took).Round(time.Second))
	}
	if len(st.lost) > 0 {
		fmt.Fprintf(w, "shards %s started and are no longer in Slurm's queue without having finished: killed outright, out of memory, or their node failed (counted as failed)\n",
			joinInts(st.lost))
	}
	if st.queueErr != nil && len(st.running) > 0 {
		fmt.Fprintf(w, "(squeue: %v; a running shard that was killed outright would show as running)\n", st.queueErr)
	}
	if len(st.failed) > 0 {
		fmt.Fprintf(w, "failed shards %s (logs in %s/logs); re-run them with\n  sbatch --array=%s %s/shard.sbatch\nthen merge with\n  sbatch %s/merge.sbatch\n",
			joinInts(st.failed), dir, strings.ReplaceAll(joinInts(st.failed), " ", ""), dir, dir)
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func meanOf(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}
