package perftest

import (
	"math"
	"slices"
)

// Time stamps are nanoseconds on the monotonic clock: perftest's cycles
// with a 1000 MHz "CPU", so its formulas apply unchanged.
const (
	cyclesPerSecond = 1e9
	cyclesPerUsec   = 1000.0
	mbFactor        = 0x100000  // MB/s (MiB, as perftest)
	gbFactor        = 125000000 // Gb/s
	latMeasureTail  = 2         // the slowest samples left out (LAT_MEASURE_TAIL)
)

// computeBW is print_report_bw: n messages of size bytes, tposted[i] the
// time message i was posted (for the first of each post list of
// postList), tcompleted[j] the time the completion that covered message j
// arrived (for every cqMod-th j and the last). With noPeak only
// tposted[0] and tcompleted[0] are used: the start and the end of the
// measurement.
func computeBW(size, n int, tposted, tcompleted []int64, noPeak bool, cqMod, postList int, gbits bool) BWReport {
	r := BWReport{Size: uint64(size), Iters: uint64(n)}
	if n == 0 || len(tposted) == 0 || len(tcompleted) == 0 {
		return r
	}
	format := float64(mbFactor)
	if gbits {
		format = gbFactor
	}
	opt := tcompleted[0] - tposted[0]
	if opt <= 0 { // perftest's unsigned cycles: no time stamp yet is "infinitely long"
		opt = math.MaxInt64
	}
	if !noPeak {
		for i := 0; i < n; i += max(postList, 1) {
			for j := roundUp(i+1, cqMod) - 1; j < n; j += cqMod {
				if t := (tcompleted[j] - tposted[i]) / int64(j-i+1); t < opt {
					opt = t
				}
			}
			// The last message was signaled too when n is no multiple of cqMod.
			if n%cqMod != 0 {
				j := n - 1
				if t := (tcompleted[j] - tposted[i]) / int64(j-i+1); t < opt {
					opt = t
				}
			}
		}
	}
	last := n - 1
	if noPeak {
		last = 0
	}
	sum := float64(tcompleted[last] - tposted[0])
	if sum <= 0 {
		return r
	}
	r.BWAvg = float64(size) * float64(n) * cyclesPerSecond / (sum * format)
	r.MsgRate = float64(n) * cyclesPerSecond / (sum * 1e6)
	if !noPeak && opt > 0 && opt < math.MaxInt64 {
		r.BWPeak = float64(size) * cyclesPerSecond / (float64(opt) * format)
	}
	return r
}

func roundUp(v, align int) int {
	if v%align == 0 {
		return v
	}
	return align * (v/align + 1)
}

// computeLat is print_report_lat for a latency test: the samples are the
// times between consecutive posts, divided by rtt (2 for ping-pong tests,
// which measure a round trip; 1 for READ), sorted, with the slowest two
// left out.
func computeLat(size, iters int, tposted []int64, rtt int) LatReport {
	r := LatReport{Size: size, Iters: uint64(iters)}
	measure := iters - 1
	if measure < latMeasureTail+1 || len(tposted) < iters {
		return r
	}
	delta := make([]int64, measure)
	for i := range delta {
		delta[i] = tposted[i+1] - tposted[i]
	}
	r.samples, r.rtt = slices.Clone(delta), rtt
	slices.Sort(delta)
	measure -= latMeasureTail
	q := cyclesPerUsec * float64(rtt)
	var median int64
	if (measure-1)%2 != 0 {
		median = (delta[measure/2] + delta[measure/2-1]) / 2
	} else {
		median = delta[measure/2]
	}
	sum := 0.0
	for _, d := range delta[:measure] {
		sum += float64(d) / q
	}
	avg := sum / float64(measure)
	var varSum float64
	for _, d := range delta[:measure] {
		// perftest squares the difference truncated to an int.
		diff := int(avg - float64(d)/q)
		varSum += float64(int(math.Pow(float64(diff), 2)))
	}
	i99 := int(math.Ceil(float64(measure) * 0.99))
	i999 := int(math.Ceil(float64(measure) * 0.999))
	r.Min = float64(delta[0]) / q
	r.Max = float64(delta[measure]) / q
	r.Typical = float64(median) / q
	r.Avg = avg
	r.Stdev = math.Sqrt(varSum / float64(measure))
	r.P99 = float64(delta[i99]) / q
	r.P999 = float64(delta[i999]) / q
	return r
}

// computeLatDuration is print_report_lat_duration: iters round trips (or
// READs) in a sample of ns nanoseconds.
func computeLatDuration(size, iters int, ns int64, rtt int) LatReport {
	r := LatReport{Size: size, Iters: uint64(iters), Duration: true}
	if iters == 0 || ns <= 0 {
		return r
	}
	r.Avg = float64(ns) / cyclesPerUsec / float64(rtt) / float64(iters)
	r.TPS = float64(iters) / (float64(ns) / cyclesPerSecond)
	return r
}
