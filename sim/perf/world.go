package perf

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/vclock"
)

// world is one simulation: a virtual clock of the hardware profile and
// its machines on one switch, shared by the workloads (tenants) that run
// on them. A plain Run is a world with one tenant.
type world struct {
	vc       *rnic.VirtualClock
	machines []*machine
	tenants  []*runner
	limit    sim.Time
	metadata bool
	// attribute: the tenants' cache hit rates are their own QPs' (a
	// scenario), not the whole NIC's (one workload, as before tenants).
	attribute bool
	// queue is the depth of the port queuePort names over time
	// (Spec.TimelinePort, or the switch port towards the first tenant's
	// first server).
	queue     gauge
	queuePort string
}

// machine is one host of the fabric: a device of the clock, shared by the
// tenants that have a client or server there (each with its own PD,
// regions, CQs, threads).
type machine struct {
	dev  *rnic.Device
	addr netip.Addr
	// qps finds a QP's run by its number, for the step observer that
	// attributes cache lookups to tenants.
	qps map[uint32]*qpRun
}

// newWorld builds the clock and hosts machines, sized for every tenant
// that uses them, then each tenant's hosts, QPs and connections.
func newWorld(p *profile.HardwareProfile, hosts int, seed uint64, metadata bool, limit sim.Time, queuePort string, tenants []*runner, attribute bool) (*world, error) {
	w := &world{tenants: tenants, limit: limit, metadata: metadata, attribute: attribute}
	watch := false
	for _, r := range tenants {
		watch = watch || r.spec.Test == WriteLat
	}
	vc, err := vclock.New(vclock.Options{HardwareProfile: p, Seed: seed, Metadata: metadata, WatchWrites: watch})
	if err != nil {
		return nil, err
	}
	vc.SetLimit(time.Duration(limit))
	w.vc = vc
	// Each tenant's QPs, CQs and regions on a machine it uses: the
	// device's limits are their sums (an upper bound per tenant: its QPs
	// times its clients).
	type need struct{ qps, cqs, wr, inline, page int }
	needs := make([]need, hosts)
	for _, r := range tenants {
		sp := &r.spec
		for _, i := range append(append([]int(nil), r.clientIdx...), r.serverIdx...) {
			n := &needs[i]
			n.qps += sp.QPs * len(r.clientIdx)
			n.cqs += 2 * (sp.Threads + sp.QPs*len(r.clientIdx)) // two per thread (SEND tests), a thread per QP (latency tests)
			n.wr = max(n.wr, sp.TxDepth*2, 16384)
			n.inline = max(n.inline, sp.Inline, 256)
			if n.page == 0 {
				n.page = sp.PageSize
			}
		}
	}
	for i, a := range fabric.HostAddrs(hosts) {
		n := needs[i]
		if n.qps == 0 {
			n = need{wr: 16384, inline: 256, page: 4096} // a host no tenant uses
		}
		dev, err := rnic.Open(rnic.Options{Clock: vc, Addr: a, MaxQP: n.qps + 16, MaxCQ: n.cqs + 16, MaxMR: n.qps + 16,
			MaxQPWR: n.wr, MaxInline: n.inline, PageSize: n.page})
		if err != nil {
			return nil, err
		}
		m := &machine{dev: dev, addr: a, qps: map[uint32]*qpRun{}}
		if w.attribute {
			vclock.ObserveSteps(vc, dev, m.observe)
		}
		w.machines = append(w.machines, m)
	}
	for _, r := range tenants {
		r.w, r.vc = w, vc
		if err := r.build(); err != nil {
			return nil, tenantErr(r, err)
		}
	}
	// Timelines: each tenant's chosen flow's rate under congestion
	// control, and the queue of the chosen port (by default the switch
	// port towards the first server).
	cc := p.DCQCN.Enabled || p.TIMELY.Enabled
	for _, r := range tenants {
		c, q := r.spec.TimelineQP/r.spec.QPs, r.spec.TimelineQP%r.spec.QPs
		if c < len(r.clients) && q < len(r.clients[c].qps) {
			r.flow = r.clients[c].qps[q]
		}
		if cc {
			r.rates.start, r.rates.from = p.Link.RateGbps*1e9, r.start
		}
	}
	if cc {
		for _, m := range w.machines {
			vclock.ObserveRates(vc, m.dev, m.rateChanged)
		}
	}
	w.queuePort = queuePort
	if first := tenants[0]; queuePort == "" && len(first.servers) > 0 {
		if id, ok := vclock.Fabric(vc).Lookup(first.servers[0].m.addr); ok {
			w.queuePort = vclock.Fabric(vc).Host(id).SwitchPortName()
		}
	}
	if w.queuePort != "" {
		if err := vclock.Fabric(vc).WatchPort(w.queuePort, w.queue.add); err != nil {
			return nil, fmt.Errorf("perf: timeline_port: %w", err)
		}
	}
	return w, nil
}

