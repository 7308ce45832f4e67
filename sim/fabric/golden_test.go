package fabric

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGoldenIncast pins a small incast, event by event: three senders,
// four 1000 B frames each, a 6000 B switch buffer and probabilistic ECN
// marking. Any change to timing, queueing, marking or the order of random
// draws shows up as a diff. Regenerate with -update after checking that
// the change is intended.
func TestGoldenIncast(t *testing.T) {
	var out bytes.Buffer
	cfg := cfg100G(200)
	cfg.Switch.BufferBytes = 6000
	cfg.Switch.Latency = 300
	cfg.Switch.ECN = ECNConfig{Enabled: true, MinBytes: 1000, MaxBytes: 5000, MaxProbability: 0.5}
	s, _, ports, sinks := build(t, 2024, cfg, 4)
	s.SetTrace(sim.WriterTrace(&out))
	for i := 1; i < 4; i++ {
		for j := range 4 {
			ports[i].SendFrame(Frame{Len: 1000, Dst: 0, ECN: wire.ECNECT0, Meta: Meta{PSN: uint32(10*i + j)}})
		}
	}
	s.Run()
	fmt.Fprintln(&out, "arrivals:")
	for _, a := range sinks[0].got {
		fmt.Fprintln(&out, a)
	}
	fmt.Fprintf(&out, "switch port 0: %+v\n", portTotals(ports[0].SwitchPortStats()))
	for i := 1; i < 4; i++ {
		fmt.Fprintf(&out, "uplink %d: %+v\n", i, portTotals(ports[i].UplinkStats()))
	}

	path := filepath.Join("testdata", "incast.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("output differs from %s (run with -update if intended):\n%s", path, out.String())
	}
}

// portTotals drops the per-priority breakdown, for a shorter print.
func portTotals(st PortStats) PortStats {
	st.Queues = [Priorities]QueueStats{}
	return st
}
