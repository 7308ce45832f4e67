package experiment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rnic/rnic/sim/perf"
)

// Kind classifies a column.
type Kind int

const (
	Param  Kind = iota // a parameter of the run
	Metric             // measured in virtual time: deterministic
	Wall               // measured on the wall clock: differs between runs
)

// Column is one field of the results, shared by every writer: the name is
// the CSV header, the JSON key and what --x, --y and --series name.
type Column struct {
	Name string
	Doc  string
	Kind Kind
	// Numeric columns can be plotted; their values are int64, uint64 or float64.
	Numeric bool
	// Prec is the number of decimals a table shows of a float (-1: as
	// many as CSV).
	Prec int
	// get returns the value for a row: string, bool, int64, uint64 or
	// float64, or
	// nil for none (a failed run's metrics, a bandwidth test's latency).
	get func(r *Row) any
}

// Value returns the column's value for a row (nil: none).
func (c *Column) Value(r *Row) any {
	v := c.get(r)
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return nil
	}
	return v
}

// Float returns the value of a numeric column as a float64; ok is false
// when the row has none.
func (c *Column) Float(r *Row) (v float64, ok bool) {
	switch x := c.Value(r).(type) {
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Columns returns the columns of a sweep's rows: the parameters (with one
// column per profile override), the metrics and, if wall is set, the
// wall-clock measurements.
func (s *Sweep) Columns(wall bool) []Column {
	cols := []Column{{Name: "profile", Doc: "hardware profile (built-in name or file)", get: func(r *Row) any { return r.Profile }}}
	for k, set := range s.Sets {
		numeric := true
		for _, v := range set.Values {
			_, err := strconv.ParseFloat(v, 64)
			numeric = numeric && err == nil
		}
		cols = append(cols, Column{Name: set.Key, Doc: "profile parameter " + set.Key, Kind: Param, Numeric: numeric, Prec: -1,
			get: func(r *Row) any { return setValue(r.Sets[k], numeric) }})
	}
	if s.Scenario != nil {
		cols = append(cols, tenantColumns...)
	}
	cols = append(cols, paramColumns...)
	cols = append(cols, metricColumns...)
	cols = append(cols, sideColumns("c_", "first client's NIC", func(r *perf.Result) *perf.NICStats { return &r.Client })...)
	cols = append(cols, sideColumns("s_", "first server's NIC", func(r *perf.Result) *perf.NICStats { return &r.Server })...)
	cols = append(cols, Column{Name: "error", Doc: "why the run failed (empty: it did not)",
		get: func(r *Row) any {
			if r.Err != nil {
				return r.Err.Error()
			}
			return ""
		}})
	if wall {
		cols = append(cols, wallColumns...)
	}
	return cols
}

// setValue is a profile override's value in its column: a number if every
// value of the override is one.
func setValue(v string, numeric bool) any {
	if !numeric {
		return v
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

// Find returns the column called name.
func Find(cols []Column, name string) (*Column, error) {
	for i := range cols {
		if cols[i].Name == name {
			return &cols[i], nil
		}
	}
	names := make([]string, len(cols))
	for i := range cols {
		names[i] = cols[i].Name
	}
	return nil, fmt.Errorf("no column %q (columns: %v)", name, names)
}

func param(name, doc string, get func(s *perf.Spec) any) Column {
	_, isBool := get(&perf.Spec{}).(bool)
	_, isString := get(&perf.Spec{}).(string)
	return Column{Name: name, Doc: doc, Kind: Param, Numeric: !isBool && !isString,
		get: func(r *Row) any { return get(r.spec()) }}
}

// paramColumns are the parameters of perf.Spec, as run.
var paramColumns = []Column{
	param("test", "workload", func(s *perf.Spec) any { return s.Test.String() }),
	param("size", "message size, bytes", func(s *perf.Spec) any { return int64(s.Size) }),
	param("qps", "QPs per client", func(s *perf.Spec) any { return int64(s.QPs) }),
	param("pairs", "client hosts", func(s *perf.Spec) any { return int64(s.Pairs) }),
	param("incast", "all clients send to one server", func(s *perf.Spec) any { return s.Incast }),
	param("hosts", "hosts on the switch", func(s *perf.Spec) any {
		if s.Incast {
			return int64(s.Pairs + 1)
		}
		return int64(2 * s.Pairs)
	}),
	param("iters", "operations per QP", func(s *perf.Spec) any { return int64(s.Iters) }),
	param("warmup", "operations per QP not measured", func(s *perf.Spec) any { return int64(s.Warmup) }),
	param("tx_depth", "operations outstanding per QP", func(s *perf.Spec) any { return int64(s.TxDepth) }),
	param("post_list", "send work requests per post, one doorbell each", func(s *perf.Spec) any { return int64(s.PostList) }),
	param("rx_depth", "receives a SEND server keeps posted", func(s *perf.Spec) any { return int64(s.RxDepth) }),
	param("tclass", "IP traffic class of the QPs (DSCP << 2); priority DSCP/8", func(s *perf.Spec) any { return int64(s.TrafficClass) }),
	param("footprint", "registered bytes per QP", func(s *perf.Spec) any { return int64(s.Footprint) }),
	param("page_size", "MTT page size, bytes", func(s *perf.Spec) any { return int64(s.PageSize) }),
	param("random", "offsets drawn uniformly from the footprint (else in order)", func(s *perf.Spec) any { return s.Random }),
	param("mr_per_qp", "one memory region per QP (perftest's --mr_per_qp)", func(s *perf.Spec) any { return s.MRPerQP }),
	param("threads", "application threads per host", func(s *perf.Spec) any { return int64(s.Threads) }),
	param("cq_mod", "one signaled completion every this many operations", func(s *perf.Spec) any { return int64(s.CQMod) }),
	param("inline", "largest inline payload, bytes", func(s *perf.Spec) any { return int64(max(s.Inline, 0)) }),
	param("metadata", "payload bytes not moved", func(s *perf.Spec) any { return s.Metadata }),
	param("mr_churn_ns", "MR re-registration interval, ns (0: none)", func(s *perf.Spec) any { return int64(s.MRChurn) }),
	param("recv_every_ns", "send_bw server's receive posting interval per QP, ns (0: one per completion)", func(s *perf.Spec) any { return int64(s.RecvEvery) }),
	param("atomic_type", "atomic_bw's operation (FETCH_AND_ADD, CMP_AND_SWAP)", func(s *perf.Spec) any { return s.AtomicType }),
	param("atomic_target", "atomic_bw's addresses: spread, one per QP (qp) or one shared", func(s *perf.Spec) any { return s.AtomicTarget }),
	param("seed", "random seed", func(s *perf.Spec) any { return s.Seed }),
}

// tenantColumns are a scenario's tenant parameters.
var tenantColumns = []Column{
	tenantParam("tenant", "the scenario's tenant", false, func(t *perf.Tenant) any { return t.Name }),
	tenantParam("clients", "hosts of the tenant's clients", false, func(t *perf.Tenant) any { return hostList(t.Clients) }),
	tenantParam("servers", "hosts of the tenant's servers", false, func(t *perf.Tenant) any { return hostList(t.Servers) }),
	tenantParam("start_ns", "when the tenant's threads began, ns", true, func(t *perf.Tenant) any { return int64(t.Start) }),
	tenantParam("stop_ns", "when the tenant's clients stopped posting, ns (0: never)", true, func(t *perf.Tenant) any { return int64(t.Stop) }),
	tenantParam("rate", "operations per second each QP posted (0: tx_depth outstanding)", true, func(t *perf.Tenant) any { return t.Rate }),
	tenantParam("sl", "service level of the tenant's QPs", true, func(t *perf.Tenant) any { return int64(t.SL) }),
}

func tenantParam(name, doc string, numeric bool, get func(t *perf.Tenant) any) Column {
	return Column{Name: name, Doc: doc, Kind: Param, Numeric: numeric, Prec: -1,
		get: func(r *Row) any {
			if r.Tenant == nil {
				return nil
			}
			return get(r.Tenant)
		}}
}

// hostList writes host numbers as a column value ("0 1 2").
func hostList(hosts []int) string {
	s := make([]string, len(hosts))
	for i, h := range hosts {
		s[i] = strconv.Itoa(h)
	}
	return strings.Join(s, " ")
}

// metric is a column of perf.Result; a failed run has no value.
func metric(name, doc string, prec int, get func(r *perf.Result) any) Column {
	return Column{Name: name, Doc: doc, Kind: Metric, Numeric: true, Prec: prec,
		get: func(r *Row) any {
			if r.Result == nil {
				return nil
			}
			return get(r.Result)
		}}
}

// latency is a metric of latency tests only.
func latency(name, doc string, get func(r *perf.Result) any) Column {
	return metric(name, doc, 0, func(r *perf.Result) any {
		if r.Lat == nil || r.Lat.Count() == 0 {
			return nil
		}
		return get(r)
	})
}

func quantile(q float64) func(r *perf.Result) any {
	return func(r *perf.Result) any { return r.Lat.Quantile(q) }
}

var metricColumns = []Column{
	metric("gbps", "throughput, Gb/s (payload)", 2, func(r *perf.Result) any { return r.Gbps }),
	metric("mops", "operations per second, millions", 3, func(r *perf.Result) any { return r.Mops }),
	metric("ops", "operations measured", 0, func(r *perf.Result) any { return int64(r.Ops) }),
	metric("elapsed_ns", "measured window, virtual ns", 0, func(r *perf.Result) any { return int64(r.Elapsed) }),
	latency("lat_min_ns", "latency minimum, ns", func(r *perf.Result) any { return int64(r.LatMin) }),
	latency("lat_avg_ns", "latency mean, ns", func(r *perf.Result) any { return r.LatAvg }),
	latency("lat_p50_ns", "latency median, ns (upper bound, within 1%)", quantile(0.5)),
	latency("lat_p99_ns", "latency 99th percentile, ns (within 1%)", quantile(0.99)),
	latency("lat_p999_ns", "latency 99.9th percentile, ns (within 1%)", quantile(0.999)),
	latency("lat_max_ns", "latency maximum, ns", quantile(1)),
	metric("wc_errors", "failed work completions", 0, func(r *perf.Result) any { return int64(r.Errors) }),
	metric("events", "simulator events", 0, func(r *perf.Result) any { return int64(r.Events) }),
	metric("wire_drops", "frames dropped by the fabric (full queues at the switch and the hosts' uplinks)", 0, func(r *perf.Result) any { return int64(r.WireDrop) }),
	metric("jain", "Jain's fairness index of the client QPs' rates (bytes over the time to each QP's last completion; 1: fair)", 3, func(r *perf.Result) any {
		if r.Jain == 0 {
			return nil
		}
		return r.Jain
	}),
	metric("queue_max_bytes", "deepest queue of the switch port towards the first server, bytes", 0, func(r *perf.Result) any { return int64(r.QueueMaxBytes) }),
	metric("ecn_marked", "frames the fabric marked Congestion Experienced", 0, func(r *perf.Result) any { return int64(r.ECNMarked) }),
	metric("pfc_pauses", "PFC pause frames the switches sent", 0, func(r *perf.Result) any { return int64(r.PFCPauses) }),
	metric("pfc_paused_us", "time the hosts' uplinks were paused by PFC, summed over hosts, µs", 1, func(r *perf.Result) any { return float64(r.PFCPaused) / 1e3 }),
	metric("uplink_queue_max_bytes", "deepest host uplink queue (what a NIC handed to its port ahead of the wire), bytes", 0, func(r *perf.Result) any { return int64(r.UplinkQueueMaxBytes) }),
	metric("headroom_drops", "lossless frames dropped because PFC headroom ran out", 0, func(r *perf.Result) any { return int64(r.HeadroomDrops) }),
	metric("retrans", "packets sent again by all NICs (go-back-N, READ resumes)", 0, func(r *perf.Result) any { return int64(r.Retrans) }),
	metric("timeouts", "retransmission timeouts on all NICs", 0, func(r *perf.Result) any { return int64(r.Timeouts) }),
}

// rate is hits/(hits+misses), or none without accesses.
func rate(hits, misses float64) any {
	if hits+misses == 0 {
		return nil
	}
	return hits / (hits + misses)
}

// sideColumns are one NIC's pipeline statistics.
func sideColumns(prefix, who string, side func(r *perf.Result) *perf.NICStats) []Column {
	c := func(name, doc string, prec int, get func(s *perf.NICStats) any) Column {
		return metric(prefix+name, who+": "+doc, prec, func(r *perf.Result) any { return get(side(r)) })
	}
	return []Column{
		c("qpc_hit", "QPC cache hit rate", 4, func(s *perf.NICStats) any { return rate(s.QPCHit, s.QPCMiss) }),
		c("mpt_hit", "MPT cache hit rate", 4, func(s *perf.NICStats) any { return rate(s.MPTHit, s.MPTMiss) }),
		c("mtt_hit", "MTT cache hit rate", 4, func(s *perf.NICStats) any { return rate(s.MTTHit, s.MTTMiss) }),
		c("pcie_to_host_bytes", "PCIe bytes to host memory (TLP layer)", 0, func(s *perf.NICStats) any { return int64(s.PCIeToHostBytes) }),
		c("pcie_to_dev_bytes", "PCIe bytes to the NIC (TLP layer)", 0, func(s *perf.NICStats) any { return int64(s.PCIeToDeviceBytes) }),
		c("pcie_util_to_host", "PCIe utilisation towards the host", 3, func(s *perf.NICStats) any { return s.PCIeUtilToHost }),
		c("pcie_util_to_dev", "PCIe utilisation towards the NIC", 3, func(s *perf.NICStats) any { return s.PCIeUtilToDevice }),
		c("net_bytes", "network bytes sent and received", 0, func(s *perf.NICStats) any { return s.NetBytesTx + s.NetBytesRx }),
		c("pcie_per_net_byte", "PCIe bytes (both directions) per network byte", 3, func(s *perf.NICStats) any {
			if s.NetBytesTx+s.NetBytesRx == 0 {
				return nil
			}
			return float64(s.PCIeToHostBytes+s.PCIeToDeviceBytes) / float64(s.NetBytesTx+s.NetBytesRx)
		}),
		c("unit_util", "processing-unit utilisation", 3, func(s *perf.NICStats) any { return s.UnitUtil }),
		c("dma_util", "DMA engine utilisation", 3, func(s *perf.NICStats) any { return s.DMAUtil }),
		c("miss_stall_ns", "time stalled on cache misses, ns", 0, func(s *perf.NICStats) any { return int64(s.MissStallNs) }),
		c("miss_parked_ns", "time steps waited parked for their reads while the units served others, ns", 0, func(s *perf.NICStats) any { return int64(s.MissParkedNs) }),
		c("merged_misses", "steps that found their context or translation still being read for another step, and waited for that read", 0, func(s *perf.NICStats) any { return int64(s.MergedMisses) }),
		c("miss_table_wait_ns", "time misses waited for a free entry of their cache's miss table, ns", 0, func(s *perf.NICStats) any { return int64(s.MissTableWaitNs) }),
		c("wqe_fetched", "WQEs read by DMA", 0, func(s *perf.NICStats) any { return int64(s.WQEFetched) }),
		c("wqe_by_mmio", "WQEs written with the doorbell", 0, func(s *perf.NICStats) any { return int64(s.WQEByMMIO) }),
		c("wqe_prefetched", "WQEs read ahead at their doorbell", 0, func(s *perf.NICStats) any { return int64(s.WQEPrefetched) }),
		c("atomic_lock_wait_ns", "time atomics waited for their lock (an atomic ahead on the same address or bucket), ns", 0, func(s *perf.NICStats) any { return int64(s.AtomicLockWaitNs) }),
		c("atomic_unit_wait_ns", "time atomics waited for a free atomic unit, ns", 0, func(s *perf.NICStats) any { return int64(s.AtomicUnitWaitNs) }),
		c("rx_drops", "received frames dropped", 0, func(s *perf.NICStats) any { return int64(s.RxDrops) }),
		c("rnr_nak_sent", "RNR NAKs sent (a SEND found no receive posted)", 0, func(s *perf.NICStats) any { return int64(s.Counters["rnr_nak_sent"]) }),
		c("rnr_nak_received", "RNR NAKs received (the SEND was sent again after the RNR timer)", 0, func(s *perf.NICStats) any { return int64(s.Counters["rnr_nak_retry_err"]) }),
		c("np_ecn_marked", "RoCE packets received marked Congestion Experienced (dcqcn)", 0, func(s *perf.NICStats) any { return int64(s.Counters["np_ecn_marked_roce_packets"]) }),
		c("np_cnp_sent", "congestion notification packets sent (dcqcn)", 0, func(s *perf.NICStats) any { return int64(s.Counters["np_cnp_sent"]) }),
		c("rp_cnp_handled", "congestion notification packets that cut a QP's rate (dcqcn)", 0, func(s *perf.NICStats) any { return int64(s.Counters["rp_cnp_handled"]) }),
	}
}

// wallColumns say how fast the simulator ran.
var wallColumns = []Column{
	{Name: "wall_s", Doc: "wall-clock seconds of the run", Kind: Wall, Numeric: true, Prec: 3,
		get: func(r *Row) any { return r.Wall.Seconds() }},
	{Name: "events_per_wall_s", Doc: "simulator events per wall-clock second", Kind: Wall, Numeric: true, Prec: 0,
		get: func(r *Row) any {
			if r.Result == nil {
				return nil
			}
			return float64(r.Result.Events) / r.Wall.Seconds()
		}},
	{Name: "pkts_per_wall_s", Doc: "simulated packets per wall-clock second (every frame of every NIC)", Kind: Wall, Numeric: true, Prec: 0,
		get: func(r *Row) any {
			if r.Result == nil {
				return nil
			}
			return float64(r.Result.Packets) / r.Wall.Seconds()
		}},
}
