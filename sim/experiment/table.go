package experiment

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable writes the rows as a table aligned in columns: numbers to the
// right, text to the left, "-" for no value.
func WriteTable(w io.Writer, cols []Column, rows []Row) error {
	cells := make([][]string, len(rows)+1)
	width := make([]int, len(cols))
	cells[0] = make([]string, len(cols))
	for i := range cols {
		cells[0][i] = cols[i].Name
		width[i] = len(cols[i].Name)
	}
	for r := range rows {
		cells[r+1] = make([]string, len(cols))
		for i := range cols {
			s := cell(&cols[i], cols[i].Value(&rows[r]))
			cells[r+1][i] = s
			width[i] = max(width[i], len(s))
		}
	}
	var b strings.Builder
	for _, line := range cells {
		b.Reset()
		for i, s := range line {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(s))
			if cols[i].Numeric {
				b.WriteString(pad + s)
			} else if i < len(line)-1 {
				b.WriteString(s + pad)
			} else {
				b.WriteString(s)
			}
		}
		b.WriteString("\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// Select returns the columns called names, in that order; "all" stands
// for every column.
func Select(cols []Column, names []string) ([]Column, error) {
	var out []Column
	for _, n := range names {
		if n == "all" {
			out = append(out, cols...)
			continue
		}
		c, err := Find(cols, n)
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	return out, nil
}

// TableColumns picks the columns worth a glance: the test, the
// parameters that vary, throughput, latency if a test measured it, the
// cache hit rates and PCIe cost, and drops, retransmissions, errors and
// wall time if there are any.
func (s *Sweep) TableColumns(cols []Column, rows []Row) []Column {
	vary := s.varying()
	vary["test"] = true
	if s.Scenario != nil {
		vary["tenant"], vary["size"], vary["qps"] = true, true, true
	}
	var names []string
	for _, c := range cols {
		if c.Kind == Param && vary[c.Name] {
			names = append(names, c.Name)
		}
	}
	names = append(names, "gbps", "mops")
	if hasValue(cols, rows, "lat_avg_ns") {
		names = append(names, "lat_avg_ns", "lat_p50_ns", "lat_p99_ns", "lat_p999_ns")
	}
	names = append(names, "c_qpc_hit", "s_qpc_hit", "s_mtt_hit", "c_pcie_per_net_byte", "s_pcie_per_net_byte")
	for _, n := range []string{"wire_drops", "retrans", "timeouts", "wc_errors", "s_rnr_nak_sent"} {
		if hasValue(cols, rows, n) { // what losses cost, when there were any
			names = append(names, n)
		}
	}
	if hasValue(cols, rows, "error") {
		names = append(names, "error")
	}
	if _, err := Find(cols, "wall_s"); err == nil {
		names = append(names, "wall_s")
	}
	out, err := Select(cols, names)
	if err != nil {
		panic(fmt.Sprintf("experiment: table columns: %v", err))
	}
	return out
}

// hasValue reports whether some row has a value other than none, 0 or "" in
// the column called name.
func hasValue(cols []Column, rows []Row, name string) bool {
	c, err := Find(cols, name)
	if err != nil {
		return false
	}
	for r := range rows {
		switch v := c.Value(&rows[r]).(type) {
		case nil:
		case string:
			if v != "" {
				return true
			}
		case int64:
			if v != 0 {
				return true
			}
		default:
			return true
		}
	}
	return false
}
