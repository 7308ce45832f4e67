package fabric

import (
	"github.com/rnic/rnic/internal/mix"
	"github.com/rnic/rnic/sim"
)

// Switch is one switch of the fabric: ports, routes towards every leaf,
// and (with a shared buffer) the memory management unit that admits
// frames, keeps PFC's per-ingress accounting and sends pause frames.
type Switch struct {
	f      *Fabric
	id     int
	name   string
	leaf   int // index among the leaves, -1 if hosts never attach here
	ports  []swPort
	toLeaf [][]int32 // next-hop ports towards each leaf (ECMP group)
	seed   uint64    // ECMP hash seed, different per switch
	// MMU state (shared buffer): bytes held in the shared pool, and
	// how many ingress priorities have a pause in force upstream.
	used    int
	nXoff   int
	hdrmAll int // headroom set aside: per port and lossless priority
}

// swPort is one port of a switch: its egress, the egress at the far end
// whose frames arrive here (which PFC pauses), and the ingress accounting.
type swPort struct {
	out, in *egress
	peer    *Switch // the switch at the far end, nil for a host
	host    *Port   // the host at the far end, nil for a switch
	ing     [Priorities]ingress
}

// ingress is one priority of a switch port's ingress, as the MMU
// accounts it for PFC.
type ingress struct {
	shared, hdrm int  // bytes of its frames in the shared pool and in headroom
	xoff         bool // a pause is in force upstream
}

// SwitchStats count one switch's buffer.
type SwitchStats struct {
	Name string
	// MaxSharedBytes is the most the shared pool held; Drops the frames
	// the switch dropped (on all ports).
	MaxSharedBytes int
	Drops          uint64
}

// Where the MMU holds a queued frame's bytes.
const (
	poolNone     uint8 = iota // not accounted (no shared buffer)
	poolShared                // the shared pool
	poolHeadroom              // the ingress priority's headroom
)

func (f *Fabric) newSwitch(name string) *Switch {
	s := &Switch{f: f, id: len(f.switches), name: name, leaf: -1}
	s.seed = mix.Mix64(uint64(s.id)*0x9e3779b97f4a7c15 + f.s.Seed())
	f.switches = append(f.switches, s)
	return s
}

// pool is the shared buffer left when headroom is set aside.
func (s *Switch) pool() int { return max(s.f.cfg.Switch.SharedBufferBytes-s.hdrmAll, 0) }

// threshold is a dynamic threshold: alpha times the free shared buffer.
func (s *Switch) threshold(alpha float64) int {
	return int(alpha * float64(s.pool()-s.used))
}

// lossless reports whether priority p is PFC-protected.
func (f *Fabric) lossless(p uint8) bool {
	c := &f.cfg.Switch.PFC
	return c.Enabled && c.Priorities&(1<<p) != 0
}

// nextPort returns the port a frame for host dst leaves switch s by.
func (s *Switch) nextPort(fr *Frame) int32 {
	h := s.f.hosts[fr.Dst]
	if h.sw == s {
		return h.swPort
	}
	cands := s.toLeaf[h.sw.leaf]
	if len(cands) == 1 {
		return cands[0]
	}
	ent := uint64(fr.Entropy)
	if ent == 0 {
		ent = uint64(fr.Meta.QPN)
	}
	h64 := mix.Mix64(s.seed ^ uint64(fr.Src)<<40 ^ uint64(fr.Dst)<<16 ^ ent)
	return cands[h64%uint64(len(cands))]
}

// receive takes a frame whose last bit arrived at port in of switch s
// now, and forwards it to its output port.
func (f *Fabric) receive(s *Switch, in int32, fr Frame) {
	now := f.s.Now()
	e := s.ports[s.nextPort(&fr)].out
	if !e.scheduled {
		f.offerAnalytic(e, now+f.cfg.Switch.Latency, fr)
		return
	}
	q := queued{f: fr, ready: now + f.cfg.Switch.Latency, inPort: in}
	if !f.admit(s, e, &q) {
		f.drop(fr)
		return
	}
	e.mark(&q.f, e.sched.clsBytes[fr.Prio], f.s.Rand())
	f.offer(e, q)
	if q.pool != poolNone && f.lossless(fr.Prio) {
		f.checkPause(s, in, fr.Prio)
	}
}

// offerAnalytic puts a frame on an analytic egress at time at.
func (f *Fabric) offerAnalytic(e *egress, at sim.Time, fr Frame) {
	arrive, ok := e.enqueue(at, fr, f.s.Rand())
	if !ok {
		f.drop(fr)
		return
	}
	f.armArrival(e, arrive)
}

