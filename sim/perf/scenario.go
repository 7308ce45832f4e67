package perf

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/profile"
)

// Scenario puts several workloads (tenants) on one fabric at once: each
// a perftest-like workload of its own on hosts of its own choosing, so
// that tenants sharing a NIC — a victim's latency next to a bully's
// bandwidth, one tenant's contexts evicting another's — can be studied
// as Husky (NSDI '23) and Collie (NSDI '22) study real RNICs.
type Scenario struct {
	// Hosts is the number of machines on the switch (0: as many as the
	// tenants name).
	Hosts    int
	Metadata bool
	Seed     uint64
	// Limit bounds the virtual time (default 10 s).
	Limit sim.Time
	// TimelinePort is the egress port whose queue the tenants' timelines
	// follow (Spec.TimelinePort's names; default the port towards the
	// first tenant's first server).
	TimelinePort string
	Tenants      []Tenant
}

// Tenant is one workload of a scenario.
type Tenant struct {
	// Name names the tenant in results and in --set tenant.NAME.KEY
	// (letters, digits, '_' and '-').
	Name string
	// Spec is the workload; its Pairs, Incast, Metadata, Seed, Limit and
	// TimelinePort are the scenario's and must be zero. Iters 0 with a Stop time runs
	// until the stop.
	Spec Spec
	// Clients are the hosts (0-based) of its clients; Servers its servers:
	// one per client, or one for all of them (an incast).
	Clients []int
	Servers []int
	// Start is when its threads begin; at Stop (0: never) its clients
	// stop posting (the next work request a QP posts is its last).
	Start, Stop sim.Time
	// Rate is the operations per second each QP posts (open loop, up to
	// tx_depth outstanding); 0 keeps tx_depth outstanding. Bandwidth
	// tests only.
	Rate float64
	// SL is the service level of its QPs: the NIC arbiter's priority
	// level for their packets.
	SL int
}

// untilStop is the iterations of a tenant that runs until its stop time.
const untilStop = 1 << 40

// ScenarioError says which parameter of which tenant is not meaningful
// (Tenant "" for the scenario's own).
type ScenarioError struct {
	Tenant, Param string
	Msg           string
}

func (e *ScenarioError) Error() string {
	if e.Tenant == "" {
		return fmt.Sprintf("perf: scenario %s: %s", e.Param, e.Msg)
	}
	return fmt.Sprintf("perf: tenant %q: %s: %s", e.Tenant, e.Param, e.Msg)
}

var tenantName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate reports the first parameter of the scenario that is out of
// range or that the workloads would not honour: a *ScenarioError, or a
// tenant's *SpecError wrapped with its name.
func (sc Scenario) Validate() error {
	_, _, err := sc.prepare()
	return err
}

