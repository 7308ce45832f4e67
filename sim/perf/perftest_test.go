package perf

import (
	"bytes"
	"math"
	"net/netip"
	"testing"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/perftest"
	"github.com/rnic/rnic/sim/vclock"
)

// TestSameAsPerftest: rnic sim's latency workloads and package
// perftest's, run in virtual time on the same profile, see the same
// minimum round trip: the simulator's host threads post, poll and wait
// for a peer's WRITE as perftest's programs do.
func TestSameAsPerftest(t *testing.T) {
	for _, test := range []Test{WriteLat, ReadLat, SendLat} {
		t.Run(test.String(), func(t *testing.T) {
			vc, err := vclock.New(vclock.Options{Profile: "cx6", Seed: 1, WatchWrites: true})
			if err != nil {
				t.Fatal(err)
			}
			open := func(a netip.Addr) (*rnic.Device, error) { return rnic.Open(rnic.Options{Clock: vc, Addr: a}) }
			sa, ca := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
			pa, pb := vc.Pipe()
			var sout, cout bytes.Buffer
			cfg := perftest.NewConfig(test)
			cfg.Size, cfg.Iters = 8, 500
			sc, cc := cfg, cfg
			sc.Clock, sc.ExchangeConn, sc.Local, sc.Out, sc.Open = vc, pa, sa, &sout, open
			cc.Clock, cc.ExchangeConn, cc.Local, cc.Out, cc.Open, cc.Peer = vc, pb, ca, &cout, open, sa.String()
			var res *perftest.Result
			var srvErr, cliErr error
			err = vc.Run(func() {
				server := vc.Go(func() { _, srvErr = perftest.Run(t.Context(), sc) })
				res, cliErr = perftest.Run(t.Context(), cc)
				if err := server.Wait(); err != nil {
					t.Errorf("server thread: %v", err)
				}
			})
			if err != nil || srvErr != nil || cliErr != nil {
				t.Fatalf("clock: %v\nserver: %v\nclient: %v\nserver output:\n%s\nclient output:\n%s", err, srvErr, cliErr, sout.String(), cout.String())
			}
			sim, err := Run(mustProfile(t, "cx6"), Spec{Test: test, Size: 8, Iters: 500})
			if err != nil {
				t.Fatal(err)
			}
			if ns := res.Lat[0].Min * 1000; math.Abs(ns-float64(sim.LatMin)) > 2 {
				t.Errorf("%v minimum: perftest %.0f ns, rnic sim %d ns", test, ns, sim.LatMin)
			}
		})
	}
}
