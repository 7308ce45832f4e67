package perf

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/fabric"
)

// TestTimelineChoice: the timeline follows the flow and the port asked
// for. A 4 → 1 incast with DCQCN: by default the rate is the first
// client QP's and the queue the server's switch port's (the deepest
// point is that port's MaxQueueBytes); with TimelineQP 2 the rate is
// another QP's (cut at other times), and with TimelinePort a sender's
// uplink the queue is that uplink's. QPs and ports that are not there
// are refused.
func TestTimelineChoice(t *testing.T) {
	run := func(qp int, port string) (*Result, error) {
		p := mustProfile(t, "cx6")
		p.DCQCN.Enabled = true
		return Run(p, Spec{Test: WriteBW, Size: 65536, Pairs: 4, Incast: true, Iters: 200, Metadata: true,
			TimelineQP: qp, TimelinePort: port})
	}
	deepest := func(r *Result) (q int64, rates []float64) {
		for _, pt := range r.Timeline {
			q = max(q, pt.QueueBytes)
			rates = append(rates, pt.RateGbps)
		}
		return q, rates
	}
	portMax := func(r *Result, name string) int {
		for _, p := range r.Ports {
			if fabric.PortName(p.Node, p.Port) == name {
				return p.Stats.MaxQueueBytes
			}
		}
		t.Fatalf("no port %q in the result", name)
		return 0
	}
	def, err := run(0, "")
	if err != nil {
		t.Fatal(err)
	}
	q0, rates0 := deepest(def)
	if def.QueuePort == "" || q0 != int64(def.QueueMaxBytes) || q0 != int64(portMax(def, def.QueuePort)) {
		t.Errorf("default: timeline of %q peaks at %d B; the server's port's deepest %d B, the port's %d B",
			def.QueuePort, q0, def.QueueMaxBytes, portMax(def, def.QueuePort))
	}
	other, err := run(2, "host 2:0")
	if err != nil {
		t.Fatal(err)
	}
	q2, rates2 := deepest(other)
	if other.QueuePort != "host 2:0" || q2 != int64(portMax(other, "host 2:0")) || q2 == q0 {
		t.Errorf("host 2's uplink: timeline of %q peaks at %d B, the port's deepest %d B (the server's port: %d B)",
			other.QueuePort, q2, portMax(other, "host 2:0"), q0)
	}
	if slices.Equal(rates0, rates2) || slices.Max(rates2) <= 0 {
		t.Errorf("QP 2's rate timeline is QP 0's (or empty): %v", rates2)
	}
	var se *SpecError
	if _, err := run(4, ""); !errors.As(err, &se) || se.Param != "timeline_qp" {
		t.Errorf("QP 4 of 4: %v, want a timeline_qp SpecError", err)
	}
	if _, err := run(0, "leaf0"); !errors.As(err, &se) || se.Param != "timeline_port" {
		t.Errorf("port \"leaf0\": %v, want a timeline_port SpecError", err)
	}
	if _, err := run(0, "leaf0:1"); err == nil || !strings.Contains(err.Error(), "no egress port") {
		t.Errorf("port leaf0:1 on one switch: %v, want refused", err)
	}
}
