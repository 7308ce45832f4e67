// Command benchtable reads `go test -bench` output (scripts/bench.sh runs
// the benchmarks) and prints issue 13's table: each measure with the
// reference measured in the same run beside it, and its aim.
//
//	go test -run '^$' -bench ... | go run ./scripts/benchtable
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// results maps a benchmark's name (without the -GOMAXPROCS suffix) to its
// metrics by unit ("ns/op", "MB/s", "ratio", ...).
type results map[string]map[string]float64

func parse(sc *bufio.Scanner) results {
	r := results{}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := r[name]
		if m == nil {
			m = map[string]float64{}
			r[name] = m
		}
		// f[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
	}
	return r
}

// get returns a metric, and whether the run had it.
func (r results) get(name, unit string) (float64, bool) {
	v, ok := r[name][unit]
	return v, ok
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	r := parse(sc)
	type row struct{ measure, now, aim string }
	var rows []row
	missing := "(not run)"
	ratioRow := func(measure, name, aim string) {
		ratio, ok := r.get(name, "ratio")
		rate, _ := r.get(name, "MB/s")
		ref, _ := r.get(name, "copy_MB/s")
		now := missing
		if ok {
			now = fmt.Sprintf("%.3f (%.0f ÷ %.0f MB/s)", ratio, rate, ref)
		}
		rows = append(rows, row{measure, now, aim})
	}
	ratioRow("in-process WRITE 1 MiB ÷ copy() 1 MiB", "BenchmarkWriteBW/1MiB", "≥ 0.25 (stretch 0.5)")
	ratioRow("in-process WRITE 64 KiB ÷ copy() 64 KiB", "BenchmarkWriteBW/64KiB", "≥ 0.2")
	if ns, ok := r.get("BenchmarkWriteBW/64B", "ns/op"); ok {
		rows = append(rows, row{"in-process 64 B WRITE rate", fmt.Sprintf("%.2f M/s", 1e3/ns), "≥ 5 M/s"})
	} else {
		rows = append(rows, row{"in-process 64 B WRITE rate", missing, "≥ 5 M/s"})
	}
	poll, okp := r.get("BenchmarkWriteLat/poll", "p50_ns")
	wait, okw := r.get("BenchmarkWriteLat/wait", "p50_ns")
	cp, _ := r.get("BenchmarkWriteLat/wait", "copy_ns")
	now := missing
	if okp && okw {
		now = fmt.Sprintf("%.2f / %.2f µs (copy() of 8 B: %.1f ns)", poll/1e3, wait/1e3, cp)
	}
	rows = append(rows, row{"in-process 8 B round trip, Poll / Wait (p50)", now, "< 1 µs / < 1.5 µs"})
	two, ok2 := r.get("BenchmarkWriteBW/1MiB", "MB/s")
	one, ok1 := r.get("BenchmarkEnginePair/offload", "MB/s")
	now = missing
	if ok1 && ok2 {
		now = fmt.Sprintf("%.2f (%.0f ÷ %.0f MB/s)", two/one, two, one)
	}
	rows = append(rows, row{"two engines on two cores ÷ one core (WriteBW/1MiB ÷ EnginePair/offload)", now, "≥ 1.7"})
	udp := func(measure, name, unit, refUnit, aim string, inverse bool) {
		ratio, ok := r.get(name, "ratio")
		v, _ := r.get(name, unit)
		ref, _ := r.get(name, refUnit)
		now := missing
		if ok {
			if inverse {
				now = fmt.Sprintf("%.2f× (%.1f vs %.1f µs)", ratio, v, ref)
			} else {
				now = fmt.Sprintf("%.2f (%.0f ÷ %.0f MB/s)", ratio, v, ref)
			}
		}
		rows = append(rows, row{measure, now, aim})
	}
	udp("loopback UDP write_bw 64 KiB ÷ raw UDP", "BenchmarkLoopbackWriteBW", "MB/s", "raw_MB/s", "≥ 0.9", false)
	udp("loopback UDP write_lat 8 B ÷ raw UDP ping-pong", "BenchmarkLoopbackWriteLat", "t_typical_usec", "raw_usec", "≤ 1.5×", true)
	now = missing
	if v, ok := r.get("BenchmarkEnginePairSmall", "ns/pkt"); ok {
		now = fmt.Sprintf("%.0f ns", v)
	}
	rows = append(rows, row{"engine cost per small packet (EnginePairSmall)", now, "≤ 100 ns"})
	s1, ok1 := r.get("BenchmarkSimSpeed/qps=1/metadata", "Mpkts/s")
	s4k, ok4 := r.get("BenchmarkSimSpeed/qps=4096/metadata", "Mpkts/s")
	now = missing
	if ok1 && ok4 {
		now = fmt.Sprintf("%.2f M pkt/s; 4096 QPs %.2f M", s1, s4k)
	}
	rows = append(rows, row{"simulator, 1 QP 64 B metadata, one core", now, "≥ 2.5 M pkt/s; 4096 QPs ≥ 1.5 M"})
	now = missing
	if v, ok := r.get("BenchmarkQPContextMemory", "qpc_B/QP"); ok {
		now = fmt.Sprintf("%.0f B", v)
		if all, ok := r.get("BenchmarkIdleQPMemory/queues1", "bytes/QP"); ok {
			now += fmt.Sprintf(" (%.0f B with the one-entry rings and the API's handle)", all)
		}
	}
	rows = append(rows, row{"NIC memory per idle QP, context alone (QPContextMemory; IdleQPMemory/queues1)", now, "≤ 512 B"})

	fmt.Println("| measure | now | aim |")
	fmt.Println("| --- | --- | --- |")
	for _, x := range rows {
		fmt.Printf("| %s | %s | %s |\n", x.measure, x.now, x.aim)
	}
}