func (f *Fabric) drop(fr Frame) {
	if fr.Buf != nil {
		fr.Buf.Release()
	}
}

// admit decides whether switch s takes q for egress e, counting a refusal
// on e, and accounts its bytes in the MMU. Without a shared buffer the
// port's own limit applies. With one, a lossless frame is admitted
// against its ingress priority: to the shared pool while that stays
// under its dynamic threshold (PFC.Alpha × free pool), else to the
// priority's headroom, dropped only when that overflows; a lossy frame
// against its egress queue: dropped once the queue reaches EgressAlpha ×
// free pool, or the pool is full.
func (f *Fabric) admit(s *Switch, e *egress, q *queued) bool {
	n, p := q.f.Len, q.f.Prio
	cfg := &f.cfg.Switch
	if cfg.SharedBufferBytes == 0 {
		if e.limit > 0 && e.bufBytes+n > e.limit {
			e.countDrop(q.f)
			return false
		}
		return true
	}
	if f.lossless(p) {
		ing := &s.ports[q.inPort].ing[p]
		if ing.hdrm == 0 && ing.shared+n <= s.threshold(cfg.PFC.Alpha) && s.used+n <= s.pool() {
			ing.shared += n
			s.used += n
			q.pool = poolShared
			return true
		}
		if ing.hdrm+n > cfg.PFC.HeadroomBytes {
			e.countDrop(q.f)
			e.st.Queues[p].HeadroomDrops++
			return false
		}
		ing.hdrm += n
		q.pool = poolHeadroom
		return true
	}
	if s.used+n > s.pool() || cfg.EgressAlpha > 0 && e.sched.clsBytes[p]+n > s.threshold(cfg.EgressAlpha) {
		e.countDrop(q.f)
		return false
	}
	s.used += n
	q.pool = poolShared
	return true
}

// release returns a departed frame's bytes to the MMU of the switch that
// owns e, and resumes the ingress priorities that may go again.
func (f *Fabric) release(e *egress, q *queued) {
	s := e.owner
	if s == nil || q.pool == poolNone {
		return
	}
	n, p := q.f.Len, q.f.Prio
	if q.pool == poolShared {
		s.used -= n
	}
	if !f.lossless(p) {
		return
	}
	ing := &s.ports[q.inPort].ing[p]
	if q.pool == poolHeadroom {
		ing.hdrm -= n
	} else {
		ing.shared -= n
	}
	if s.nXoff == 0 {
		return
	}
	// The free pool grew, so every paused ingress's threshold rose: look
	// at all of them, not only the one the frame came in by.
	off := f.cfg.Switch.PFC.ResumeOffsetBytes
	thr := s.threshold(f.cfg.Switch.PFC.Alpha)
	for pi := range s.ports {
		for pr := range Priorities {
			g := &s.ports[pi].ing[pr]
			// An ingress with nothing held resumes even if the
			// threshold is under the offset: nothing it sends can be
			// too much until it has sent something.
			if g.xoff && g.hdrm == 0 && (g.shared == 0 || g.shared+off <= thr) {
				f.sendPFC(s, int32(pi), uint8(pr), false)
			}
		}
	}
}

// checkPause sends a pause upstream for ingress priority p of port in if
// it has crossed its threshold.
func (f *Fabric) checkPause(s *Switch, in int32, p uint8) {
	g := &s.ports[in].ing[p]
	if !g.xoff && (g.hdrm > 0 || g.shared >= s.threshold(f.cfg.Switch.PFC.Alpha)) {
		f.sendPFC(s, in, p, true)
	}
}

// pfcFrameBytes is a PFC frame's IP-less length: a 64-byte MAC control
// frame, which WireBytes pads from zero.
const pfcFrameBytes = 0

// sendPFC sends a pause (xoff) or resume for priority p out of port in of
// switch s, to the egress whose frames arrive there. A PFC frame goes
// ahead of queued data but waits for the frame being transmitted; it
// takes its own serialization and the cable's propagation to arrive.
func (f *Fabric) sendPFC(s *Switch, in int32, p uint8, xoff bool) {
	sp := &s.ports[in]
	g := &sp.ing[p]
	g.xoff = xoff
	out := sp.out
	if xoff {
		s.nXoff++
		out.st.PausesSent++
		out.st.Queues[p].PausesSent++
	} else {
		s.nXoff--
		out.st.ResumesSent++
		out.st.Queues[p].ResumesSent++
	}
	at := max(f.s.Now(), out.tx.FreeAt()) + sim.Time((out.tx.SerializationPs(pfcFrameBytes)+999)/1000) + out.tx.Config().Propagation
	arg := uint64(uint32(sp.in.id)) | uint64(p)<<32
	if xoff {
		arg |= 1 << 40
	}
	f.s.At(at, f, kindPFC, arg)
}