// prepare checks the scenario and returns its tenants' workloads with
// their defaults filled in, and the number of hosts.
func (sc Scenario) prepare() ([]*runner, int, error) {
	bad := func(tenant, param, format string, args ...any) error {
		return &ScenarioError{Tenant: tenant, Param: param, Msg: fmt.Sprintf(format, args...)}
	}
	if len(sc.Tenants) == 0 {
		return nil, 0, bad("", "tenants", "none: a scenario needs at least one")
	}
	if sc.Hosts < 0 || sc.Limit < 0 {
		return nil, 0, bad("", "hosts or limit", "negative")
	}
	hosts := sc.Hosts
	var rs []*runner
	seen := map[string]bool{}
	for _, t := range sc.Tenants {
		n := t.Name
		switch {
		case !tenantName.MatchString(n):
			return nil, 0, bad(n, "name", "%q: want letters, digits, '_' and '-'", n)
		case seen[n]:
			return nil, 0, bad(n, "name", "two tenants are called %q", n)
		}
		seen[n] = true
		sp := t.Spec
		if sp.Pairs != 0 || sp.Incast || sp.Metadata || sp.Seed != 0 || sp.Limit != 0 || sp.TimelinePort != "" {
			return nil, 0, bad(n, "pairs, incast, metadata, seed, limit, timeline_port", "the scenario's, not a tenant's (a tenant's hosts are its clients and servers)")
		}
		if len(t.Clients) == 0 || len(t.Servers) == 0 {
			return nil, 0, bad(n, "clients, servers", "a tenant needs both")
		}
		if len(t.Servers) != 1 && len(t.Servers) != len(t.Clients) {
			return nil, 0, bad(n, "servers", "%d for %d clients: want one per client, or one for all", len(t.Servers), len(t.Clients))
		}
		all := append(append([]int(nil), t.Clients...), t.Servers...)
		for i, h := range all {
			if h < 0 || sc.Hosts > 0 && h >= sc.Hosts {
				return nil, 0, bad(n, "clients, servers", "host %d is not one of the scenario's %d", h, sc.Hosts)
			}
			if slices.Contains(all[:i], h) {
				return nil, 0, bad(n, "clients, servers", "host %d named twice (a client and its server are different hosts)", h)
			}
			hosts = max(hosts, h+1)
		}
		switch {
		case t.Start < 0 || t.Stop < 0:
			return nil, 0, bad(n, "start, stop", "negative")
		case t.Stop > 0 && t.Stop <= t.Start:
			return nil, 0, bad(n, "stop", "%v is not after start %v", time.Duration(t.Stop), time.Duration(t.Start))
		case t.Rate < 0 || math.IsNaN(t.Rate) || math.IsInf(t.Rate, 0):
			return nil, 0, bad(n, "rate", "%v is not a rate (operations per second per QP, 0: as fast as tx_depth lets it)", t.Rate)
		case t.Rate > 0 && t.Rate < 1:
			return nil, 0, bad(n, "rate", "%v: below one operation per second per QP", t.Rate)
		case t.SL < 0 || t.SL > 15:
			return nil, 0, bad(n, "sl", "%d is not a service level (0 to 15)", t.SL)
		}
		sp.Pairs = len(t.Clients)
		sp.Incast = len(t.Servers) == 1 && len(t.Clients) > 1
		sp.Metadata, sp.Seed, sp.TimelinePort = sc.Metadata, sc.Seed, sc.TimelinePort
		if sp.Iters == 0 && t.Stop > 0 {
			sp.Iters = untilStop
		}
		if err := sp.defaults(); err != nil {
			return nil, 0, fmt.Errorf("tenant %q: %w", n, err)
		}
		if t.Rate > 0 && latency(sp.Test) {
			return nil, 0, bad(n, "rate", "%s is a ping-pong: it posts on each answer, not at a rate", sp.Test)
		}
		if t.Stop == 0 && sp.Iters == untilStop {
			return nil, 0, bad(n, "iters", "%d without a stop time would never end", sp.Iters)
		}
		r := newRunner(sp)
		r.name, r.start, r.stop, r.rate, r.sl = n, t.Start, t.Stop, t.Rate, uint8(t.SL)
		r.clientIdx, r.serverIdx = t.Clients, t.Servers
		rs = append(rs, r)
	}
	return rs, hosts, nil
}

// RunScenario runs every tenant of the scenario at once on one fabric
// and returns each tenant's result, in the scenario's order. A tenant's
// Client and Server statistics are of its first client's and first
// server's NICs (shared with whoever else is there), except the cache hit
// rates and the protocol counters, which are its own QPs' (every step a
// NIC takes for one of its QPs), and so are Packets, Retrans and
// Timeouts; WireDrop and Events are the whole fabric's. A tenant that did
// not finish has a nil result, and the error names it.
func RunScenario(p *profile.HardwareProfile, sc Scenario) ([]*Result, error) {
	rs, hosts, err := sc.prepare()
	if err != nil {
		return nil, err
	}
	limit := sc.Limit
	if limit == 0 {
		limit = 10 * sim.Second
	}
	for _, r := range rs {
		r.spec.Limit = limit
	}
	w, err := newWorld(p, hosts, sc.Seed, sc.Metadata, limit, sc.TimelinePort, rs, true)
	if err != nil {
		return nil, err
	}
	return w.run()
}