// tenantErr names the tenant an error is of, in a scenario.
func tenantErr(r *runner, err error) error {
	if r.name == "" {
		return err
	}
	return fmt.Errorf("tenant %q: %w", r.name, err)
}

// rateChanged records a congestion-controlled rate change of a tenant's
// flow (its first client QP).
func (m *machine) rateChanged(qpn uint32, now time.Duration, bps float64) {
	if q := m.qps[qpn]; q != nil && q.h.run.flow == q {
		q.h.run.rates.add(sim.Time(now), bps)
	}
}

// observe attributes a step's cache lookups and misses to the tenant of
// the QP it was for: on the tenant's client side or its server side.
func (m *machine) observe(b *vclock.Step) {
	q := m.qps[b.QP]
	if q == nil {
		return
	}
	c := &q.h.run.caches[sideOf(q)]
	c.qpcLookups += b.QPCLookups
	c.qpcMisses += b.QPCMisses
	c.mptLookups += b.MPTLookups
	c.mptMisses += b.MPTMisses
	c.mttLookups += b.MTTLookups
	c.mttMisses += b.MTTMisses
}

// cacheCount is a tenant's share of one NIC side's cache lookups.
type cacheCount struct {
	qpcLookups, qpcMisses, mptLookups, mptMisses, mttLookups, mttMisses int
}

func sideOf(q *qpRun) int {
	if q.client {
		return 0
	}
	return 1
}

// run runs every tenant's threads to the end, then lets the NICs finish
// what is in flight (their statistics are final), and reports each
// tenant's result in order. A tenant that did not finish has a nil
// result; the error says which and why.
func (w *world) run() ([]*Result, error) {
	for _, r := range w.tenants {
		r.latMin = sim.Never
		r.fillPatterns()
	}
	var threads []*rnic.Thread
	var runErr error
	err := w.vc.Run(func() {
		for _, r := range w.tenants {
			for _, hs := range [][]*host{r.clients, r.servers} {
				for _, h := range hs {
					for _, th := range h.threads {
						threads = append(threads, w.vc.Go(th.run))
					}
				}
			}
			if r.spec.MRChurn > 0 {
				w.vc.Go(r.churnLoop)
			}
		}
		for _, t := range threads {
			if err := t.Wait(); err != nil {
				runErr = err
				return
			}
		}
		if err := w.vc.Settle(); err != nil {
			runErr = err
		}
	})
	if err != nil {
		runErr = err
	}
	res := make([]*Result, len(w.tenants))
	var errs []error
	for i, r := range w.tenants {
		if runErr != nil {
			r.fail(runErr)
		}
		var err error
		res[i], err = r.result()
		if err != nil {
			errs = append(errs, tenantErr(r, err))
		}
	}
	return res, errors.Join(errs...)
}

