package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"reflect"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/perf"
)

const twoTenants = `
metadata = true
seed = 3
limit = "50ms"

[[tenant]]
name = "victim"
test = "write_lat"
size = 64
iters = 200
clients = [0]
servers = [2]
sl = 1

[[tenant]]
name = "bully"
test = "ib_write_bw"
size = "64K"
qps = 4
tx_depth = 8
clients = [1]
servers = 2
start = "20us"
stop = 300000
rate = "50k"
`

// TestParseScenario: every kind of value as a file writes it (sizes with
// suffixes, durations as strings or nanoseconds, rates with SI suffixes,
// one host or a list) reaches the tenant it belongs to.
func TestParseScenario(t *testing.T) {
	d, err := ParseScenario([]byte(twoTenants))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := d.Scenario(nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := perf.Scenario{Metadata: true, Seed: 3, Limit: 50 * sim.Millisecond, Tenants: []perf.Tenant{
		{Name: "victim", Spec: perf.Spec{Test: perf.WriteLat, Size: 64, Iters: 200}, Clients: []int{0}, Servers: []int{2}, SL: 1},
		{Name: "bully", Spec: perf.Spec{Test: perf.WriteBW, Size: 65536, QPs: 4, TxDepth: 8}, Clients: []int{1}, Servers: []int{2},
			Start: 20 * sim.Microsecond, Stop: 300 * sim.Microsecond, Rate: 50000},
	}}
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("scenario\n got %+v\nwant %+v", sc, want)
	}
	// Overrides: TOML values and bare words, and the seed.
	sc, err = d.Scenario([]Override{{"tenant.bully.size", "4K"}, {"tenant.victim.clients", "[3]"}, {"tenant.bully.random", "true"}}, 9)
	if err != nil {
		t.Fatal(err)
	}
	if b, v := sc.Tenants[1], sc.Tenants[0]; b.Spec.Size != 4096 || !b.Spec.Random || !reflect.DeepEqual(v.Clients, []int{3}) || sc.Seed != 9 {
		t.Errorf("overrides not applied: %+v", sc)
	}
	// The timeline's port (the scenario's) and QP (a tenant's).
	d, err = ParseScenario([]byte("timeline_port = \"switch:1\"\n" + twoTenants))
	if err != nil {
		t.Fatal(err)
	}
	sc, err = d.Scenario([]Override{{"tenant.bully.timeline_qp", "3"}}, -1)
	if err != nil || sc.TimelinePort != "switch:1" || sc.Tenants[1].Spec.TimelineQP != 3 {
		t.Errorf("timeline_port and timeline_qp: %v %+v", err, sc)
	}
}

// TestScenarioErrors: a file or an override that cannot mean anything
// says where.
func TestScenarioErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"hosts = 2\n", "no [[tenant]]"},
		{"colour = 1\n[[tenant]]\nname = \"a\"\n", `unknown key "colour"`},
		{"[[tenant]]\ntest = \"write_bw\"\n", "no name"},
		{"[[tenant]]\nname = \"a\"\nsise = 64\n", `tenant "a": unknown key "sise"`},
		{"limit = \"soon\"\n[[tenant]]\nname = \"a\"\n", "limit"},
	} {
		if _, err := ParseScenario([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.text, err, tc.want)
		}
	}
	d, err := ParseScenario([]byte(twoTenants))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  Set
		want string
	}{
		{Set{"tenant.nobody.size", []string{"64"}}, `no tenant "nobody"`},
		{Set{"tenant.bully.colour", []string{"red"}}, `unknown key "colour"`},
		{Set{"tenant.bully.size", []string{"big"}}, `tenant "bully": size`},
		{Set{"tenant.bully.servers", []string{"[1]"}}, "host 1 named twice"},
	} {
		sw := Sweep{Scenario: d, Sets: []Set{tc.set}}
		if _, err := sw.Points(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s=%v: %v, want an error with %q", tc.set.Key, tc.set.Values, err, tc.want)
		}
	}
	if _, err := (&Sweep{Scenario: d, Sizes: []int{64}}).Points(); err == nil || !strings.Contains(err.Error(), "size given") {
		t.Errorf("a scenario with --size: %v", err)
	}
	if _, err := (&Sweep{Scenario: d, TimelineQP: 1}).Points(); err == nil || !strings.Contains(err.Error(), "timeline_qp") {
		t.Errorf("a scenario with --timeline-qp: %v", err)
	}
	if _, err := (&Sweep{Sets: []Set{{"tenant.bully.size", []string{"64"}}}}).Points(); err == nil {
		t.Errorf("a tenant override without a scenario: no error")
	}
}

// TestScenarioSweep: a sweep of a tenant's parameter gives a row per
// tenant per run, with the tenant's parameters in the parameter columns,
// its own results, and the timeline of each.
func TestScenarioSweep(t *testing.T) {
	d, err := ParseScenario([]byte(twoTenants))
	if err != nil {
		t.Fatal(err)
	}
	sw := &Sweep{Scenario: d, Sets: []Set{{"tenant.bully.size", []string{"4K", "64K"}}, {"caches.qpc.entries", []string{"1024"}}}}
	rows, err := Run(context.Background(), sw, Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	cols := sw.Columns(false)
	var got []string
	for i := range rows {
		r := &rows[i]
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Label, r.Err)
		}
		get := func(name string) any { c, _ := Find(cols, name); return c.Value(r) }
		got = append(got, strings.Join([]string{get("tenant").(string), get("tenant.bully.size").(string), string(get("test").(string))}, " "))
		if get("size").(int64) == 0 || len(r.Result.Timeline) == 0 {
			t.Errorf("%s: size %v, %d timeline points", r.Label, get("size"), len(r.Result.Timeline))
		}
	}
	want := []string{"victim 4K write_lat", "bully 4K write_bw", "victim 64K write_lat", "bully 64K write_bw"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	if s := rows[3].Result.Spec.Size; s != 65536 {
		t.Errorf("bully's size in the second run: %d", s)
	}
	var b bytes.Buffer
	if err := WriteTimelineCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(recs) < 5 || strings.Join(recs[0], ",") != "run,label,tenant,t_ns,width_ns,gbps,mops,rate_gbps,queue_bytes" {
		t.Errorf("timeline CSV: %v, %d records, header %v", err, len(recs), recs[0])
	}
}