// pfcArrive applies a PFC frame to the egress it reached.
func (f *Fabric) pfcArrive(e *egress, p uint8, xoff bool) {
	st, now := e.sched, f.s.Now()
	qs := &e.st.Queues[p]
	if xoff {
		e.st.PausesReceived++
		qs.PausesReceived++
		if !st.paused[p] {
			st.paused[p], st.pausedAt[p] = true, now
		}
		return
	}
	e.st.ResumesReceived++
	qs.ResumesReceived++
	if st.paused[p] {
		st.paused[p] = false
		d := now - st.pausedAt[p]
		e.st.PausedTime += d
		qs.PausedTime += d
		f.armTx(e, now)
		if e.onResume != nil {
			e.onResume()
		}
	}
}

// offer queues a frame on a scheduled egress and wakes its transmitter.
func (f *Fabric) offer(e *egress, q queued) {
	st := e.sched
	p := q.f.Prio
	st.cls[p].push(q)
	st.clsBytes[p] += q.f.Len
	st.waitPs[p] += e.tx.SerializationPs(q.f.Len)
	e.bufBytes += q.f.Len
	if e.watch != nil {
		e.watch(f.s.Now(), e.bufBytes)
	}
	e.st.MaxQueueBytes = max(e.st.MaxQueueBytes, e.bufBytes)
	qs := &e.st.Queues[p]
	qs.MaxQueueBytes = max(qs.MaxQueueBytes, st.clsBytes[p])
	if !st.busy {
		f.armTx(e, q.ready)
	}
}

// armTx makes sure the transmitter of e looks for work at time at (or
// when the frame it is sending is done, if later). One event is pending
// at a time; an earlier need supersedes it by generation.
func (f *Fabric) armTx(e *egress, at sim.Time) {
	st := e.sched
	at = max(at, f.s.Now())
	if st.busy {
		return // the frame being sent ends with an event of its own
	}
	if st.txArmed && st.txAt <= at {
		return
	}
	st.txGen++
	st.txArmed, st.txAt = true, at
	f.s.At(at, f, kindTxDone, uint64(uint32(e.id))|uint64(st.txGen)<<32)
}

// txDone is a scheduled egress's transmitter event: the frame being sent
// has left (its bytes leave the buffer), and the next one starts — the
// highest priority that is not paused and has a frame ready.
func (f *Fabric) txDone(e *egress, gen uint32) {
	st := e.sched
	if gen != st.txGen {
		return // superseded
	}
	st.txArmed = false
	now := f.s.Now()
	if st.busy {
		st.busy = false
		cur := st.cur
		st.cur = queued{}
		e.bufBytes -= cur.f.Len
		st.clsBytes[cur.f.Prio] -= cur.f.Len
		f.release(e, &cur)
		if e.watch != nil {
			e.watch(now, e.bufBytes)
		}
	}
	next := sim.Time(-1)
	for p := Priorities - 1; p >= 0; p-- {
		if st.paused[p] || st.cls[p].len() == 0 {
			continue
		}
		head := st.cls[p].at(0)
		if head.ready > now {
			if next < 0 || head.ready < next {
				next = head.ready
			}
			continue
		}
		q := st.cls[p].pop()
		st.waitPs[p] -= e.tx.SerializationPs(q.f.Len)
		e.waitNs += now - q.ready
		done, arrive := e.tx.Send(now, q.f.Len)
		qs := &e.st.Queues[p]
		qs.TxFrames++
		qs.TxBytes += uint64(q.f.Len)
		e.q.push(inFlight{f: q.f, done: done, arrive: arrive})
		f.armArrival(e, arrive)
		st.cur, st.busy = q, true
		st.cur.f.Buf = nil // the cable holds the frame; cur keeps its accounting
		st.txGen++
		st.txArmed, st.txAt = true, done
		f.s.At(done, f, kindTxDone, uint64(uint32(e.id))|uint64(st.txGen)<<32)
		return
	}
	if next >= 0 {
		f.armTx(e, next)
	}
}

// armArrival schedules the arrival event of e's oldest frame on the cable
// if none is pending.
func (f *Fabric) armArrival(e *egress, arrive sim.Time) {
	if !e.armed {
		e.armed = true
		f.s.At(arrive, f, kindArrive, uint64(e.id))
	}
}