// result is the tenant's Result, once the world has run.
func (r *runner) result() (*Result, error) {
	w := r.w
	if r.finished < r.totalQPs {
		why := ""
		if r.err != nil && !errors.Is(r.err, rnic.ErrTimeLimit) {
			why = ": " + r.err.Error()
		}
		return nil, fmt.Errorf("perf: %s did not finish in %v of virtual time (%d of %d QPs done, %d errors)%s",
			r.spec.Test, w.limit, r.finished, r.totalQPs, r.errors, why)
	}
	res := &Result{Spec: r.spec, Tenant: r.name, Elapsed: r.winEnd - r.winStart, Ops: r.ops, Bytes: r.bytes, Errors: r.errors,
		Events: w.vc.Events(), Lat: &r.lat, Timeline: r.tl.points(&r.rates, &w.queue)}
	if res.Elapsed > 0 {
		sec := float64(res.Elapsed) / 1e9
		res.Gbps = float64(res.Bytes) * 8 / sec / 1e9
		res.Mops = float64(res.Ops) / sec / 1e6
	}
	res.Jain = r.jain()
	if r.latN > 0 {
		res.LatMin = r.latMin
		res.LatAvg = r.latSum / float64(r.latN)
	}
	res.Client = stats(w.vc, r.clients[0].dev, r.winEnd)
	res.Server = stats(w.vc, r.servers[0].dev, r.winEnd)
	// Packets, retransmissions and timeouts: the tenant's own QPs' in a
	// scenario, every NIC's otherwise.
	var counts []map[string]uint64
	if w.attribute {
		r.attributed(&res.Client, 0)
		r.attributed(&res.Server, 1)
		counts = append(counts, res.Client.Counters, res.Server.Counters)
	} else {
		for _, m := range w.machines {
			counts = append(counts, stats(w.vc, m.dev, 0).Counters)
		}
	}
	for _, c := range counts {
		res.Packets += c["tx_packets"]
		res.Retrans += c["roce_retrans_packets"]
		res.Timeouts += c["local_ack_timeout_err"]
	}
	fab := vclock.Fabric(w.vc)
	if id, ok := fab.Lookup(r.servers[0].m.addr); ok {
		res.QueueMaxBytes = fab.Host(id).SwitchPortStats().MaxQueueBytes
	}
	sw, up := fab.Totals()
	res.WireDrop = sw.Drops + up.Drops
	res.ECNMarked = sw.ECNMarked + up.ECNMarked
	res.PFCPauses = sw.PausesSent
	res.PFCPaused = up.PausedTime
	res.UplinkQueueMaxBytes = up.MaxQueueBytes
	res.Ports = fab.Ports()
	res.QueuePort = w.queuePort
	for _, q := range sw.Queues {
		res.HeadroomDrops += q.HeadroomDrops
	}
	if !w.metadata {
		res.Checked, res.Corrupt = r.check()
		if res.Corrupt > 0 {
			return res, fmt.Errorf("perf: %d of %d bytes differ from their source after %s", res.Corrupt, res.Checked, r.spec.Test)
		}
	}
	return res, nil
}

// jain is Jain's fairness index over the client QPs' rates: (Σx)² / (n Σx²).
func (r *runner) jain() float64 {
	var sum, sq float64
	n := 0
	for _, c := range r.clients {
		for _, q := range c.qps {
			if q.measured == 0 || q.lastAt <= r.winStart {
				continue
			}
			x := float64(q.measured) / float64(q.lastAt-r.winStart)
			sum, sq, n = sum+x, sq+x*x, n+1
		}
	}
	if n == 0 {
		return 0
	}
	return sum * sum / (float64(n) * sq)
}

// attributed replaces a side's cache hits and misses, and its protocol
// counters, by the tenant's own: its QPs' lookups on that side (every
// NIC of the side, summed) and its QPs' counters.
func (r *runner) attributed(st *NICStats, side int) {
	c := r.caches[side]
	st.QPCHit, st.QPCMiss = float64(c.qpcLookups-c.qpcMisses), float64(c.qpcMisses)
	st.MPTHit, st.MPTMiss = float64(c.mptLookups-c.mptMisses), float64(c.mptMisses)
	st.MTTHit, st.MTTMiss = float64(c.mttLookups-c.mttMisses), float64(c.mttMisses)
	hosts := r.clients
	if side == 1 {
		hosts = r.servers
	}
	st.Counters = map[string]uint64{}
	for _, h := range hosts {
		for _, q := range h.qps {
			for _, c := range q.qp.Counters() {
				st.Counters[c.Name] += c.Value
			}
		}
	}
}
