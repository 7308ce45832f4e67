package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/sim/experiment"
	"github.com/rnic/rnic/sim/profile"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flags that say how a sweep runs, not what it is: they are left out of
// the command line a shard records, so that shards run with different
// ones still merge.
var shardNeutralFlags = map[string]bool{"shard": true, "shard-file": true, "jobs": true, "quiet": true}

// sweepCommand returns the sim command line that defines the sweep and
// its outputs, canonical: every flag set, by name, one --name=value each
// (lists joined by commas), without the flags of shardNeutralFlags. Two
// shards of one sweep record the same line however their flags were
// ordered or spelled.
func sweepCommand(fl *pflag.FlagSet) []string {
	var args []string
	fl.Visit(func(f *pflag.Flag) {
		if shardNeutralFlags[f.Name] {
			return
		}
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	slices.Sort(args)
	return args
}

// sweepDigest hashes the command line and the files it reads (profile
// files and the scenario), so that shards of one command run on
// different files are told apart.
func sweepDigest(f *simFlags, command []string) (string, error) {
	h := sha256.New()
	for _, a := range command {
		fmt.Fprintf(h, "%q\n", a)
	}
	// A built-in profile is named by the version; files are hashed.
	files := slices.DeleteFunc(slices.Clone(f.profiles), builtinProfile)
	if f.scenario != "" {
		files = append(files, f.scenario)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// builtinProfile reports whether name is a built-in profile's.
func builtinProfile(name string) bool { return slices.Contains(profile.Names(), name) }

// simVersion is rnic's version as shards record it: the module's, with
// the commit it was built from when the build says (and "+dirty" for a
// tree with changes).
func simVersion() string {
	v := rnic.Version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if dirty {
			v += "+dirty"
		}
	}
	return v
}

// shardFileName is where shard sh writes without --shard-file.
func shardFileName(sh experiment.Shard) string {
	return fmt.Sprintf("rnic-sim-shard-%d-of-%d.json", sh.I, sh.N)
}

// writeShard writes a shard's rows to its shard file.
func (f *simFlags) writeShard(fl *pflag.FlagSet, sh experiment.Shard, points int, rows []experiment.Row) (string, error) {
	command := sweepCommand(fl)
	digest, err := sweepDigest(f, command)
	if err != nil {
		return "", err
	}
	name := f.shardFile
	if name == "" {
		name = shardFileName(sh)
	}
	tmp := name + ".tmp"
	fd, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	sf := experiment.NewShardFile(simVersion(), command, digest, sh, points, rows)
	if err := errors.Join(sf.Write(fd), fd.Close()); err != nil {
		os.Remove(tmp)
		return "", err
	}
	// Renamed into place whole: a shard file that exists is complete.
	return name, os.Rename(tmp, name)
}

// newSimMergeCmd returns "rnic sim merge FILES...".
func newSimMergeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "merge FILES...",
		Short: "Join the shard files of a sweep run with --shard into the sweep's results",
		Long: `merge reads the shard files of one sweep (rnic sim ... --shard i/N, each
writing rnic-sim-shard-i-of-N.json or its --shard-file) and prints and
writes exactly what one run of the whole sweep would: the table, and the
CSV, JSON, plot, timeline and ports files its command line asked for
(they are written by merge, not by the shards). It refuses files that
are not shards of one sweep: of different command lines or files, of
different rnic versions or shard counts, a shard twice or missing, or an
interrupted shard (run that shard again).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runSimMerge(cmd, args) },
	}
}

func runSimMerge(cmd *cobra.Command, names []string) error {
	files := make([]*experiment.ShardFile, len(names))
	for i, name := range names {
		fd, err := os.Open(name)
		if err != nil {
			return err
		}
		files[i], err = experiment.ReadShardFile(fd)
		fd.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	rows, err := experiment.Merge(names, files)
	if err != nil {
		return err
	}
	// The sweep and its outputs, from the command line the shards ran.
	sim, f := simCommand()
	if err := sim.Flags().Parse(files[0].Command); err != nil {
		return fmt.Errorf("the shards' command line: %w", err)
	}
	digest, err := sweepDigest(f, files[0].Command)
	if err != nil {
		return fmt.Errorf("the shards' files: %w", err)
	}
	if digest != files[0].Digest {
		return fmt.Errorf("the shards ran on other profile or scenario files than %s now", strings.Join(append(slices.Clone(f.profiles), f.scenario), ", "))
	}
	sw, err := f.sweep()
	if err != nil {
		return err
	}
	cols := sw.Columns(f.wall)
	ps, err := f.plotSpec(sw, cols)
	if err != nil {
		return err
	}
	err = f.write(cmd.OutOrStdout(), sw, cols, rows, ps)
	if n := experiment.Failed(rows); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d runs failed", n, len(rows)))
	}
	return err
}

// shardProgress writes a shard's summary line.
func shardProgress(w io.Writer, sh experiment.Shard, rows []experiment.Row, name string) {
	fmt.Fprintf(w, "shard %s: %d rows written to %s\n", sh, len(rows), name)
}
