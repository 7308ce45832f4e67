package experiment

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestColumnsTypes(t *testing.T) {
	sw := tinySweep()
	sw.Sets = []Set{{"caches.qpc.entries", []string{"2048"}}, {"name", []string{"x"}}}
	rows := append([]Row(nil), tinyRows(t)...) // a copy: other tests share them
	for i := range rows {
		rows[i].Sets = []string{"2048", "x"}
	}
	failed := Row{Point: Point{Sets: []string{"2048", "x"}}, Err: errors.New("boom"), Wall: time.Second}
	rows = append(rows, failed)
	cols := sw.Columns(true)
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c.Name] || c.Name == "" || c.Doc == "" {
			t.Errorf("column %q: duplicate or undocumented", c.Name)
		}
		seen[c.Name] = true
		for r := range rows {
			switch v := c.Value(&rows[r]); v.(type) {
			case nil:
				if c.Kind == Param {
					t.Errorf("parameter %s has no value in row %d", c.Name, r)
				}
			case int64, uint64, float64:
				if !c.Numeric {
					t.Errorf("column %s is not numeric but has %T %v", c.Name, v, v)
				}
			case string, bool:
				if c.Numeric {
					t.Errorf("numeric column %s has %T %v", c.Name, v, v)
				}
			default:
				t.Errorf("column %s has %T %v", c.Name, v, v)
			}
		}
	}
	for _, name := range []string{"caches.qpc.entries", "name", "wall_s", "pkts_per_wall_s", "c_qpc_hit", "s_pcie_per_net_byte", "lat_p999_ns"} {
		if !seen[name] {
			t.Errorf("no column %s", name)
		}
	}
	if c, _ := Find(cols, "caches.qpc.entries"); !c.Numeric {
		t.Error("a numeric override's column is not numeric")
	}
	for _, c := range sw.Columns(false) {
		if c.Kind == Wall {
			t.Errorf("wall column %s without asking", c.Name)
		}
	}
}

func TestSelect(t *testing.T) {
	cols := tinySweep().Columns(false)
	got, err := Select(cols, []string{"mops", "test"})
	if err != nil || len(got) != 2 || got[0].Name != "mops" || got[1].Name != "test" {
		t.Errorf("Select(mops, test) = %v, %v", got, err)
	}
	if all, err := Select(cols, []string{"all"}); err != nil || len(all) != len(cols) {
		t.Errorf("Select(all) = %d columns, %v; want %d", len(all), err, len(cols))
	}
	if _, err := Select(cols, []string{"mops", "speed"}); err == nil || !strings.Contains(err.Error(), `"speed"`) {
		t.Errorf("Select(speed): %v", err)
	}
}

func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1, "1"}, {12.3456789, "12.3457"}, {0.000012345678, "0.0000123457"}, {1234567, "1234570"}, {-2.5, "-2.5"},
	} {
		if got := formatFloat(tc.in); got != tc.want {
			t.Errorf("formatFloat(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
