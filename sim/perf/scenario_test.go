package perf

import (
	"errors"
	"testing"

	"github.com/rnic/rnic/sim"
)

// TestScenarioVictimAndBully: a latency-sensitive tenant (write_lat, one
// QP) and a bandwidth tenant (64 KiB WRITEs on 8 QPs) send to one server
// host. Alone, the victim's latency is the NIC's; with the bully's
// WRITEs queued on the same server port and NIC its tail grows by what
// waits ahead of it. Each tenant's result is its own: its operations,
// its latency, its QPs' counters; and the bully's timeline shows it
// running only between its start and stop.
func TestScenarioVictimAndBully(t *testing.T) {
	p := mustProfile(t, "cx6")
	victim := Tenant{Name: "victim", Spec: Spec{Test: WriteLat, Size: 64, Iters: 400}, Clients: []int{0}, Servers: []int{2}}
	alone, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{victim}})
	if err != nil {
		t.Fatal(err)
	}
	bully := Tenant{Name: "bully", Spec: Spec{Test: WriteBW, Size: 65536, QPs: 8}, Clients: []int{1}, Servers: []int{2},
		Start: 50 * sim.Microsecond, Stop: 400 * sim.Microsecond}
	both, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{victim, bully}})
	if err != nil {
		t.Fatal(err)
	}
	v, b := both[0], both[1]
	t.Logf("victim alone: p50 %d ns, p99 %d ns; with the bully: p50 %d ns, p99 %d ns; bully %.1f Gb/s, %d ops",
		alone[0].Lat.Quantile(0.5), alone[0].Lat.Quantile(0.99), v.Lat.Quantile(0.5), v.Lat.Quantile(0.99), b.Gbps, b.Ops)
	if v.Tenant != "victim" || b.Tenant != "bully" || v.Ops != alone[0].Ops {
		t.Errorf("tenants %q %q, victim ops %d (alone %d)", v.Tenant, b.Tenant, v.Ops, alone[0].Ops)
	}
	if v.Lat.Quantile(0.99) < 2*alone[0].Lat.Quantile(0.99) {
		t.Errorf("victim p99 %d ns with the bully, %d alone: want at least twice", v.Lat.Quantile(0.99), alone[0].Lat.Quantile(0.99))
	}
	if b.Gbps < 50 {
		t.Errorf("bully %.1f Gb/s: want most of the 100 Gb/s link", b.Gbps)
	}
	// The bully posted nothing before its start and, after its stop,
	// finished only what it had in flight.
	var before, after int64
	for _, pt := range b.Timeline {
		switch {
		case pt.At+pt.Width <= 50*sim.Microsecond:
			before += int64(pt.Mops)
		case pt.At >= 500*sim.Microsecond:
			after += int64(pt.Mops)
		}
	}
	if before != 0 || after != 0 {
		t.Errorf("bully completed operations before its start (%d) or long after its stop (%d)", before, after)
	}
	if c := b.Client.Counters; c["tx_packets"] == 0 {
		t.Errorf("bully's QP counters are empty")
	}
}

// TestScenarioCacheSplit: a tenant of many QPs thrashes the server's QPC
// cache; its own hit rate falls, and so does the one-QP tenant's beside
// it, whose context is evicted in the 50 µs between its WRITEs: what the
// per-tenant hit rates show and the NIC's total would hide.
func TestScenarioCacheSplit(t *testing.T) {
	p := mustProfile(t, "cx6")
	p.Caches.QPC.CapacityBytes = 256 * 256 // 256 contexts: the big tenant touches ~600 QPs in 50 µs
	small := Tenant{Name: "small", Spec: Spec{Test: WriteBW, Size: 64, QPs: 1, Iters: 40, TxDepth: 1}, Clients: []int{0}, Servers: []int{2},
		Rate: 20000} // one WRITE every 50 µs
	alone, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{small}})
	if err != nil {
		t.Fatal(err)
	}
	big := Tenant{Name: "big", Spec: Spec{Test: WriteBW, Size: 64, QPs: 4096, Iters: 40, TxDepth: 4}, Clients: []int{1}, Servers: []int{2}}
	res, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{small, big}})
	if err != nil {
		t.Fatal(err)
	}
	hit := func(r *Result) float64 { return r.Server.QPCHit / (r.Server.QPCHit + r.Server.QPCMiss) }
	t.Logf("server QPC hit rate: small alone %.3f, small beside big %.3f, big %.3f", hit(alone[0]), hit(res[0]), hit(res[1]))
	if hit(alone[0]) < 0.95 || hit(res[1]) > 0.8 || hit(res[0]) > hit(alone[0])-0.2 {
		t.Errorf("hit rates: small alone %.3f, beside big %.3f, big %.3f", hit(alone[0]), hit(res[0]), hit(res[1]))
	}
}

