package experiment

import (
	"encoding/csv"
	"io"
	"strconv"
)

// WritePortsCSV writes the fabric's counters after each run of the
// sweep, a line per egress port and priority that carried, dropped,
// marked or paused anything: where an incast queued, dropped, marked
// and paused, hop by hop (perf.Result.Ports). Columns: run, label, node
// (a switch, or "host N" for a host's uplink), port, peer (the far end),
// priority, tx_frames, tx_bytes, drops, headroom_drops, ecn_marked,
// max_queue_bytes, pauses_sent, resumes_sent, pauses_received,
// resumes_received, paused_us.
func WritePortsCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"run", "label", "node", "port", "peer", "priority", "tx_frames", "tx_bytes", "drops", "headroom_drops",
		"ecn_marked", "max_queue_bytes", "pauses_sent", "resumes_sent", "pauses_received", "resumes_received", "paused_us"})
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, run := range groupRuns(rows) {
		r := firstResult(run)
		if r == nil {
			continue
		}
		label := runLabel(r)
		for _, p := range r.Result.Ports {
			for prio, q := range p.Stats.Queues {
				if q.TxFrames == 0 && q.Drops == 0 && q.ECNMarked == 0 && q.PausesSent == 0 && q.PausesReceived == 0 {
					continue
				}
				cw.Write([]string{strconv.Itoa(r.Index), label, p.Node, strconv.Itoa(p.Port), p.Peer, strconv.Itoa(prio),
					u(q.TxFrames), u(q.TxBytes), u(q.Drops), u(q.HeadroomDrops), u(q.ECNMarked), strconv.Itoa(q.MaxQueueBytes),
					u(q.PausesSent), u(q.ResumesSent), u(q.PausesReceived), u(q.ResumesReceived),
					strconv.FormatFloat(float64(q.PausedTime)/1e3, 'f', 3, 64)})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
