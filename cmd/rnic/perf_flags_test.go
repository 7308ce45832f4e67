package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rnic/rnic/perftest"
	"github.com/spf13/cobra"
)

// parsePerf parses "rnic perf args..." into the run's configuration and
// the capture's bounds, as runPerf would, without running anything.
func parsePerf(args ...string) (cfg perftest.Config, copts captureOptions, err error) {
	cmd := perfCommand(func(c *cobra.Command, f *perfFlags, a []string) error {
		cfg, copts, err = f.check(c, a)
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if e := cmd.Execute(); e != nil {
		return cfg, copts, e
	}
	return cfg, copts, err
}

// TestPerfFlags checks that each perftest flag reaches the
// configuration, under perftest's short and long names.
func TestPerfFlags(t *testing.T) {
	tests := []struct {
		args []string
		want func(c perftest.Config) bool
	}{
		{[]string{"write_bw", "-b"}, func(c perftest.Config) bool { return c.Duplex }},
		{[]string{"write_bw", "--bidirectional"}, func(c perftest.Config) bool { return c.Duplex }},
		{[]string{"write_bw", "--reversed"}, func(c perftest.Config) bool { return c.Reversed }},
		{[]string{"write_bw", "-l", "8"}, func(c perftest.Config) bool { return c.PostList == 8 }},
		{[]string{"write_bw", "--post_list=4"}, func(c perftest.Config) bool { return c.PostList == 4 }},
		{[]string{"read_bw", "-e"}, func(c perftest.Config) bool { return c.Events }},
		{[]string{"read_bw", "--events"}, func(c perftest.Config) bool { return c.Events }},
		{[]string{"read_lat", "-H", "-U"}, func(c perftest.Config) bool { return c.Histogram && c.Unsorted }},
		{[]string{"read_lat", "--report-histogrm", "--report-unsorted"}, func(c perftest.Config) bool { return c.Histogram && c.Unsorted }},
		{[]string{"read_lat", "--report-histogram"}, func(c perftest.Config) bool { return c.Histogram }},
		{[]string{"write_bw"}, func(c perftest.Config) bool { return c.PostList == 1 && c.RateLimit == 0 && c.SL == 0 }},
		{[]string{"write_bw", "--tclass", "104"}, func(c perftest.Config) bool { return c.TrafficClass == 104 }},
		{[]string{"write_bw", "-S", "3"}, func(c perftest.Config) bool { return c.SL == 3 }},
		{[]string{"write_bw", "--sl", "7"}, func(c perftest.Config) bool { return c.SL == 7 }},
		{[]string{"write_bw", "--run_infinitely"}, func(c perftest.Config) bool { return c.RunInfinitely }},
		{[]string{"write_bw", "--out_json", "--out_json_file", "r.json"}, func(c perftest.Config) bool { return c.OutJSON && c.OutJSONFile == "r.json" }},
		{[]string{"write_bw", "--mr_per_qp"}, func(c perftest.Config) bool { return c.MRPerQP }},
		{[]string{"write_bw", "--cpu_util", "-D", "4"}, func(c perftest.Config) bool { return c.CPUUtil && c.Duration == 4 }},
		{[]string{"write_bw", "--rate_limit", "2.5"}, func(c perftest.Config) bool {
			return c.RateLimit == 2.5 && c.RateUnits == perftest.RateGbps && c.RateLimitType == perftest.RateLimitDefault
		}},
		{[]string{"write_bw", "--rate_limit=100", "--rate_units=M", "--rate_limit_type=SW", "--burst_size=16"}, func(c perftest.Config) bool {
			return c.RateLimit == 100 && c.RateUnits == perftest.RateMBps && c.RateLimitType == perftest.RateLimitSW && c.BurstSize == 16
		}},
		{[]string{"write_bw", "--rate_limit", "5000", "--rate_units", "p"}, func(c perftest.Config) bool { return c.RateUnits == perftest.RatePps }},
		{[]string{"write_bw", "-W", "hw_counters/out_of_sequence"}, func(c perftest.Config) bool { return c.ReportCounters == "hw_counters/out_of_sequence" }},
		{[]string{"write_bw", "--report-counters", "counters/port_xmit_data"}, func(c perftest.Config) bool { return c.ReportCounters == "counters/port_xmit_data" }},
	}
	for _, tt := range tests {
		cfg, _, err := parsePerf(tt.args...)
		if err != nil || !tt.want(cfg) {
			t.Errorf("rnic perf %s: err %v, config %+v", strings.Join(tt.args, " "), err, cfg)
		}
	}
}

// TestPerfCaptureFlags checks the --pcap-* flags and their defaults.
func TestPerfCaptureFlags(t *testing.T) {
	tests := []struct {
		args []string
		want captureOptions
	}{
		{[]string{"read_lat", "--pcap", "x.pcap"}, captureOptions{snapLen: defaultSnapLen}},
		{[]string{"read_lat", "--pcap", "x.pcap", "--pcap-snaplen", "0"}, captureOptions{}},
		{[]string{"read_lat", "--pcap", "x.pcap", "--pcap-filesize", "50", "--pcap-filecount", "4"}, captureOptions{snapLen: defaultSnapLen, fileSize: 50e6, fileCount: 4}},
		{[]string{"read_lat", "--pcap", "x.pcap", "--pcap-filesize", "64k"}, captureOptions{snapLen: defaultSnapLen, fileSize: 64 << 10}},
	}
	for _, tt := range tests {
		_, got, err := parsePerf(tt.args...)
		if err != nil || got != tt.want {
			t.Errorf("rnic perf %s: %+v, %v; want %+v", strings.Join(tt.args, " "), got, err, tt.want)
		}
	}
}

// TestPerfFlagErrors checks that flags that would mean nothing are
// refused, naming them.
func TestPerfFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"write_bw", "--rate_units", "M"}, "--rate_units needs --rate_limit"},
		{[]string{"write_bw", "--rate_limit_type", "SW"}, "--rate_limit_type needs --rate_limit"},
		{[]string{"write_bw", "--burst_size", "4"}, "--burst_size needs --rate_limit"},
		{[]string{"write_bw", "--rate_limit", "fast"}, "--rate_limit \"fast\""},
		{[]string{"write_bw", "--rate_limit", "-2"}, "must be a positive number"},
		{[]string{"write_bw", "--rate_limit", "5", "--rate_units", "K"}, "invalid rate limit units \"K\""},
		{[]string{"write_bw", "--rate_limit", "5", "--rate_limit_type", "XX"}, "invalid rate limit type \"XX\""},
		{[]string{"write_bw", "--pcap-snaplen", "64"}, "--pcap-snaplen needs --pcap"},
		{[]string{"write_bw", "--pcap-filesize", "10"}, "--pcap-filesize needs --pcap"},
		{[]string{"write_bw", "--pcap", "x", "--pcap-filesize", "lots"}, "--pcap-filesize \"lots\""},
		{[]string{"write_bw", "-T", "32"}, "-T 32: TOS only valid for rdma_cm based QP and RawEth QP"},
		{[]string{"write_bw", "--tos", "0"}, "-T 0: TOS only valid for rdma_cm based QP"},
		{[]string{"write_bw", "-T", "300"}, "-T 300: TOS should be between 0 and 255"},
		{[]string{"write_bw", "-X", "1"}, "unknown shorthand flag: 'X'"},
		{[]string{"write_bw", "--dualport"}, "unknown flag: --dualport"},
	}
	for _, tt := range tests {
		_, _, err := parsePerf(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rnic perf %s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// TestPerfCounters runs with --counters: after the report, each side
// prints its device's counters as rdma statistic show does, zeros too.
func TestPerfCounters(t *testing.T) {
	useMemLinks(t)
	srv, cli := perfPair(t, "10.0.0.1", "10.0.0.2", "write_bw", "-s", "4096", "-n", "100", "--counters")
	for dev, out := range map[string]string{"10.0.0.1": srv, "10.0.0.2": cli} {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, fmt.Sprintf("link rnic_%s/1 tx_packets ", dev)) || !strings.Contains(last, " out_of_sequence 0 ") {
			t.Errorf("last line %q, want the counters of rnic_%s, zeros included", last, dev)
		}
	}
	if !strings.Contains(srv, " rx_write_requests 100 ") {
		t.Errorf("server counters: %s", srv)
	}
}
