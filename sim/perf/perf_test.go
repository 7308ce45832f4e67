package perf

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/profile"
)

func mustProfile(t testing.TB, name string) *profile.HardwareProfile {
	t.Helper()
	p, err := profile.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkloads runs every workload with real bytes: each completes every
// operation without error, moves what it claims at no more than the line
// rate, and (bandwidth tests) the bytes at the destination equal their
// source.
func TestWorkloads(t *testing.T) {
	p := mustProfile(t, "cx6")
	for _, tc := range []Spec{
		{Test: WriteLat, Size: 8, Iters: 200, Warmup: 20},
		{Test: SendLat, Size: 8, Iters: 200, Warmup: 20},
		{Test: ReadLat, Size: 8, Iters: 200, Warmup: 20},
		{Test: WriteLat, Size: 4096, Iters: 50, Warmup: 5},
		{Test: WriteBW, Size: 65536, Iters: 500, Warmup: 50},
		{Test: ReadBW, Size: 65536, Iters: 500, Warmup: 50},
		{Test: SendBW, Size: 65536, Iters: 500, Warmup: 50},
		{Test: SendBW, Size: 1, Iters: 50, Warmup: 5}, // several messages per 64 B footprint
		{Test: SendBW, Size: 64, Iters: 50, Warmup: 5, Footprint: 4096, Random: true},
		{Test: AtomicBW, Iters: 2000, Warmup: 200},
		{Test: WriteBW, Size: 64, Iters: 5000, Warmup: 500, QPs: 8},
		{Test: WriteBW, Size: 64, Iters: 2000, Warmup: 200, QPs: 32, Threads: 8, CQMod: 16},
		{Test: ReadBW, Size: 64, Iters: 2000, Warmup: 200, QPs: 32, Threads: 8, CQMod: 16},
		{Test: WriteBW, Size: 4096, Iters: 200, Warmup: 20, QPs: 4, MRPerQP: true, Footprint: 1 << 20},
		{Test: WriteBW, Size: 8192, Iters: 100, Warmup: 10, Pairs: 3, Incast: true},
	} {
		name := fmt.Sprintf("%s/%d/q%d/p%d", tc.Test, tc.Size, tc.QPs, tc.Pairs)
		t.Run(name, func(t *testing.T) {
			res, err := Run(p, tc)
			if err != nil {
				t.Fatal(err)
			}
			sp := res.Spec
			if res.Errors != 0 {
				t.Errorf("%d error completions", res.Errors)
			}
			hosts := sp.Pairs
			want := hosts * sp.QPs * (sp.Iters - sp.Warmup)
			if latency(sp.Test) {
				// perftest's samples are the times between posts: one
				// fewer than the round trips.
				if got := int(res.Lat.Count()); got != sp.Iters-sp.Warmup-1 {
					t.Errorf("%d latency samples, want %d", got, sp.Iters-sp.Warmup-1)
				}
				if res.LatMin <= 0 || res.LatAvg < float64(res.LatMin) {
					t.Errorf("latency min %v avg %v", res.LatMin, res.LatAvg)
				}
			} else if res.Ops < want*9/10 || res.Ops > want {
				t.Errorf("%d operations measured, want about %d", res.Ops, want)
			}
			if res.Gbps <= 0 || res.Gbps > p.Link.RateGbps*float64(hosts) {
				t.Errorf("%.2f Gb/s with a %.0f Gb/s line", res.Gbps, p.Link.RateGbps)
			}
			switch sp.Test {
			case WriteBW, ReadBW, SendBW:
				if res.Checked == 0 || res.Corrupt != 0 {
					t.Errorf("checked %d bytes, %d corrupt", res.Checked, res.Corrupt)
				}
			}
		})
	}
}

// TestLargeWritesReachLineRate checks that 64 KiB WRITEs on one QP are
// limited by the line, as on hardware: between 85 % and 100 % of it after
// headers.
func TestLargeWritesReachLineRate(t *testing.T) {
	p := mustProfile(t, "cx6")
	res, err := Run(p, Spec{Test: WriteBW, Size: 65536, Iters: 2000, Warmup: 200, Metadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Gbps / p.Link.RateGbps; r < 0.85 || r > 1 {
		t.Errorf("%.1f Gb/s on a %.0f Gb/s line (%.2f)", res.Gbps, p.Link.RateGbps, r)
	}
}

// TestDeterministic checks that a run is a function of its inputs.
func TestDeterministic(t *testing.T) {
	p := mustProfile(t, "cx6")
	spec := Spec{Test: ReadBW, Size: 1024, Iters: 300, Warmup: 30, QPs: 16, Threads: 4, CQMod: 4, Seed: 7}
	a, err := Run(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	if a.Elapsed != b.Elapsed || a.Events != b.Events || a.Ops != b.Ops || a.Packets != b.Packets || !reflect.DeepEqual(a.Client, b.Client) {
		t.Errorf("two runs differ: %v/%d/%d/%d vs %v/%d/%d/%d", a.Elapsed, a.Events, a.Ops, a.Packets, b.Elapsed, b.Events, b.Ops, b.Packets)
	}
}

// TestWriteLatCX6 checks the calibration of the ConnectX-6 profile: an
// 8 B write_lat back to back (no switch) in the 0.6–0.8 µs vendors state,
// and the switch's forwarding delay added once per direction.
func TestWriteLatCX6(t *testing.T) {
	lat := func(switchNs int64) float64 {
		p := mustProfile(t, "cx6")
		p.Switch.LatencyNs = switchNs
		res, err := Run(p, Spec{Test: WriteLat, Size: 8, Iters: 300, Warmup: 30})
		if err != nil {
			t.Fatal(err)
		}
		return res.LatAvg
	}
	b2b, sw := lat(0), lat(300)
	if b2b < 600 || b2b > 800 {
		t.Errorf("write_lat 8 B back to back: %.0f ns, want 600..800", b2b)
	}
	if d := sw - b2b; d < 295 || d > 305 {
		t.Errorf("a 300 ns switch added %.0f ns to the one-way latency", d)
	}
}

// TestSharedMR checks perftest's memory layout: by default the QPs of a
// host share one region (one MPT entry); with MRPerQP each has its own, and
// many QPs then miss in the MPT cache.
func TestSharedMR(t *testing.T) {
	p := mustProfile(t, "cx6")
	run := func(perQP bool) NICStats {
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, Iters: 50, Warmup: 5, QPs: 256, Metadata: true, MRPerQP: perQP})
		if err != nil {
			t.Fatal(err)
		}
		return res.Server
	}
	shared, perQP := run(false), run(true)
	if shared.MPTMiss > 2 {
		t.Errorf("shared region: %v MPT misses, want at most 2", shared.MPTMiss)
	}
	if perQP.MPTMiss < 256 {
		t.Errorf("a region per QP: %v MPT misses, want at least one per QP (256)", perQP.MPTMiss)
	}
}

// TestTranslationPressure checks the MTT cache: a footprint far larger
// than the MTT cache covers in 4 KiB pages misses often, while 2 MiB pages
// cover it with a few entries.
func TestTranslationPressure(t *testing.T) {
	p := mustProfile(t, "cx6")
	run := func(page int) NICStats {
		res, err := Run(p, Spec{Test: WriteBW, Size: 4096, Iters: 4000, Warmup: 400, QPs: 4, Footprint: 256 << 20, PageSize: page, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Server
	}
	small, huge := run(4096), run(2<<20)
	rate := func(s NICStats) float64 { return s.MTTMiss / (s.MTTHit + s.MTTMiss) }
	if rate(small) < 0.5 {
		t.Errorf("4 KiB pages over 1 GiB: MTT miss rate %.2f, want most accesses to miss", rate(small))
	}
	if rate(huge) > 0.05 {
		t.Errorf("2 MiB pages: MTT miss rate %.2f, want almost none", rate(huge))
	}
}

// TestMTTCliff: small random WRITEs over a footprint whose 4 KiB pages
// outnumber the MTT cache lose most of their throughput to translation
// misses (each a PCIe read before the data can move); with 2 MiB pages the
// same footprint fits and the rate holds.
func TestMTTCliff(t *testing.T) {
	p := mustProfile(t, "cx6")
	run := func(footprint, page int) *Result {
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, Iters: 2000, Warmup: 200, QPs: 16, Threads: 16,
			Footprint: footprint, PageSize: page, Random: true, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	fits, small, huge := run(1<<20, 4096), run(256<<20, 4096), run(256<<20, 2<<20)
	t.Logf("Mops: 1 MiB/4K %.1f, 256 MiB/4K %.1f, 256 MiB/2M %.1f", fits.Mops, small.Mops, huge.Mops)
	if small.Mops > fits.Mops/2 {
		t.Errorf("256 MiB per QP in 4 KiB pages: %.1f Mops, want below half of the %.1f that fit the MTT cache", small.Mops, fits.Mops)
	}
	if huge.Mops < 0.8*fits.Mops {
		t.Errorf("256 MiB per QP in 2 MiB pages: %.1f Mops, want near the %.1f that fit", huge.Mops, fits.Mops)
	}
}

// TestRandomChecked: random offsets in real-bytes mode still check every
// slot they moved against its source.
func TestRandomChecked(t *testing.T) {
	p := mustProfile(t, "cx6")
	for _, test := range []Test{WriteBW, ReadBW} {
		res, err := Run(p, Spec{Test: test, Size: 256, Iters: 300, QPs: 2, Footprint: 64 << 10, Random: true, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Checked == 0 || res.Checked%256 != 0 || res.Checked >= 2*64<<10 {
			t.Errorf("%s: checked %d bytes, want whole 256 B slots, fewer than the footprint (random leaves some untouched)", test, res.Checked)
		}
	}
}

// TestMRChurn checks the noisy neighbour: re-registering a region every
// few microseconds invalidates translation entries, so the victim's
// MPT/MTT hit rate falls.
func TestMRChurn(t *testing.T) {
	p := mustProfile(t, "cx6")
	run := func(churn sim.Time) NICStats {
		res, err := Run(p, Spec{Test: WriteBW, Size: 4096, Iters: 2000, Warmup: 200, QPs: 4, Footprint: 1 << 20, Metadata: true, MRChurn: churn})
		if err != nil {
			t.Fatal(err)
		}
		return res.Server
	}
	calm, churn := run(0), run(2000)
	hit := func(s NICStats) float64 { return (s.MPTHit + s.MTTHit) / (s.MPTHit + s.MPTMiss + s.MTTHit + s.MTTMiss) }
	if hit(churn) >= hit(calm) {
		t.Errorf("translation hit rate %.3f with churn, %.3f without: churn should lower it", hit(churn), hit(calm))
	}
}

func TestBreakdownCX6(t *testing.T) {
	p := mustProfile(t, "cx6")
	st, err := Breakdown(p, 8)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteBreakdown(&b, st)
	t.Log("\n" + b.String())
	if len(st) == 0 || st[0].At != 0 || st[0].Where != "client" {
		t.Fatalf("the breakdown must start at 0 with the client posting: %+v", st)
	}
	find := func(what string) Stage {
		for _, x := range st {
			if strings.Contains(x.What, what) {
				return x
			}
		}
		t.Fatalf("no stage %q", what)
		return Stage{}
	}
	for i := 1; i < len(st); i++ {
		if st[i].Delta != st[i].At-st[i-1].At || st[i].Delta < 0 {
			t.Errorf("stage %d (%s) at %v, delta %v after %v", i, st[i].What, st[i].At, st[i].Delta, st[i-1].At)
		}
	}
	// The stages are the profile's costs, not a schedule of their own.
	if got := find("WQE built").Delta; got != sim.Time(p.Host.PostSendNs) {
		t.Errorf("posting took %v, want post_send_ns %d", got, p.Host.PostSendNs)
	}
	if got := find("doorbell arrives").Delta; got != sim.Time(p.PCIe.MMIOWriteNs) {
		t.Errorf("doorbell took %v, want mmio_write_ns %d", got, p.PCIe.MMIOWriteNs)
	}
	if got := find("TX unit done").Delta; got != sim.Time(p.Engine.TxPacketNs) {
		t.Errorf("TX processing took %v, want tx_packet_ns %d", got, p.Engine.TxPacketNs)
	}
	if last := st[len(st)-1]; last.Where != "client" || !strings.Contains(last.What, "polls the completion") || last.Delta != sim.Time(p.Host.PollCQNs) {
		t.Errorf("last stage %+v, want the client polling its completion in poll_cq_ns %d", last, p.Host.PollCQNs)
	}
	if find("frame arrives").Where != "server" {
		t.Error("the first frame to arrive should arrive at the server")
	}
}

// TestIncastDrops checks the fabric's tail drop under incast: four
// clients' 64 KiB WRITEs overflow a 200 KB switch buffer, the drops are
// reported, the clients recover by retransmitting, and every byte still
// lands where it should.
func TestIncastDrops(t *testing.T) {
	p := mustProfile(t, "cx6")
	p.Switch.BufferBytes = 200_000
	res, err := Run(p, Spec{Test: WriteBW, Size: 64 << 10, Iters: 40, Pairs: 4, Incast: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.WireDrop == 0 {
		t.Errorf("no frames dropped by a 200 KB buffer under 4-to-1 incast of 64 KiB WRITEs")
	}
	if res.Retrans == 0 {
		t.Errorf("the clients retransmitted nothing after %d drops", res.WireDrop)
	}
	if res.Ops != 4*40 || res.Checked == 0 || res.Corrupt != 0 {
		t.Errorf("ops %d (want 160), checked %d bytes, %d corrupt", res.Ops, res.Checked, res.Corrupt)
	}
}

// TestUnitsServeOtherQPs checks that a processing unit is not held for a
// QP whose previous step is still in another unit: deeper send queues
// must not lower throughput (they did, 77 -> 53 Mops, when a unit was
// booked ahead for a busy QP and idled until it was free; and 77 -> 69.5
// when the arbiter charged payload bytes only, so that a QP that went idle
// waited a round that lasted until the others were done).
func TestUnitsServeOtherQPs(t *testing.T) {
	p := mustProfile(t, "cx6")
	mops := func(depth int) float64 {
		res, err := Run(p, Spec{Test: WriteBW, Size: 64, QPs: 32, Threads: 16, TxDepth: depth, Iters: 1000, Warmup: 100, Metadata: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Mops
	}
	shallow, deep := mops(8), mops(32)
	if deep < 0.95*shallow {
		t.Errorf("write_bw 64 B on 32 QPs: %.1f Mops with 32 WRs outstanding per QP, %.1f with 8", deep, shallow)
	}
}

// TestRxBuffer checks the NIC's receive buffer: a server whose units are
// slow drops what overflows a small buffer (the clients retransmit and
// every byte still arrives), and drops nothing when lossless (0).
func TestRxBuffer(t *testing.T) {
	for _, buf := range []int{0, 16 << 10} {
		p := mustProfile(t, "cx6")
		p.Engine.RxPacketNs = 2000
		p.Engine.RxBufferBytes = buf
		res, err := Run(p, Spec{Test: WriteBW, Size: 4096, QPs: 4, Iters: 40})
		if err != nil {
			t.Fatal(err)
		}
		drops := res.Server.RxDrops
		switch {
		case buf == 0 && drops != 0:
			t.Errorf("lossless receive buffer dropped %d frames", drops)
		case buf > 0 && (drops == 0 || res.Retrans == 0):
			t.Errorf("%d B receive buffer behind slow units: %d drops, %d retransmitted", buf, drops, res.Retrans)
		}
		if res.Ops != 4*40 || res.Checked == 0 || res.Corrupt != 0 {
			t.Errorf("buffer %d: ops %d, checked %d bytes, %d corrupt", buf, res.Ops, res.Checked, res.Corrupt)
		}
	}
}

// TestRandomWorkloads runs seeded random workloads (every test, sizes
// around the MTU, QP counts, queue depths, incast, small receive and
// switch buffers, slow units) and checks that each finishes without
// error completions or corrupted bytes, and that a run that lost no frame
// never waited for a retransmission timeout: such a timeout would be work
// the model forgot to wake up.
var randomRuns = 40

func TestRandomWorkloads(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261129, 1))
	pick := func(v ...int) int { return v[rng.IntN(len(v))] }
	for i := range randomRuns {
		p := mustProfile(t, "cx6")
		p.Engine.RxBufferBytes = pick(0, 0, 16<<10, 256<<10)
		p.Switch.BufferBytes = pick(0, 64<<10, 1<<20)
		p.Engine.RxPacketNs = int64(pick(75, 75, 600))
		sp := Spec{
			Test:    Tests[rng.IntN(len(Tests))],
			Size:    pick(1, 64, 1000, 4096, 9000, 65536),
			QPs:     pick(1, 3, 16),
			Pairs:   pick(1, 1, 2, 3),
			Threads: pick(1, 2),
			Seed:    uint64(i),
		}
		sp.Incast = sp.Pairs > 1 && rng.IntN(2) == 0
		sp.Iters = pick(20, 60)
		if !latency(sp.Test) {
			sp.TxDepth = pick(1, 4, 32)
		}
		if sp.Test == AtomicBW {
			sp.Size = 8
		}
		name := fmt.Sprintf("%d/%s/%dB/q%d/p%d", i, sp.Test, sp.Size, sp.QPs, sp.Pairs)
		res, err := Run(p, sp)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if res.Errors != 0 || res.Corrupt != 0 {
			t.Errorf("%s: %d error completions, %d corrupt bytes", name, res.Errors, res.Corrupt)
		}
		lost := res.WireDrop + uint64(res.Client.RxDrops+res.Server.RxDrops)
		if lost == 0 && res.Timeouts != 0 {
			t.Errorf("%s: %d retransmission timeouts with no frame lost", name, res.Timeouts)
		}
	}
}

// TestFailedQPsEndTheRun: a QP whose work completes in error (here the
// transport retries run out behind a one-frame switch buffer) is in the
// error state and completes nothing more; its part of the run ends there
// and the run reports the failed completions (wc_errors) instead of
// waiting for ever.
func TestFailedQPsEndTheRun(t *testing.T) {
	p := mustProfile(t, "cx6")
	p.Switch.BufferBytes = 4200
	res, err := Run(p, Spec{Test: WriteBW, Size: 4096, Pairs: 4, Incast: true, QPs: 8, Iters: 50, Metadata: true})
	if err != nil {
		t.Fatalf("the run did not end: %v", err)
	}
	t.Logf("%d failed completions, %d timeouts, %d drops", res.Errors, res.Timeouts, res.WireDrop)
	if res.Errors == 0 || res.Timeouts == 0 {
		t.Errorf("%d failed completions and %d timeouts, want some of each (retries run out)", res.Errors, res.Timeouts)
	}
}
