package perf

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/rnic/rnic"

	"github.com/rnic/rnic/sim"
	"github.com/rnic/rnic/sim/profile"
	"github.com/rnic/rnic/sim/vclock"
)

// Stage is one step in the life of an operation, as the model scheduled it.
type Stage struct {
	At    sim.Time // since the host started posting
	Delta sim.Time // since the previous stage
	Where string   // "client", "server"
	What  string
}

// Breakdown follows one small RDMA WRITE through the model, from the
// client's post through the server placing the data (what write_lat
// measures: half its round trip) to the ACK and the client's completion,
// and returns its stages. It runs a few WRITEs one at a time first (warm
// caches) and follows the last; nothing else is in flight.
func Breakdown(p *profile.HardwareProfile, size int) ([]Stage, error) {
	spec := Spec{Test: WriteBW, Size: size, Iters: 5, Warmup: 1, TxDepth: 1, Inline: 220}
	spec.Seed = 1
	r, err := single(p, spec)
	if err != nil {
		return nil, err
	}
	type rec struct {
		at    sim.Time
		where string
		what  string
	}
	var recs []rec
	client := r.clients[0].dev
	name := func(d *rnic.Device) string {
		if d == client {
			return "client"
		}
		return "server"
	}
	for _, d := range []*rnic.Device{client, r.servers[0].dev} {
		vclock.Trace(r.vc, d, func(at time.Duration, stage string, _ uint32) {
			recs = append(recs, rec{sim.Time(at), name(d), stage})
		})
	}
	r.trace = func(at sim.Time, h *host, what string) { recs = append(recs, rec{at, name(h.dev), what}) }
	if _, err := r.w.run(); err != nil {
		return nil, err
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].at < recs[j].at })
	// The last round trip starts with the client's last post; its first
	// half ends when the server's CPU sees the data.
	start := -1
	for i, x := range recs {
		if x.where == "client" && x.what == "host starts posting the WRITE" {
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("perf: breakdown found no post")
	}
	var out []Stage
	t0 := recs[start].at
	prev := t0
	for _, x := range recs[start:] {
		out = append(out, Stage{At: x.at - t0, Delta: x.at - prev, Where: x.where, What: x.what})
		prev = x.at
		if x.where == "client" && x.what == "host polls the completion" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("perf: breakdown: the client never saw the completion")
}

// WriteBreakdown prints stages as a table.
func WriteBreakdown(w io.Writer, stages []Stage) {
	fmt.Fprintf(w, "%10s %10s  %-7s %s\n", "at[ns]", "+[ns]", "where", "stage")
	for _, s := range stages {
		fmt.Fprintf(w, "%10d %10d  %-7s %s\n", int64(s.At), int64(s.Delta), s.Where, s.What)
	}
}
