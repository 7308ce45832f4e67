package perftest

import (
	"fmt"
	"os"
	"strings"
)

// The --out_json report is perftest's: the file is written again at each
// result line, holding the test's information and that result, with
// perftest's keys. perftest 4.5 wrote the keys unquoted, which no JSON
// parser reads; this is the later perftest's form of the same keys, which
// is JSON.

// jsonTestInfo returns the "test_info" object (write_test_info_to_file).
func jsonTestInfo(p *params, dev string) string {
	t, verb := p.Test, p.Test.Verb()
	var b strings.Builder
	b.WriteString("\"test_info\": {\n")
	fmt.Fprintf(&b, "\"test\": \"%s_", verb)
	if verb == VerbAtomic {
		fmt.Fprintf(&b, "%s_", p.Atomic)
	}
	if t.Kind() == BW {
		if p.Duplex {
			b.WriteString("Bidirectional_")
		}
		if p.postList > 1 {
			b.WriteString("Post_List_")
		}
		b.WriteString("BW_")
	} else {
		b.WriteString("Latency_")
	}
	b.WriteString("Test\",\n")
	if p.Events {
		fmt.Fprintf(&b, "\"Test with events\": \"Using_%s_comp0\",\n", dev)
	}
	fmt.Fprintf(&b, "\"Dual_port\": \"OFF\",\n\"Device\": %q,\n", dev)
	fmt.Fprintf(&b, "\"Number_of_qps\": %d,\n\"Transport_type\": \"IB\",\n", p.QPs)
	fmt.Fprintf(&b, "\"Connection_type\": \"%s\",\n\"Using_SRQ\": \"OFF\",\n", p.Conn)
	fmt.Fprintf(&b, "\"PCIe_relax_order\": \"%s\",\n", onOff(t != WriteLat))
	b.WriteString("\"ibv_wr_API\": \"OFF\",\n")
	if p.client || p.Duplex {
		fmt.Fprintf(&b, "\"TX_depth\": %d,\n", p.txDepth)
	}
	if p.postList > 1 {
		fmt.Fprintf(&b, "\"Post_List\": %d,\n", p.postList)
	}
	if verb == VerbSend && (!p.client || p.Duplex) {
		fmt.Fprintf(&b, "\"RX_depth\": %d,\n", p.rxDepth)
	}
	if t.Kind() == BW {
		fmt.Fprintf(&b, "\"CQ_Moderation\": %d,\n", p.cqMod)
	}
	fmt.Fprintf(&b, "\"Mtu\": %d,\n\"Link_type\": \"Ethernet\",\n", p.mtu.Bytes())
	fmt.Fprintf(&b, "\"GID_index\": %d,\n", p.gidIndex)
	if verb != VerbRead && verb != VerbAtomic {
		fmt.Fprintf(&b, "\"Max_inline_data\": %d,\n", p.inline)
	} else {
		fmt.Fprintf(&b, "\"Outstand_reads\": %d,\n", p.outReads)
	}
	b.WriteString("\"rdma_cm_QPs\": \"OFF\",\n")
	b.WriteString("\"Data_ex_method\": \"Ethernet\"\n},\n")
	return b.String()
}

// jsonCPU ends a "results" object: with the CPU utilization under
// --cpu_util (REPORT_EXT_CPU_UTIL_JSON).
func jsonCPU(p *params, cpu float64) string {
	if p.cpuUtil {
		return fmt.Sprintf(",\n\"CPU_util\": %.2f\n", cpu)
	}
	return "\n"
}

// jsonBW returns the "results" object of a bandwidth line
// (write_bw_report_to_file), six decimals where the line has them.
func jsonBW(r BWReport, p *params, cpu float64) string {
	f := "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"BW_peak\": %.2f,\n\"BW_average\": %.2f,\n\"MsgRate\": %.6f"
	if p.ReportGbits && r.BWAvg < 0.1 {
		f = "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"BW_peak\": %.6f,\n\"BW_average\": %.6f,\n\"MsgRate\": %.6f"
	}
	return "\"results\": {\n" + fmt.Sprintf(f, r.Size, r.Iters, r.BWPeak, r.BWAvg, r.MsgRate) + jsonCPU(p, cpu) + "}\n"
}

// jsonLat returns the "results" object of a latency line
// (write_report_lat_to_file, write_report_lat_duration_to_file).
func jsonLat(r LatReport, p *params, cpu float64) string {
	var s string
	if r.Duration {
		s = fmt.Sprintf("\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"t_avg\": %.2f,\n\"tps_average\": %.2f", r.Size, r.Iters, r.Avg, r.TPS)
	} else {
		s = fmt.Sprintf("\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"t_min\": %.2f,\n\"t_max\": %.2f,\n\"t_typical\": %.2f,\n\"t_avg\": %.2f,\n\"t_stdev\": %.2f,\n\"percentile_99\": %.2f,\n\"percentile_99.9\": %.2f",
			r.Size, r.Iters, r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999)
	}
	return "\"results\": {\n" + s + jsonCPU(p, cpu) + "}\n"
}

// writeJSON writes the --out_json file for one result, replacing what it
// held, as perftest does for every line.
func (s *session) writeJSON(results string) {
	if !s.p.OutJSON {
		return
	}
	name := s.p.OutJSONFile
	if name == "" {
		name = defJSONFile
	}
	doc := "{\n" + jsonTestInfo(s.p, s.dev.Name()) + results + "}\n"
	if err := os.WriteFile(name, []byte(doc), 0o600); err != nil && s.errw != nil {
		fmt.Fprintf(s.errw, "failed to open %s: %v\n", name, err)
	}
}
