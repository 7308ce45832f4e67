package perftest

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/rnic/rnic"
)

// The fixed lines of perftest's output (perftest_parameters.h).
const (
	resultLine   = "---------------------------------------------------------------------------------------\n"
	resultFmt    = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	resultFmtG   = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
	resultFmtLat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	resultFmtDur = " #bytes        #iterations       t_avg[usec]    tps average\n"
	waitBanner   = "\n************************************\n* Waiting for client to connect... *\n************************************\n"
)

// cHex formats v as C's printf("%#0<width>x") does: "0x" and at least
// width-2 digits, except that 0 is printed as width zeros without "0x".
func cHex(v uint64, width int) string {
	if v == 0 {
		return strings.Repeat("0", width)
	}
	return fmt.Sprintf("0x%0*x", max(width-2, 0), v)
}

// printTestInfo prints the block perftest prints before the exchange of
// QP information (ctx_print_test_info), for a device named dev.
func printTestInfo(w io.Writer, p *params, dev string) {
	t, verb := p.Test, p.Test.Verb()
	title := verb.String() + " "
	if verb == VerbAtomic {
		title += p.Atomic.String() + " "
	}
	if t.Kind() == BW {
		if p.Duplex {
			title += "Bidirectional "
		}
		if p.postList > 1 {
			title += "Post List "
		}
		title += "BW "
	} else {
		title += "Latency "
	}
	title += "Test"
	var b strings.Builder
	b.WriteString(resultLine)
	fmt.Fprintf(&b, "                    %s\n", title)
	if p.Events {
		fmt.Fprintf(&b, " Test with events. Using %s_comp0\n", dev)
	}
	fmt.Fprintf(&b, " Dual-port       : OFF\t\tDevice         : %s\n", dev)
	fmt.Fprintf(&b, " Number of qps   : %d\t\tTransport type : IB\n", p.QPs)
	fmt.Fprintf(&b, " Connection type : %s\t\tUsing SRQ      : OFF\n", p.Conn)
	// perftest turns PCIe relaxed ordering off for write_lat, which polls
	// the buffer for the peer's last byte.
	fmt.Fprintf(&b, " PCIe relax order: %s\n", onOff(t != WriteLat))
	b.WriteString(" ibv_wr* API     : OFF\n")
	if p.client || p.Duplex {
		fmt.Fprintf(&b, " TX depth        : %d\n", p.txDepth)
	}
	if p.postList > 1 {
		fmt.Fprintf(&b, " Post List       : %d\n", p.postList)
	}
	if verb == VerbSend && (!p.client || p.Duplex) {
		fmt.Fprintf(&b, " RX depth        : %d\n", p.rxDepth)
	}
	if t.Kind() == BW {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", p.cqMod)
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", p.mtu.Bytes())
	b.WriteString(" Link type       : Ethernet\n")
	fmt.Fprintf(&b, " GID index       : %d\n", p.gidIndex)
	if verb != VerbRead && verb != VerbAtomic {
		fmt.Fprintf(&b, " Max inline data : %d[B]\n", p.inline)
	} else {
		fmt.Fprintf(&b, " Outstand reads  : %d\n", p.outReads)
	}
	b.WriteString(" rdma_cm QPs\t : OFF\n")
	b.WriteString(" Data ex. method : Ethernet\n")
	b.WriteString(resultLine)
	io.WriteString(w, b.String())
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// printDest prints one side's QP information (ctx_print_pingpong_data):
// side is "local" or "remote".
func printDest(w io.Writer, verb Verb, side string, d Dest) {
	var b strings.Builder
	fmt.Fprintf(&b, " %s address: LID %s QPN %s PSN %s", side, cHex(uint64(d.LID), 4), cHex(uint64(d.QPN), 6), cHex(uint64(d.PSN), 6))
	if verb == VerbRead {
		fmt.Fprintf(&b, " OUT %s", cHex(uint64(d.OutReads), 4))
	}
	if verb == VerbRead || verb == VerbWrite {
		fmt.Fprintf(&b, " RKey %s VAddr %s", cHex(uint64(d.RKey), 8), cHex(d.VAddr, 16))
	}
	b.WriteString("\n GID: ")
	for i, g := range d.GID {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02d", g)
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// bwTableHeader returns the bandwidth table's header line.
func bwTableHeader(gbits bool) string {
	if gbits {
		return resultFmtG
	}
	return resultFmt
}

// formatBW formats one bandwidth result line (REPORT_FMT, or
// REPORT_FMT_EXT with six decimals when an average in Gb/s is below 0.1).
func formatBW(r BWReport, gbits bool) string {
	if gbits && r.BWAvg < 0.1 {
		return fmt.Sprintf(" %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n", r.Size, r.Iters, r.BWPeak, r.BWAvg, r.MsgRate)
	}
	return fmt.Sprintf(" %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n", r.Size, r.Iters, r.BWPeak, r.BWAvg, r.MsgRate)
}

// withCPU ends a result line with the CPU utilization (REPORT_EXT_CPU_UTIL).
func withCPU(line string, cpu float64) string {
	return strings.TrimSuffix(line, "\n") + fmt.Sprintf("\t    %-3.2f\n", cpu)
}

// withCPUHeader ends a table header with the CPU column (RESULT_EXT_CPU_UTIL).
func withCPUHeader(h string) string {
	return strings.TrimSuffix(h, "\n") + "    CPU_Util[%]\n"
}

// latSamples prints a latency run's samples as print_report_lat does:
// with -U every sample in the order measured, with -H the samples
// sorted, the slowest two left out; each as "n, microseconds" under a
// "#, usec" line, the value as C's %g prints it.
func latSamples(r LatReport, unsorted, histogram bool) string {
	var b strings.Builder
	q := cyclesPerUsec * float64(r.rtt)
	if unsorted {
		b.WriteString("#, usec\n")
		for i, d := range r.samples {
			fmt.Fprintf(&b, "%d, %s\n", i+1, cG(float64(d)/q))
		}
	}
	if histogram {
		sorted := slices.Clone(r.samples)
		slices.Sort(sorted)
		b.WriteString("#, usec\n")
		for i, d := range sorted[:max(len(sorted)-latMeasureTail, 0)] {
			fmt.Fprintf(&b, "%d, %s\n", i+1, cG(float64(d)/q))
		}
	}
	return b.String()
}

// cG formats v as C's printf("%g"): six significant digits, no trailing
// zeros, an exponent below 1e-4 and from 1e6.
func cG(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// LatReport is a latency result in microseconds (print_report_lat).
type LatReport struct {
	Size    int
	Iters   uint64
	Min     float64
	Max     float64
	Typical float64 // median
	Avg     float64
	Stdev   float64
	P99     float64
	P999    float64
	// Duration-mode results (-D): the average and transactions per second.
	Duration bool
	TPS      float64

	samples []int64 // the times between posts, ns, in the order measured (-H, -U)
	rtt     int     // 2 for a ping-pong, 1 for READ and atomics
}

// latTableHeader returns the latency table's header line.
func latTableHeader(duration bool) string {
	if duration {
		return resultFmtDur
	}
	return resultFmtLat
}

// formatLat formats one latency result line (REPORT_FMT_LAT, or
// REPORT_FMT_LAT_DUR in duration mode).
func formatLat(r LatReport) string {
	if r.Duration {
		return fmt.Sprintf(" %-7d       %d            %-7.2f        %-7.2f\n", r.Size, r.Iters, r.Avg, r.TPS)
	}
	return fmt.Sprintf(" %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
		r.Size, r.Iters, r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999)
}

// ParseConn parses -c's argument: RC, UC or UD.
func ParseConn(s string) (rnic.QPType, error) {
	switch s {
	case "RC":
		return rnic.RC, nil
	case "UC":
		return rnic.UC, nil
	case "UD":
		return rnic.UD, nil
	}
	return 0, fmt.Errorf("perftest: connection type %q not supported (want RC, UC or UD)", s)
}

// ParseSize parses -s's argument as perftest does: a number (decimal,
// 0x hex or 0 octal) with an optional K or M suffix.
func ParseSize(s string) (int, error) {
	factor := 1
	switch {
	case strings.HasSuffix(s, "K"):
		factor, s = 1024, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		factor, s = 1024*1024, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil || n < 1 || n*int64(factor) > 1<<31-1 {
		return 0, fmt.Errorf("perftest: message size %q should be between 1 and %d", s, 1<<31-1)
	}
	return int(n) * factor, nil
}
