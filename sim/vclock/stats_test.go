package vclock

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// TestStats: the public statistics are a device of the clock's only; a
// prefetch (PD.AdviseMR) shows in them as the MPT and MTT reads it made,
// and in the step observer not at all (it is the host's call, no step of
// the NIC's pipeline); the counters are the device's, by name.
func TestStats(t *testing.T) {
	vc, err := New(Options{Profile: "cx6", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(Options{Profile: "cx6", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rnic.Open(rnic.Options{Clock: vc, Addr: netip.MustParseAddr("10.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	port, _, err := mem.Pipe(netip.MustParseAddr("10.0.9.1"), netip.MustParseAddr("10.0.9.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	wall, err := rnic.Open(rnic.Options{Link: port})
	if err != nil {
		t.Fatal(err)
	}
	defer wall.Close()
	for name, ok := range map[string]bool{
		"another clock's ReadStats":    func() bool { _, ok := ReadStats(other, dev, 0); return ok }(),
		"a wall device's ReadStats":    func() bool { _, ok := ReadStats(vc, wall, 0); return ok }(),
		"another clock's ObserveSteps": ObserveSteps(other, dev, func(*Step) {}),
		"a wall device's ObserveRates": ObserveRates(vc, wall, func(uint32, time.Duration, float64) {}),
		"a wall device's Trace":        Trace(vc, wall, func(time.Duration, string, uint32) {}),
	} {
		if ok {
			t.Errorf("%s: ok for a device that is not the clock's", name)
		}
	}

	steps := 0
	if !ObserveSteps(vc, dev, func(*Step) { steps++ }) {
		t.Fatal("ObserveSteps refused the clock's own device")
	}
	before, ok := ReadStats(vc, dev, 0)
	if !ok {
		t.Fatal("ReadStats refused the clock's own device")
	}
	if _, ok := before.Counters["tx_packets"]; !ok {
		t.Errorf("no tx_packets among the counters: %v", before.Counters)
	}
	err = vc.Run(func() {
		pd, err := dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		mr, err := pd.RegMR(buf, rnic.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		if err := pd.AdviseMR(rnic.AdvisePrefetchWrite, []rnic.SGE{mr.SGE(0, len(buf))}); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := ReadStats(vc, dev, vc.Now())
	if after.MPTMiss != before.MPTMiss+1 || after.MTTMiss <= before.MTTMiss {
		t.Errorf("a prefetch of 1 MiB: MPT misses %v → %v, MTT misses %v → %v; want one more MPT miss and some MTT misses",
			before.MPTMiss, after.MPTMiss, before.MTTMiss, after.MTTMiss)
	}
	if steps != 0 {
		t.Errorf("the step observer saw %d steps of an idle NIC", steps)
	}
}
