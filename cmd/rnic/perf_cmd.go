package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/perftest"
	"github.com/spf13/cobra"
)

// perfFlags are the perf command's flags: perftest's, with its names and
// defaults, plus --pcap and --timeout.
type perfFlags struct {
	dev, size, conn, atomic string

	pcap                string // --pcap: the capture's file
	pcapSnap, pcapFiles int    // --pcap-snaplen, --pcap-filecount
	pcapFileSize        string // --pcap-filesize

	all, cpuFreq, gbits, noPeak bool

	iters, duration, margin, qps, mtu, gid, port, tx, rx, cqMod, inline, qpTimeout int

	duplex, reversed, events, runInf, mrPerQP, histogram, unsorted, cpuUtil, outJSON bool
	postList, tos, tclass, sl, burst                                                 int
	outJSONFile, rateLimit, rateUnits, rateType, reportCounters                      string

	counters bool // --counters: print the device's counters after the run

	timeout time.Duration
	loss    float64 // seeded loss injected in the NIC's own link, on send

	dcqcn    bool    // --dcqcn: congestion control on the NIC
	rxMarkCE float64 // --rx-mark-ce: received ECN-capable frames marked CE
}

// newPerfCmd returns "rnic perf <test> [flags] [server]".
func newPerfCmd() *cobra.Command { return perfCommand(runPerf) }

