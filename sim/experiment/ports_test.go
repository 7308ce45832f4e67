package experiment

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/fabric"
	"github.com/rnic/rnic/sim/perf"
)

// TestWritePortsCSV: one line per port and priority that did anything,
// once per run (the tenants of a run share the fabric), idle ones left
// out.
func TestWritePortsCSV(t *testing.T) {
	var busy fabric.PortStats
	busy.Queues[3] = fabric.QueueStats{TxFrames: 10, TxBytes: 10000, Drops: 1, PausesSent: 2, MaxQueueBytes: 5000}
	busy.Queues[0] = fabric.QueueStats{ECNMarked: 4}
	ports := []fabric.PortInfo{{Node: "switch", Port: 0, Peer: "host 0", Stats: busy}, {Node: "host 1", Peer: "switch"}}
	res := &perf.Result{Ports: ports}
	rows := []Row{
		{Point: Point{Index: 0, Label: "scenario tenant=A"}, Tenant: &perf.Tenant{Name: "A"}, Result: res},
		{Point: Point{Index: 0, Label: "scenario tenant=B"}, Tenant: &perf.Tenant{Name: "B"}, Result: res},
	}
	var b bytes.Buffer
	if err := WritePortsCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `run,label,node,port,peer,priority,tx_frames,tx_bytes,drops,headroom_drops,ecn_marked,max_queue_bytes,pauses_sent,resumes_sent,pauses_received,resumes_received,paused_us
0,scenario,switch,0,host 0,0,0,0,0,0,4,0,0,0,0,0,0.000
0,scenario,switch,0,host 0,3,10,10000,1,0,0,5000,2,0,0,0,0.000
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Count(b.String(), "\n") != 3 {
		t.Errorf("the run's ports written more than once")
	}
}
