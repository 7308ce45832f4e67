package perftest

import (
	"fmt"
	"io"
	"strings"

	"github.com/rnic/rnic"
)

// counterReport is -W (--report-counters): after each result line, the
// change of the named counters since the last line, as perftest prints
// the change of sysfs port counters (counters_print). Names are paths
// below a port's sysfs directory, as for perftest: hw_counters/<name> for
// any of the device's counters (the names of rdma statistic), and
// counters/port_{xmit,rcv}_{packets,data} for the IB port counters (data
// in 4-byte words).
type counterReport struct {
	names []string
	dev   *rnic.Device
	last  []uint64
}

// portCounters are the IB port counters rnic derives from its own: the
// counter, and the unit it counts in.
var portCounters = map[string]struct {
	name string
	unit uint64
}{
	"port_xmit_packets": {"tx_packets", 1},
	"port_rcv_packets":  {"rx_packets", 1},
	"port_xmit_data":    {"tx_bytes", 4},
	"port_rcv_data":     {"rx_bytes", 4},
}

// newCounterReport parses -W's list; an empty list reports nothing.
func newCounterReport(list string) (*counterReport, error) {
	if list == "" {
		return nil, nil
	}
	c := &counterReport{names: strings.Split(list, ",")}
	for _, n := range c.names {
		dir, name, ok := strings.Cut(n, "/")
		_, port := portCounters[name]
		if !ok || !(dir == "hw_counters" && name != "" || dir == "counters" && port) {
			return nil, fmt.Errorf("perftest: -W %q: unable to access performance counter %q (rnic has hw_counters/<rdma statistic name> and counters/port_xmit_data, port_rcv_data, port_xmit_packets, port_rcv_packets)", list, n)
		}
	}
	return c, nil
}

// open takes the counters' first values from dev.
func (c *counterReport) open(dev *rnic.Device) {
	if c == nil {
		return
	}
	c.dev = dev
	c.last = c.read()
}

// check reports a hw_counters name the device does not have.
func (c *counterReport) check() error {
	if c == nil {
		return nil
	}
	for _, n := range c.names {
		if name, ok := strings.CutPrefix(n, "hw_counters/"); ok {
			if _, ok := c.dev.Counter(name); !ok {
				return fmt.Errorf("perftest: -W: unable to access performance counter %q: the device has no counter %q (rnic stat lists them)", n, name)
			}
		}
	}
	return nil
}

// read returns the counters' values.
func (c *counterReport) read() []uint64 {
	v := make([]uint64, len(c.names))
	for i, n := range c.names {
		dir, name, _ := strings.Cut(n, "/")
		if dir == "counters" {
			pc := portCounters[name]
			x, _ := c.dev.Counter(pc.name)
			v[i] = x / pc.unit
		} else {
			v[i], _ = c.dev.Counter(name)
		}
	}
	return v
}

// print prints each counter's change since the last print.
func (c *counterReport) print(w io.Writer) {
	if c == nil || c.dev == nil {
		return
	}
	now := c.read()
	var b strings.Builder
	for i, n := range c.names {
		fmt.Fprintf(&b, "\t%s=%d\n", n, now[i]-c.last[i])
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
	c.last = now
}

// printCounters prints -W's counters after a result line.
func (s *session) printCounters() { s.ctrs.print(s.out) }
