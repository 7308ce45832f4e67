package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/rnic/rnic/sim/experiment"
	"github.com/rnic/rnic/sim/perf"
	"github.com/spf13/cobra"
)

// simFlags are the sim command's flags: a list of values for each swept
// parameter, and where the results go.
type simFlags struct {
	profiles, sets, tests                                                                 []string
	sizes, qps, pairs, iters, warmup, txDepth, postList, rxDepth, footprint, page, tclass []string
	threads, cqMod, inline, mrChurn, seeds, incast, metadata, mrPerQP, random             []string
	atomicType, atomicTarget, recvEvery                                                   []string
	limit, scenario, timeline, timelinePort, ports, shard, shardFile                      string
	jobs, timelineQP                                                                      int
	slurm                                                                                 slurmFlags

	csv, json, plot, x, y, series, title string
	logx, logy                           bool
	columns                              []string
	wall, quiet, breakdown               bool
}

// newSimCmd returns "rnic sim" and its "profile" subcommands.
func newSimCmd() *cobra.Command {
	cmd, _ := simCommand()
	cmd.AddCommand(newSimProfileCmd(), newSimMergeCmd(), newSimStatusCmd())
	return cmd
}

// simCommand returns the sim command without its subcommands, and the
// flags it parses into (merge parses a shard's command line with it).
func simCommand() (*cobra.Command, *simFlags) {
	var f simFlags
	tests := make([]string, len(perf.Tests))
	for i, t := range perf.Tests {
		tests[i] = t.String()
	}
	cmd := &cobra.Command{
		Use:   "sim [flags]",
		Short: "Run perftest-like workloads on simulated RNICs in virtual time, and sweep their parameters",
		Long: `sim runs perftest-like workloads between simulated hosts on one switch, in
virtual time, on a model of a hardware RNIC (a profile: caches, PCIe, DMA
engines, processing units, line rate). It reports throughput (Gb/s, Mops),
latency percentiles and the NIC pipeline's counters: cache hit rates, PCIe
bytes and utilisation, PCIe bytes per network byte, unit and DMA
utilisation.

Every workload flag takes a comma-separated list; sim runs every
combination, one after another (or -j at once), and prints one row per
run. A value that a run could not honour is refused before anything runs
(--qps 0; --random, --tx-depth or --cq-mod above 1 with a latency test,
which ping-pongs one buffer), so that the table never shows a parameter
the run did not use. Sizes take K, M and G suffixes, and a..b stands for
the powers of two from a to b (--qps 1..4096). Results are deterministic:
the same flags give the same CSV and JSON.

Tests: ` + strings.Join(tests, ", ") + `.

Profiles are TOML files; "rnic sim profile list" names the built-in ones
and "rnic sim profile show cx6 > mine.toml" writes one to copy and edit
(--profile mine.toml). --set key=value changes one parameter of the
profile; key=v1,v2 sweeps it.

By default payload bytes are moved and checked; --metadata moves only
lengths, so that thousands of QPs and tens of hosts simulate quickly.

The fabric is one switch by default (topology.kind=leaf-spine or fat-tree
for several, ECMP on the UDP source port). A switch drops what overflows an
output port's buffer and marks ECN (RED). An incast beyond the buffer
therefore loses frames and waits out retransmission timeouts (the table
then shows wire_drops, retrans and timeouts), unless the NICs react:
--set dcqcn.enabled=true sends ECN-capable packets, CNPs for marked ones
and cuts the senders' rates. --set switch.shared_buffer_bytes=N gives the
switches one buffer with dynamic thresholds, and --set switch.pfc=true
makes priority 3 lossless (pause frames hop by hop; --tclass 104 puts the
QPs on it): columns pfc_pauses, pfc_paused_us, headroom_drops; --ports
F.csv writes every port's counters per priority. --set timely.enabled=true
runs delay-based TIMELY instead of DCQCN; --set dcqcn.preset=paper or
mellanox takes a named parameter set. --timeline draws each tenant's
throughput, the congestion-control rate of one of its QPs (--timeline-qp)
and the queue of one port (--timeline-port; by default the one towards
the first server) over time.

A sweep runs as shards with --shard i/N (each writes a shard file; "rnic
sim merge FILES" prints and writes what the whole sweep would), or on a
Slurm cluster with --slurm DIR (a job array of shards and their merge;
"rnic sim status DIR" follows it).

Examples:
  rnic sim --test write_lat --size 8 --iters 1000
  rnic sim --breakdown
  rnic sim --test write_bw,read_bw --size 64 --qps 1,16,256,4096,16384 --metadata \
      --iters 200 --csv qps.csv --plot qps.svg --x qps --y mops --series test --logx
  rnic sim --test write_bw --size 64 --qps 4096 --metadata --set caches.qpc.entries=1024,4096,16384
  rnic sim --test write_bw --size 4K --footprint 64M --page-size 4K,2M --metadata
  rnic sim --test write_bw --pairs 8 --incast --size 64K --set switch.buffer_bytes=1048576,0 -j 2
  rnic sim --test write_bw --pairs 8 --incast --size 64K --metadata --set dcqcn.enabled=false,true \
      --columns dcqcn.enabled,gbps,jain,wire_drops,timeouts,ecn_marked
  rnic sim --test write_bw --pairs 8 --incast --size 64K --metadata --tclass 104 \
      --set switch.shared_buffer_bytes=2097152 --set switch.pfc=false,true --set dcqcn.enabled=false,true`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringSliceVar(&f.profiles, "profile", []string{experiment.DefaultProfile}, "hardware profiles: built-in names or TOML files")
	fl.StringArrayVar(&f.sets, "set", nil, "override a profile parameter, key=value (key=v1,v2 sweeps it); repeatable")
	fl.StringSliceVar(&f.tests, "test", nil, "workloads (default write_bw)")
	fl.StringSliceVar(&f.sizes, "size", nil, "message sizes in bytes (default 65536 for bandwidth, 8 for latency tests; atomic_bw always moves 8)")
	fl.StringSliceVar(&f.qps, "qps", nil, "QPs per client (default 1)")
	fl.StringSliceVar(&f.pairs, "pairs", nil, "client/server host pairs: 2×pairs hosts, or pairs+1 with --incast (default 1)")
	fl.StringSliceVar(&f.incast, "incast", nil, "all clients send to one server (--incast=false,true sweeps)")
	fl.StringSliceVar(&f.iters, "iters", nil, "operations per QP (default 1000)")
	fl.StringSliceVar(&f.warmup, "warmup", nil, "operations per QP left out of the measurement (default 0)")
	fl.StringSliceVar(&f.txDepth, "tx-depth", nil, "operations outstanding per QP, bandwidth tests (default 128; latency tests keep 1)")
	fl.StringSliceVar(&f.postList, "post-list", nil, "send work requests posted together with one doorbell, bandwidth tests (perftest's -l; default 1)")
	fl.StringSliceVar(&f.atomicType, "atomic-type", nil, "atomic_bw's operation: FETCH_AND_ADD or CMP_AND_SWAP (perftest's -A; default FETCH_AND_ADD)")
	fl.StringSliceVar(&f.atomicTarget, "atomic-target", nil, "atomic_bw's addresses: spread (through the footprint, the default), qp (one per QP) or shared (one per server)")
	fl.StringSliceVar(&f.rxDepth, "rx-depth", nil, "receives a send_bw server keeps posted, reposting one per completion (perftest's -r; default 2 × tx-depth)")
	fl.StringSliceVar(&f.footprint, "footprint", nil, "registered memory per QP, bytes, at least one message (default one message, at least 64)")
	fl.StringSliceVar(&f.page, "page-size", nil, "MTT page size, a power of two from 4K to 1G (default 4K; 2M for huge pages)")
	fl.StringSliceVar(&f.mrPerQP, "mr-per-qp", nil, "one memory region per QP, as perftest's --mr_per_qp (default: one per host, shared by its QPs)")
	fl.StringSliceVar(&f.random, "random", nil, "offsets drawn uniformly from the footprint instead of in order (bandwidth tests; --random=false,true sweeps)")
	fl.StringSliceVar(&f.threads, "threads", nil, "application threads per host (default 1)")
	fl.StringSliceVar(&f.cqMod, "cq-mod", nil, "one signaled completion every this many operations, bandwidth tests (default 1; latency tests signal each)")
	fl.StringSliceVar(&f.inline, "inline", nil, "largest inline payload of WRITE and SEND tests, bytes; 0: none (default 220 for write_lat and send_lat, 0 otherwise)")
	fl.StringSliceVar(&f.metadata, "metadata", nil, "move lengths only, not payload bytes (fast; nothing is checked)")
	fl.StringVar(&f.scenario, "scenario", "", "run the tenants of a scenario file (TOML) at once on one fabric, a row per tenant; --set tenant.NAME.KEY=v1,v2 sweeps a tenant's parameter (see docs/model.md)")
	fl.StringVar(&f.ports, "ports", "", "write the fabric's counters after each run to this CSV file (- for standard output): per egress port and priority, frames, drops, ECN marks, PFC pauses and paused time")
	fl.StringVar(&f.timeline, "timeline", "", "write each run's throughput over virtual time, a line per tenant: a plot (.png, .svg, .pdf; run i of several gets -i) or the data (.csv)")
	fl.IntVar(&f.timelineQP, "timeline-qp", 0, "--timeline: the client QP whose congestion-control rate it draws, 0-based, client by client (the second client's first is --qps); with --scenario a tenant's timeline_qp")
	fl.StringVar(&f.timelinePort, "timeline-port", "", "--timeline: the egress port whose queue it draws, NODE:PORT as --ports names it (switch:0, leaf1:3, \"host 2:0\" for host 2's uplink; default: the switch port towards the first server)")
	fl.StringSliceVar(&f.tclass, "tclass", nil, "IP traffic class of the QPs' packets, DSCP << 2 (perftest's --tclass; 104 is DSCP 26, priority 3, the profiles' PFC priority)")
	fl.StringSliceVar(&f.recvEvery, "recv-every", nil, "a send_bw server posts one receive per QP this often (1us, 500ns) instead of one per completion, up to rx-depth outstanding (0: on completion)")
	fl.StringSliceVar(&f.mrChurn, "mr-churn", nil, "re-register a memory region on each server this often (10us, 1ms; 0: never)")
	fl.StringSliceVar(&f.seeds, "seed", nil, "random seeds")
	fl.StringVar(&f.limit, "limit", "", "virtual time limit of each run (default 10s)")
	fl.IntVarP(&f.jobs, "jobs", "j", 1, "runs at once (results do not depend on it)")
	fl.StringVar(&f.csv, "csv", "", `write the results as CSV to this file ("-": standard output)`)
	fl.StringVar(&f.json, "json", "", `write the results as JSON to this file ("-": standard output)`)
	fl.StringVar(&f.plot, "plot", "", "plot --y against --x to this file (.png, .svg or .pdf)")
	fl.StringVar(&f.x, "x", "", "plot: column on the X axis (default: the first swept numeric parameter)")
	fl.StringVar(&f.y, "y", "mops", "plot: column on the Y axis")
	fl.StringVar(&f.series, "series", "", "plot: one line per value of this column (other swept parameters split lines too)")
	fl.BoolVar(&f.logx, "logx", false, "plot: logarithmic X axis")
	fl.BoolVar(&f.logy, "logy", false, "plot: logarithmic Y axis")
	fl.StringVar(&f.title, "title", "", `plot: title (default "Y vs X (profile)")`)
	fl.StringSliceVar(&f.columns, "columns", nil, `the table's columns ("all": every one; default: the swept parameters and a summary)`)
	fl.BoolVar(&f.wall, "wall", false, "add wall-clock columns (wall_s, events_per_wall_s, pkts_per_wall_s), which differ from run to run")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on standard error")
	fl.BoolVar(&f.breakdown, "breakdown", false, "instead of the sweep, print the latency breakdown of one small RDMA WRITE (--size, default 8) on each profile")
	fl.StringVar(&f.shard, "shard", "", "run share i/N of the sweep's runs (every N-th, from the i-th) and write them to a shard file, for \"rnic sim merge\" (the outputs the command asks for are merge's to write)")
	f.slurm.add(fl)
	fl.StringVar(&f.shardFile, "shard-file", "", "with --shard: the shard file (default rnic-sim-shard-i-of-N.json)")
	for _, name := range []string{"incast", "metadata", "mr-per-qp", "random"} {
		fl.Lookup(name).NoOptDefVal = "true"
	}
	return cmd, &f
}

// runSim runs the sweep and writes its results.
func runSim(cmd *cobra.Command, f *simFlags) error {
	sw, err := f.sweep()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.breakdown {
		return experiment.WriteBreakdowns(out, sw)
	}
	cols := sw.Columns(f.wall)
	if len(f.columns) > 0 {
		if _, err := experiment.Select(cols, f.columns); err != nil {
			return fmt.Errorf("--columns: %w", err)
		}
	}
	ps, err := f.plotSpec(sw, cols)
	if err != nil {
		return err
	}
	if f.slurm.dir != "" {
		if f.shard != "" {
			return errors.New("--slurm writes the shards' jobs: give it no --shard")
		}
		points, _ := sw.Points() // checked by plotSpec's sweep
		return f.slurm.write(out, cmd.Flags(), len(points))
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	opt := experiment.Options{Jobs: f.jobs}
	if !f.quiet {
		opt.Progress = cmd.ErrOrStderr()
	}
	if f.shard != "" {
		if opt.Shard, err = experiment.ParseShard(f.shard); err != nil {
			return fmt.Errorf("--shard: %w", err)
		}
	}
	rows, runErr := experiment.Run(ctx, sw, opt)
	if rows == nil && runErr != nil {
		return runErr
	}
	if errors.Is(runErr, context.Canceled) {
		runErr = fmt.Errorf("interrupted: the results are of the %d runs that finished", len(rows))
	}
	if f.shard != "" {
		// A shard writes its rows for merge, and shows its table.
		points, _ := sw.Points()
		name, err := f.writeShard(cmd.Flags(), opt.Shard, len(points), rows)
		if err != nil {
			return errors.Join(runErr, fmt.Errorf("--shard: %w", err))
		}
		err = errors.Join(runErr, experiment.WriteTable(out, sw.TableColumns(cols, rows), rows))
		shardProgress(cmd.ErrOrStderr(), opt.Shard, rows, name)
		if n := experiment.Failed(rows); n > 0 {
			err = errors.Join(err, fmt.Errorf("%d of the shard's %d runs failed (they are in its file, as a whole run would show them)", n, len(rows)))
		}
		return err
	}
	err = errors.Join(runErr, f.write(out, sw, cols, rows, ps))
	if n := experiment.Failed(rows); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d runs failed", n, len(rows)))
	}
	return err
}
