package fabric

import (
	"strings"
	"testing"

	"github.com/rnic/rnic/sim"
)

// TestWatchPort: a watched egress port, a switch's or a host's uplink,
// named as Ports names it, reports its queue's depth at every change, in
// time order, on an analytic port and on scheduled ones: the deepest
// report is the port's MaxQueueBytes, and a scheduled port's last report
// is its emptying. A name that is no port is refused, naming some.
func TestWatchPort(t *testing.T) {
	lossless := pfcConfig()
	prio := cfg100G(100)
	prio.Switch.PriorityQueues = true
	for _, c := range []struct {
		name      string
		cfg       Config
		scheduled bool
	}{{"analytic", cfg100G(100), false}, {"priority queues", prio, true}, {"PFC", lossless, true}} {
		t.Run(c.name, func(t *testing.T) {
			s, f, ports, _ := build(t, 3, c.cfg, 5)
			var down string
			for _, p := range f.Ports() {
				if p.Peer == "host 0" {
					down = PortName(p.Node, p.Port)
				}
			}
			type sample struct {
				at    sim.Time
				bytes int
			}
			watched := map[string]*[]sample{down: new([]sample), "host 1:0": new([]sample)}
			for name, got := range watched {
				if err := f.WatchPort(name, func(at sim.Time, b int) { *got = append(*got, sample{at, b}) }); err != nil {
					t.Fatal(err)
				}
			}
			for i := 1; i < len(ports); i++ {
				for j := range 40 {
					ports[i].SendFrame(Frame{Len: 1000, Dst: 0, Prio: 3, Meta: Meta{PSN: uint32(j)}})
				}
			}
			s.Run()
			for _, p := range f.Ports() {
				got := watched[PortName(p.Node, p.Port)]
				if got == nil {
					continue
				}
				deepest := 0
				for k, x := range *got {
					if k > 0 && x.at < (*got)[k-1].at {
						t.Fatalf("%s:%d: report %d at %d after one at %d", p.Node, p.Port, k, x.at, (*got)[k-1].at)
					}
					deepest = max(deepest, x.bytes)
				}
				if deepest == 0 || deepest != p.Stats.MaxQueueBytes {
					t.Errorf("%s:%d: %d reports, the deepest %d bytes, MaxQueueBytes %d", p.Node, p.Port, len(*got), deepest, p.Stats.MaxQueueBytes)
				}
				if last := (*got)[len(*got)-1]; c.scheduled && p.Node != "host 1" && last.bytes != 0 {
					t.Errorf("%s:%d: the last report is %d bytes, not the emptied queue", p.Node, p.Port, last.bytes)
				}
			}
		})
	}
	_, f, _, _ := build(t, 3, cfg100G(100), 2)
	err := f.WatchPort("leaf9:1", func(sim.Time, int) {})
	if err == nil || !strings.Contains(err.Error(), `"leaf9:1"`) || !strings.Contains(err.Error(), "switch:0") {
		t.Errorf("watching no port: %v", err)
	}
}
