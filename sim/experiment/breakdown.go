package experiment

import (
	"fmt"
	"io"
	"strings"

	"github.com/rnic/rnic/sim/perf"
)

// BreakdownSize is the message size of a breakdown when the sweep names
// none: a small WRITE, sent inline.
const BreakdownSize = 8

// WriteBreakdowns writes the latency breakdown of one RDMA WRITE
// (perf.Breakdown: from the client's post until the server's CPU sees the
// data) for each profile of the sweep, with each of its overrides, and
// each of its sizes.
func WriteBreakdowns(w io.Writer, sw *Sweep) error {
	points, err := sw.Points()
	if err != nil {
		return err
	}
	profs, err := sw.LoadProfiles(points)
	if err != nil {
		return err
	}
	sizes := sw.Sizes
	if len(sizes) == 0 {
		sizes = []int{BreakdownSize}
	}
	seen := map[string]bool{}
	first := true
	for i, p := range points {
		name := p.Profile
		for _, o := range sw.overrides(p) {
			name += " " + o.String()
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, size := range sizes {
			stages, err := perf.Breakdown(profs[i], size)
			if err != nil {
				return fmt.Errorf("breakdown on %s: %w", name, err)
			}
			if !first {
				fmt.Fprintln(w)
			}
			first = false
			fmt.Fprintf(w, "%s: one %d-byte RDMA WRITE, from the client's post through the data landing in the server's memory, the ACK and the client's completion\n", strings.TrimSpace(name), size)
			perf.WriteBreakdown(w, stages)
		}
	}
	return nil
}