// perfCommand returns the perf command with run as what it does.
func perfCommand(run func(*cobra.Command, *perfFlags, []string) error) *cobra.Command {
	var f perfFlags
	tests := make([]string, 0, 7)
	for _, t := range perftest.Tests() {
		tests = append(tests, t.String())
	}
	cmd := &cobra.Command{
		Use:   "perf <test> [flags] [server]",
		Short: "perftest's benchmarks (ib_write_bw and friends) on an rnic device",
		Long: `perf runs one of perftest's benchmarks on an rnic device that speaks RoCEv2
over UDP port 4791, compatible with the real perftest programs (same TCP
exchange, same flags, same output): an rnic server can be driven by
ib_write_bw on a host with an RDMA NIC, and the reverse.

Tests: ` + strings.Join(tests, ", ") + ` (also with an "ib_" prefix).

Without a server address, perf is the server: it waits for a client on TCP
port 18515. With one, it is the client. -d selects the NIC's address (an IP
address or an interface name; by default the address of the TCP
connection; two NICs on one host need two addresses, as each binds UDP
port 4791 on its own). While it runs, "rnic stat" shows the device's
counters; --counters prints them at the end of the run.

As in perftest, the two sides agree on the MTU but not on -s, -a, -b,
-l or --reversed: give both the same. A server started without the
client's -a has buffers too small for its larger messages.

--dcqcn turns on DCQCN congestion control in the NIC (rnic.DefaultDCQCN):
its RC packets leave ECN-capable (ECT(0)), a packet that arrives marked
Congestion Experienced is answered with a CNP, and a CNP cuts the sending
QP's rate. The line rate is 100 Gb/s: a link on UDP sockets knows no port
speed. After the run a line "dcqcn: np_ecn_marked_roce_packets N
np_cnp_sent N rp_cnp_handled N rp_cnp_ignored N" shows what it did.
--rx-mark-ce P marks received ECN-capable frames CE with probability P
before the NIC sees them, standing in for a congested switch on the way
(its RED queue with ECN): a server with --dcqcn --rx-mark-ce 0.05 sends
CNPs to its client.

--pcap FILE records the NIC's frames for tshark, bounded as tcpdump
bounds a capture: --pcap-snaplen (tcpdump -s; default 128 bytes, every
header), --pcap-filesize (tcpdump -C, million bytes) and --pcap-filecount
(tcpdump -W, a ring of files FILE0...).

Examples:
  rnic perf write_bw -d 127.0.0.1                       # server
  rnic perf write_bw -d 127.0.0.2 -s 4096 127.0.0.1     # client
  rnic perf read_lat -d 127.0.0.1 -a                    # server for the next line
  rnic perf write_bw -d 127.0.0.1 --dcqcn --rx-mark-ce 0.05   # server: CNPs for 5 % of the writes
  rnic perf write_bw -d 127.0.0.2 --dcqcn 127.0.0.1            # client: cuts its rate on them
  rnic perf read_lat -d 127.0.0.2 -a --pcap lat.pcap --pcap-filesize 50 --pcap-filecount 4 127.0.0.1`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringVarP(&f.dev, "ib-dev", "d", "", "the NIC's IP address, or an interface whose address to use")
	fl.StringVarP(&f.size, "size", "s", "", "message size (default 65536 for bw, 2 for latency tests; K and M suffixes)")
	fl.BoolVarP(&f.all, "all", "a", false, "run every size from 2 B to 8 MiB")
	fl.IntVarP(&f.iters, "iters", "n", 0, "iterations (default 5000 for write_bw, 1000 for the others)")
	fl.IntVarP(&f.duration, "duration", "D", 0, "run for this many seconds instead of -n iterations")
	fl.IntVarP(&f.margin, "margin", "f", -1, "with -D: seconds at each end left out of the measurement (-1: D/4)")
	fl.IntVarP(&f.qps, "qp", "q", 1, "number of QPs (bw tests)")
	fl.IntVarP(&f.mtu, "mtu", "m", 0, "path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's)")
	fl.IntVarP(&f.gid, "gid-index", "x", -1, "GID index (-1: automatic, 1; as on rxe, 0 is the port's link-local GID and 1 its IP address)")
	fl.IntVarP(&f.port, "port", "p", perftest.DefaultPort, "TCP port of the exchange")
	fl.BoolVarP(&f.cpuFreq, "CPU-freq", "F", false, "accepted for compatibility; rnic measures with the monotonic clock")
	fl.BoolVar(&f.gbits, "report_gbits", false, "report bandwidth in Gb/s instead of MB/s")
	fl.IntVarP(&f.tx, "tx-depth", "t", 0, "send queue depth (default 128 for bw, 1 for latency)")
	fl.IntVarP(&f.rx, "rx-depth", "r", 0, "receive queue depth of send tests (default 512)")
	fl.IntVarP(&f.cqMod, "cq-mod", "Q", 0, "one signaled completion every this many messages (default 100)")
	fl.IntVarP(&f.inline, "inline_size", "I", -1, "max inline data size (-1: 220 for write_lat, 236 for send_lat, 0 otherwise)")
	fl.IntVarP(&f.qpTimeout, "qp-timeout", "u", 14, "QP timeout: the local ACK timeout is 4.096 µs × 2^u (0: none)")
	fl.StringVarP(&f.conn, "connection", "c", "RC", "connection type: RC, UC or UD")
	fl.StringVarP(&f.atomic, "atomic_type", "A", "FETCH_AND_ADD", "atomic_bw's operation: FETCH_AND_ADD or CMP_AND_SWAP")
	fl.BoolVarP(&f.noPeak, "noPeak", "N", false, "do not compute the peak bandwidth")
	fl.BoolVarP(&f.duplex, "bidirectional", "b", false, "bidirectional bandwidth (bw tests): both sides send; give it to both")
	fl.BoolVar(&f.reversed, "reversed", false, "reverse the traffic: the server sends to the client (give it to both sides)")
	fl.IntVarP(&f.postList, "post_list", "l", 1, "post lists of this many send work requests, one doorbell each (bw tests)")
	fl.BoolVarP(&f.events, "events", "e", false, "sleep on CQ events instead of polling (not write tests)")
	fl.BoolVar(&f.runInf, "run_infinitely", false, "run until interrupted, printing the bandwidth every -D seconds (default 5; bw tests)")
	fl.BoolVar(&f.mrPerQP, "mr_per_qp", false, "one memory region per QP instead of one for all (bw tests)")
	fl.BoolVarP(&f.histogram, "report-histogrm", "H", false, "print every latency sample, sorted (latency tests; perftest's spelling)")
	fl.BoolVar(&f.histogram, "report-histogram", false, "the same as -H, as perftest's help spells it")
	fl.BoolVarP(&f.unsorted, "report-unsorted", "U", false, "print every latency sample in the order measured (latency tests)")
	fl.IntVarP(&f.tos, "tos", "T", -1, "perftest's TOS for rdma_cm QPs (-R), which rnic perf does not have: refused; --tclass sets the traffic class")
	fl.IntVar(&f.tclass, "tclass", 0, "traffic class of the GRH: the IP TOS (IPv4) or traffic class (IPv6) on the wire")
	fl.IntVarP(&f.sl, "sl", "S", 0, "service level (0-15): the priority level of the NIC's arbiter")
	fl.BoolVar(&f.cpuUtil, "cpu_util", false, "show the CPU utilization in the report (-D runs)")
	fl.BoolVar(&f.outJSON, "out_json", false, "write each result to a JSON file too")
	fl.StringVar(&f.outJSONFile, "out_json_file", "", "with --out_json: the JSON file (default perftest_out.json)")
	fl.StringVar(&f.rateLimit, "rate_limit", "", "the most a QP sends: in Gb/s, or --rate_units (bw tests; perftest's software limiter)")
	fl.StringVar(&f.rateUnits, "rate_units", "g", "units of --rate_limit: M (MiB/s), g (Gb/s) or p (messages/s)")
	fl.StringVar(&f.rateType, "rate_limit_type", "", "SW: perftest's software limiter; HW and PP are refused (no hardware limiter, no Raw Ethernet). Not given: HW, which falls back to SW as on a RoCE port")
	fl.IntVar(&f.burst, "burst_size", 0, "with --rate_limit: messages per burst (default: the tx depth)")
	fl.StringVarP(&f.reportCounters, "report-counters", "W", "", "after each result, the change of these counters: hw_counters/<name> (rnic stat's names), counters/port_{xmit,rcv}_{data,packets}, comma-separated")
	fl.BoolVar(&f.counters, "counters", false, "after a run, print the device's counters as rdma statistic show does")
	fl.StringVar(&f.pcap, "pcap", "", "write every frame the NIC sends and receives to this pcap file (tcpdump -w)")
	fl.IntVar(&f.pcapSnap, "pcap-snaplen", defaultSnapLen, "with --pcap: bytes kept of each frame, Ethernet header included (tcpdump -s; 0: whole frames); the default keeps every RoCEv2 header and the payload's first bytes")
	fl.StringVar(&f.pcapFileSize, "pcap-filesize", "", "with --pcap: before writing a frame, start a new file if the current one is over this many million bytes (tcpdump -C; k, m, g: KiB, MiB, GiB); the next files are FILE1, FILE2, ...")
	fl.IntVar(&f.pcapFiles, "pcap-filecount", 0, "with --pcap-filesize: keep this many files, FILE0 to FILE<n-1>, overwriting the oldest (tcpdump -W)")
	fl.DurationVar(&f.timeout, "timeout", perftest.DefaultTimeout, "give up when the peer is silent this long")
	fl.Float64Var(&f.loss, "loss", 0, "drop this fraction of the frames the NIC sends (seeded), to exercise loss recovery against a real peer")
	fl.BoolVar(&f.dcqcn, "dcqcn", false, "DCQCN congestion control: ECN-capable packets, CNPs for CE-marked ones, rate cuts on CNPs; line rate 100 Gb/s (the UDP link knows no port speed); prints the dcqcn counters after the run")
	fl.Float64Var(&f.rxMarkCE, "rx-mark-ce", 0, "mark this fraction of the ECN-capable frames the NIC receives Congestion Experienced (seeded), before the NIC sees them: stands in for a congested switch's RED/ECN queue on the way in")
	return cmd
}

// config turns the command line into a perftest configuration.
func (f *perfFlags) config(args []string) (perftest.Config, error) {
	test, err := perftest.ParseTest(args[0])
	if err != nil {
		return perftest.Config{}, err
	}
	c := perftest.NewConfig(test)
	if len(args) == 2 {
		c.Peer = args[1]
	}
	if c.Local, err = resolveDevice(f.dev); err != nil {
		return c, err
	}
	if f.size != "" {
		if c.Size, err = perftest.ParseSize(f.size); err != nil {
			return c, err
		}
	}
	if c.Conn, err = perftest.ParseConn(f.conn); err != nil {
		return c, err
	}
	if c.Atomic, err = perftest.ParseAtomicType(f.atomic); err != nil {
		return c, err
	}
	c.All, c.Iters, c.Duration, c.Margin, c.QPs = f.all, f.iters, f.duration, f.margin, f.qps
	c.MTU, c.GIDIndex, c.Port, c.TxDepth, c.RxDepth = f.mtu, f.gid, f.port, f.tx, f.rx
	c.CQMod, c.Inline, c.ReportGbits, c.NoPeak, c.Timeout = f.cqMod, f.inline, f.gbits, f.noPeak, f.timeout
	c.QPTimeout = f.qpTimeout
	if c.QPTimeout < 0 {
		return c, fmt.Errorf("-u %d: QP timeout out of range [0, 31]", c.QPTimeout)
	}
	c.Duplex, c.Reversed, c.PostList, c.Events, c.RunInfinitely = f.duplex, f.reversed, f.postList, f.events, f.runInf
	c.MRPerQP, c.Histogram, c.Unsorted, c.TrafficClass, c.SL = f.mrPerQP, f.histogram, f.unsorted, f.tclass, f.sl
	c.CPUUtil, c.OutJSON, c.OutJSONFile, c.BurstSize, c.ReportCounters = f.cpuUtil, f.outJSON, f.outJSONFile, f.burst, f.reportCounters
	if f.rateLimit != "" {
		if c.RateLimit, err = strconv.ParseFloat(f.rateLimit, 64); err != nil || c.RateLimit <= 0 {
			return c, fmt.Errorf("--rate_limit %q: the rate limit must be a positive number", f.rateLimit)
		}
	}
	if c.RateUnits, err = perftest.ParseRateUnits(f.rateUnits); err != nil {
		return c, err
	}
	if f.rateType != "" {
		if c.RateLimitType, err = perftest.ParseRateLimitType(f.rateType); err != nil {
			return c, err
		}
	}
	return c, nil
}

// rateFlags are the flags that mean something only with --rate_limit.
var rateFlags = []string{"rate_units", "rate_limit_type", "burst_size"}

// runPerf runs the benchmark until it ends or the user interrupts it.
func runPerf(cmd *cobra.Command, f *perfFlags, args []string) (err error) {
	cfg, copts, err := f.check(cmd, args)
	if err != nil {
		return err
	}
	devs := &perfDevices{errw: cmd.ErrOrStderr(), loss: f.loss, rxMarkCE: f.rxMarkCE}
	if f.dcqcn {
		d := rnic.DefaultDCQCN(perfLineRate)
		devs.dcqcn = &d
	}
	if f.pcap != "" {
		if devs.capture, err = newCapture(f.pcap, copts); err != nil {
			return err
		}
	}
	defer func() { err = errors.Join(err, devs.close()) }()
	cfg.Open, cfg.Out, cfg.Err = devs.open, cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	res, err := perftest.Run(ctx, cfg)
	if err != nil {
		// The counters say where frames went (drops, NAKs, retries)
		// without a second attempt under a debugger.
		printCounters(cmd.ErrOrStderr(), res, false)
		return fmt.Errorf("perf %s: %w", cfg.Test, err)
	}
	if f.counters {
		printCounters(cmd.OutOrStdout(), res, true)
	}
	if f.dcqcn || f.rxMarkCE > 0 {
		devs.printDCQCN(cmd.OutOrStdout(), res)
	}
	return nil
}

// check turns the command line into the run's configuration and the
// capture's bounds, refusing flags that would mean nothing.
func (f *perfFlags) check(cmd *cobra.Command, args []string) (perftest.Config, captureOptions, error) {
	cfg, err := f.config(args)
	if err != nil {
		return cfg, captureOptions{}, err
	}
	if f.rateLimit == "" {
		for _, name := range rateFlags {
			if cmd.Flags().Changed(name) {
				// perftest ignores them without a rate limit; rnic says so.
				return cfg, captureOptions{}, fmt.Errorf("--%s needs --rate_limit", name)
			}
		}
	}
	if cmd.Flags().Changed("tos") {
		// perftest's -T sets the TOS of rdma_cm QPs (-R) and Raw
		// Ethernet QPs, neither of which rnic perf has; perftest refuses
		// it without them, after checking its range.
		if f.tos < 0 || f.tos > 255 {
			return cfg, captureOptions{}, fmt.Errorf("-T %d: TOS should be between 0 and 255", f.tos)
		}
		return cfg, captureOptions{}, fmt.Errorf("-T %d: TOS only valid for rdma_cm based QP and RawEth QP (rnic perf has neither -R nor RawEth; --tclass sets the traffic class)", f.tos)
	}
	if f.loss < 0 || f.loss >= 1 {
		return cfg, captureOptions{}, fmt.Errorf("--loss %v: must be in [0, 1)", f.loss)
	}
	if !(f.rxMarkCE >= 0 && f.rxMarkCE <= 1) { // also rejects NaN
		return cfg, captureOptions{}, fmt.Errorf("--rx-mark-ce %v: must be a probability in [0, 1]", f.rxMarkCE)
	}
	copts, err := f.captureOptions(cmd)
	return cfg, copts, err
}

// captureOptions checks the --pcap-* flags: they bound a capture, so
// they need --pcap.
func (f *perfFlags) captureOptions(cmd *cobra.Command) (captureOptions, error) {
	o := captureOptions{snapLen: f.pcapSnap, fileCount: f.pcapFiles}
	if f.pcap == "" {
		for _, name := range []string{"pcap-snaplen", "pcap-filesize", "pcap-filecount"} {
			if cmd.Flags().Changed(name) {
				return o, fmt.Errorf("--%s needs --pcap: it bounds a capture", name)
			}
		}
		return o, nil
	}
	if f.pcapFileSize != "" {
		var err error
		if o.fileSize, err = parseFileSize(f.pcapFileSize); err != nil {
			return o, err
		}
	}
	return o, nil
}
