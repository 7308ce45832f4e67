package perftest

import (
	"fmt"
	"io"
	"time"

	"github.com/rnic/rnic"
)

// clock gives the time stamps of a run: nanoseconds since t0 on the
// monotonic clock (perftest's get_cycles), or since v0 on a virtual
// clock.
type clock struct {
	t0 time.Time
	vc *rnic.VirtualClock
	v0 time.Duration
}

func (s *session) newClock() clock {
	c := clock{t0: time.Now(), vc: s.p.Clock}
	if c.vc != nil {
		c.v0 = c.vc.Now()
	}
	return c
}

func (c clock) now() int64 {
	if c.vc != nil {
		return int64(c.vc.Now() - c.v0)
	}
	return int64(time.Since(c.t0))
}

// abs returns a time stamp as the clock's own time: the virtual clock's
// Now then, or on the wall clock the time since the run began.
func (c clock) abs(ns int64) time.Duration { return c.v0 + time.Duration(ns) }

// at returns the wall time of a time stamp.
func (c clock) at(ns int64) time.Time { return c.t0.Add(time.Duration(ns)) }

// phase is a -D run's state. perftest moves through them with alarm():
// the first and the last margin seconds are not measured.
type phase int

const (
	phaseStart  phase = iota // warming up (margin)
	phaseSample              // measuring
	phaseStop                // cooling down (margin)
	phaseEnd                 // done
)

// durTimer computes a -D run's phase from the time since it began
// (perftest's catch_alarm, without signals).
type durTimer struct {
	on            bool
	started       bool
	begin         int64
	margin, total int64 // ns
}

func newDurTimer(p *params) *durTimer {
	return &durTimer{on: p.duration, margin: int64(p.margin) * int64(time.Second), total: int64(p.Duration) * int64(time.Second)}
}

// start begins the run at now; later calls do nothing.
func (d *durTimer) start(now int64) {
	if !d.started {
		d.started, d.begin = true, now
	}
}

// phase returns the phase at now (phaseStart until start is called).
func (d *durTimer) phase(now int64) phase {
	if !d.started {
		return phaseStart
	}
	switch t := now - d.begin; {
	case t < d.margin:
		return phaseStart
	case t < d.total-d.margin:
		return phaseSample
	case t < d.total:
		return phaseStop
	}
	return phaseEnd
}

// ended reports whether a -D run is over (never true in iterations mode).
func (d *durTimer) ended(now int64) bool { return d.on && d.phase(now) == phaseEnd }

// sampling reports whether now is in the measured part of a -D run.
func (d *durTimer) sampling(now int64) bool { return d.on && d.phase(now) == phaseSample }

// window returns the measured part's bounds.
func (d *durTimer) window() (from, to int64) { return d.begin + d.margin, d.begin + d.total - d.margin }

// end returns the time stamp at which the run ends.
func (d *durTimer) end() int64 { return d.begin + d.total }

// progress prints a line per second on long runs, so that a user sees a
// big -n or a -D run move.
type progress struct {
	w     io.Writer
	name  string
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, name string) *progress {
	now := time.Now()
	return &progress{w: w, name: name, start: now, last: now}
}

// tick reports done of total iterations (total 0: a -D run of secs).
func (p *progress) tick(done uint64, total uint64, secs int) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	el := now.Sub(p.start).Seconds()
	if total == 0 {
		fmt.Fprintf(p.w, " %s: %.0f of %d s, %d iterations\n", p.name, el, secs, done)
		return
	}
	fmt.Fprintf(p.w, " %s: %d of %d iterations (%.0f%%), %.0f s\n", p.name, done, total, 100*float64(done)/float64(total), el)
}