// TestScenarioRateAndSL: a tenant posting at a rate completes at that
// rate (open loop, below what its depth would allow); refused
// combinations name the tenant and the parameter.
func TestScenarioRate(t *testing.T) {
	p := mustProfile(t, "cx6")
	res, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{
		{Name: "paced", Spec: Spec{Test: WriteBW, Size: 4096, QPs: 2, Iters: 500}, Clients: []int{0}, Servers: []int{1}, Rate: 1e6, SL: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if m := res[0].Mops; m < 1.9 || m > 2.1 {
		t.Errorf("2 QPs at 1 M/s each: %.3f Mops, want 2", m)
	}
	for _, sc := range []Scenario{
		{},
		{Tenants: []Tenant{{Name: "a b", Clients: []int{0}, Servers: []int{1}}}},
		{Tenants: []Tenant{{Name: "x", Clients: []int{0}, Servers: []int{0}}}},
		{Tenants: []Tenant{{Name: "x", Clients: []int{0, 1}, Servers: []int{2, 3, 4}}}},
		{Tenants: []Tenant{{Name: "x", Spec: Spec{Pairs: 2}, Clients: []int{0}, Servers: []int{1}}}},
		{Tenants: []Tenant{{Name: "x", Spec: Spec{Test: WriteLat}, Clients: []int{0}, Servers: []int{1}, Rate: 1000}}},
		{Tenants: []Tenant{{Name: "x", Clients: []int{0}, Servers: []int{1}, Start: 10, Stop: 5}}},
		{Tenants: []Tenant{{Name: "x", Clients: []int{0}, Servers: []int{1}, SL: 16}}},
		{Tenants: []Tenant{{Name: "x", Clients: []int{0}, Servers: []int{1}}, {Name: "x", Clients: []int{0}, Servers: []int{1}}}},
		{Hosts: 2, Tenants: []Tenant{{Name: "x", Clients: []int{0}, Servers: []int{2}}}},
	} {
		var se *ScenarioError
		if err := sc.Validate(); !errors.As(err, &se) {
			t.Errorf("%+v: %v, want a *ScenarioError", sc, err)
		}
	}
	var spe *SpecError
	if err := (Scenario{Tenants: []Tenant{{Name: "x", Spec: Spec{Test: WriteBW, TxDepth: -1}, Clients: []int{0}, Servers: []int{1}}}}).Validate(); !errors.As(err, &spe) {
		t.Errorf("a tenant's bad spec: %v, want its *SpecError", err)
	}
}

// TestScenarioServiceLevel: a victim and a bully on one client NIC with
// a transmit buffer (engine.tx_buffer_bytes): with the bully on a lower
// priority (a higher service level) the arbiter picks the victim's
// WRITE first whenever the wire can take a packet, so its tail latency
// falls; without a transmit buffer the arbiter runs ahead of the wire
// and the service level changes nothing.
func TestScenarioServiceLevel(t *testing.T) {
	p99 := func(buf, sl int) int64 {
		p := mustProfile(t, "cx6")
		p.Engine.TxBufferBytes = buf
		res, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{
			{Name: "victim", Spec: Spec{Test: WriteLat, Size: 64, Iters: 500}, Clients: []int{0}, Servers: []int{1}},
			{Name: "bully", Spec: Spec{Test: WriteBW, Size: 4096, QPs: 8, TxDepth: 16}, Clients: []int{0}, Servers: []int{1},
				Stop: sim.Millisecond, SL: sl},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Lat.Quantile(0.99)
	}
	same, lower := p99(16384, 0), p99(16384, 7)
	t.Logf("victim p99 with a 16 KiB transmit buffer: %d ns beside a bully of its level, %d ns beside a bully at SL 7", same, lower)
	if lower*3 > same*2 {
		t.Errorf("the bully's lower priority did not cut the victim's p99 by a third: %d vs %d ns", lower, same)
	}
	if a, b := p99(0, 0), p99(0, 7); a != b {
		t.Errorf("without a transmit buffer the service level changed the victim's p99: %d vs %d ns", a, b)
	}
}

// TestScenarioRetransPerTenant: a tenant whose incast overflows the
// switch's buffer retransmits; a tenant on other hosts, whose traffic
// never meets it, does not — each tenant's retrans counts its own QPs',
// while wire_drops is the fabric's.
func TestScenarioRetransPerTenant(t *testing.T) {
	p := mustProfile(t, "cx6")
	p.Switch.BufferBytes = 200 << 10
	res, err := RunScenario(p, Scenario{Metadata: true, Tenants: []Tenant{
		{Name: "incast", Spec: Spec{Test: WriteBW, Size: 65536, Iters: 40}, Clients: []int{0, 1, 2, 3}, Servers: []int{4}},
		{Name: "quiet", Spec: Spec{Test: WriteBW, Size: 65536, Iters: 40}, Clients: []int{5}, Servers: []int{6}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	in, q := res[0], res[1]
	t.Logf("incast: %d retransmitted, quiet: %d; fabric drops %d", in.Retrans, q.Retrans, in.WireDrop)
	if in.Retrans == 0 || q.Retrans != 0 || in.WireDrop == 0 || q.WireDrop != in.WireDrop {
		t.Errorf("retrans incast %d, quiet %d; wire drops %d and %d", in.Retrans, q.Retrans, in.WireDrop, q.WireDrop)
	}
}
