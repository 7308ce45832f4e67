package atu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// pickKey returns a key for a control-path call: usually the key of a live
// object the filter accepts, otherwise a stale key, a live key with a wrong
// variant, or an arbitrary key.
func pickKey(rng *rand.Rand, m *model, accept func(*mobj) bool) uint32 {
	var cands []uint32
	for _, k := range m.liveKeys() {
		if accept(m.objs[k>>8]) {
			cands = append(cands, k)
		}
	}
	switch x := rng.IntN(10); {
	case x < 7 && len(cands) > 0:
		return cands[rng.IntN(len(cands))]
	case x < 8 && len(m.stale) > 0:
		return m.stale[rng.IntN(len(m.stale))]
	case x < 9 && len(cands) > 0:
		return cands[rng.IntN(len(cands))] ^ (1 + rng.Uint32N(255))
	default:
		return rng.Uint32N(uint32(m.maxMR)+2)<<8 | rng.Uint32N(256)
	}
}

func isMR(o *mobj) bool { return o.kind == KindMR }
func isMW(o *mobj) bool { return o.kind != KindMR }

// badSpec returns s broken in one of the ways RegMR must refuse (IBTA Vol 1
// §10.6: rights and ranges a registration must not accept).
func badSpec(rng *rand.Rand, s MRSpec) MRSpec {
	switch rng.IntN(5) {
	case 0:
		s.Buf = s.Buf[:0]
	case 1:
		s.Access |= 1 << (6 + rng.IntN(26))
	case 2:
		s.Access = s.Access&^LocalWrite | RemoteWrite
	case 3:
		s.Access = s.Access&^LocalWrite | RemoteAtomic
	case 4:
		s.PageShift = []uint8{1, 11, 31, 63, 255}[rng.IntN(5)]
	}
	return s
}

// TestModelRandomOps runs random sequences of every ATU operation
// (register, deregister, allocate, bind, invalidate and free windows,
// translate, read, look up) against the oracle, under every cache shape.
// MaxMR is small so that indices are reused constantly (stale keys must
// keep faulting after reuse, IBTA Vol 1 §10.6: a deregistered key is
// invalid, and the key variant exists so that its index can be reused)
// and the table runs full (ErrNoResources).
func TestModelRandomOps(t *testing.T) {
	const (
		maxMR = 20
		steps = 6000
	)
	seen := map[string]int{} // outcomes, to check the generator reaches them
	see := func(op string, v any) { seen[fmt.Sprintf("%s:%v", op, v)]++ }
	for _, cs := range cacheShapes {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", cs.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0x0b5))
				u := newATU(t, maxMR, cs)
				m := newModel(maxMR)
				var segs []Seg
				for step := range steps {
					switch x := rng.IntN(100); {
					case x < 8:
						s := randSpec(rng, 1+rng.Uint32N(numPD))
						if rng.IntN(8) == 0 {
							s = badSpec(rng, s)
						}
						_, err := register(t, u, m, s)
						see("reg", errClass(err))
					case x < 16:
						k := pickKey(rng, m, isMR)
						var want error
						switch o := m.live(k); {
						case o == nil || o.kind != KindMR:
							want = ErrNoKey
						case m.refs(k>>8) > 0:
							// IBTA Vol 1 §10.6: a region with
							// windows bound to it cannot be
							// deregistered.
							want = ErrBusy
						}
						if err := u.DeregMR(k); errClass(err) != want {
							t.Fatalf("step %d: DeregMR(%#x) = %v, want %v", step, k, err, want)
						}
						if want == nil {
							delete(m.objs, k>>8)
							m.retire(k)
						}
						see("dereg", want)
					case x < 21:
						_, err := allocMW(t, u, m, 1+rng.Uint32N(numPD), KindMW1+Kind(rng.IntN(2)))
						see("alloc", errClass(err))
					case x < 26:
						k := pickKey(rng, m, isMW)
						if o := m.objs[k>>8]; o != nil && o.kind != KindMR && o.key != k {
							// DeallocMW ignores the variant; see
							// TestDeallocMWStaleKey.
							break
						}
						var want error
						o := m.live(k)
						if o == nil || o.kind == KindMR {
							want = ErrNoKey
						}
						if err := u.DeallocMW(k); errClass(err) != want {
							t.Fatalf("step %d: DeallocMW(%#x) = %v, want %v", step, k, err, want)
						}
						if want == nil {
							if o.bound {
								see("dealloc", "bound")
							}
							delete(m.objs, k>>8)
							m.retire(k)
						}
						see("dealloc", want)
					case x < 38:
						var w, mr *mobj
						if k := pickKey(rng, m, isMW); rng.IntN(10) != 0 {
							w = m.objs[k>>8]
						}
						if w != nil && w.kind == KindMR {
							w = nil
						}
						if w != nil {
							if mrs := m.regionsIn(w.pd); len(mrs) > 0 && rng.IntN(6) != 0 {
								mr = mrs[rng.IntN(len(mrs))]
							}
						}
						if mr == nil && rng.IntN(3) != 0 {
							mr = m.objs[pickKey(rng, m, isMR)>>8]
							if mr != nil && mr.kind != KindMR {
								mr = nil
							}
						}
						b := randBind(rng, w, mr)
						if m.contested(b) {
							break
						}
						if w != nil {
							see("bind"+fmt.Sprint(w.kind), bind(t, u, m, b))
						} else {
							see("bind", bind(t, u, m, b))
						}
					case x < 46:
						accept := func(o *mobj) bool { return true }
						if rng.IntN(3) != 0 {
							accept = func(o *mobj) bool { return o.kind != KindMR && o.bound }
						}
						k := pickKey(rng, m, accept)
						pd, qpn := 1+rng.Uint32N(numPD), firstQP+rng.Uint32N(numQP)
						if o := m.objs[k>>8]; o != nil {
							if rng.IntN(4) != 0 {
								pd = o.pd
							}
							if rng.IntN(3) != 0 {
								qpn = o.qpn
							}
						}
						remote := rng.IntN(2) == 0
						if o := m.live(k); o != nil && o.kind == KindMW1 && !remote {
							break // see TestBugInvalidateType1Local
						}
						want := m.invalidateFault(k, pd, qpn, remote)
						if f := u.Invalidate(k, pd, qpn, remote); f != want {
							t.Fatalf("step %d: Invalidate(%#x, pd %d, qp %d, remote %v) = %v, want %v", step, k, pd, qpn, remote, f, want)
						}
						if want == OK {
							m.objs[k>>8].bound = false
						}
						see(fmt.Sprintf("inval(remote=%v)", remote), want)
					case x < 51:
						r := randRequest(rng, m, m.liveKeys(), m.stale)
						r.Len = min(r.Len, 1<<15)
						checkRead(t, u, m, r.PD, r.Key, r.VA, int(r.Len))
					case x < 53:
						checkLookup(t, u, m)
					default:
						live := m.liveKeys()
						if len(live) == 0 {
							break
						}
						r := randRequest(rng, m, live, m.stale)
						want := m.translate(&r)
						var f Fault
						segs, f = u.Translate(&r, segs[:0])
						if f != want.f {
							t.Fatalf("step %d: Translate(%+v) = %v, want %v", step, r, f, want.f)
						}
						if f == OK {
							checkSegs(t, u, &r, segs, want)
						}
						see("xlate", f)
					}
					if step%25 == 0 {
						m.checkStats(t, u)
					}
				}
				m.checkStats(t, u)
			})
		}
	}
	if t.Failed() {
		return
	}
	for _, o := range []string{
		"reg:<nil>", "reg:" + ErrInvalid.Error(), "reg:" + ErrNoResources.Error(),
		"dereg:<nil>", "dereg:" + ErrNoKey.Error(), "dereg:" + ErrBusy.Error(),
		"alloc:<nil>", "alloc:" + ErrNoResources.Error(),
		"dealloc:<nil>", "dealloc:bound", "dealloc:" + ErrNoKey.Error(),
		"bind2:ok", "bind3:ok", "bind:invalid key", "bind2:invalid key", "bind3:invalid key",
		"bind2:protection domain mismatch", "bind2:out of bounds", "bind2:access rights violation",
		"inval(remote=false):ok", "inval(remote=true):ok", "inval(remote=true):window bound to another QP",
		"inval(remote=true):window key used as local key", "inval(remote=false):window key used as local key",
		"inval(remote=false):invalid key", "inval(remote=false):protection domain mismatch",
	} {
		if seen[o] == 0 {
			t.Errorf("outcome %q never occurred", o)
		}
	}
	for f := OK; f <= FaultKind; f++ {
		if seen["xlate:"+f.String()] == 0 {
			t.Errorf("Translate never returned %v", f)
		}
	}
	t.Logf("outcomes: %v", seen)
}

// checkRead compares Read with the oracle, and checks that it leaves the
// NIC's caches and counters alone: it models the host CPU copying inline
// data, which goes through the host's tables, not the NIC's SRAM.
func checkRead(tb testing.TB, u *ATU, m *model, pd, key uint32, va uint64, n int) {
	tb.Helper()
	wantF, want := m.read(pd, key, va, n)
	dst := make([]byte, n)
	for i := range dst {
		dst[i] = 0xee
	}
	before := u.Stats()
	f := u.Read(pd, key, va, dst)
	if after := u.Stats(); after != before {
		tb.Fatalf("Read changed the NIC's statistics:\n%+v\n%+v", before, after)
	}
	if f != wantF {
		tb.Fatalf("Read(pd %d, key %#x, [%#x, +%d)) = %v, want %v", pd, key, va, n, f, wantF)
	}
	if f == OK && string(dst) != string(want) {
		tb.Fatalf("Read(pd %d, key %#x, [%#x, +%d)) copied the wrong bytes", pd, key, va, n)
	}
	if f != OK {
		for i, b := range dst {
			if b != 0xee {
				tb.Fatalf("Read faulted with %v but wrote dst[%d]", f, i)
			}
		}
	}
}

// checkLookup compares Lookup with the oracle for every live and stale key.
func checkLookup(tb testing.TB, u *ATU, m *model) {
	tb.Helper()
	for _, k := range m.liveKeys() {
		o := m.objs[k>>8]
		e, ok := u.Lookup(k)
		if !ok || e.Key != k || e.Kind != o.kind || e.PD != o.pd {
			tb.Fatalf("Lookup(%#x) = %+v, %v; model %+v", k, e, ok, o)
		}
		switch {
		case o.kind == KindMR:
			if !e.Valid || e.VA != o.iova || e.Length != uint64(len(o.buf)) || e.Access != o.access || e.PageShift != o.shift {
				tb.Fatalf("Lookup(%#x) = %+v; model %+v", k, e, o)
			}
		case e.Valid != o.bound:
			tb.Fatalf("Lookup(%#x).Valid = %v; model bound = %v", k, e.Valid, o.bound)
		case o.bound:
			if e.VA != o.va || e.Length != o.length || e.Access != o.access || e.Parent != o.parent || e.QPN != o.qpn {
				tb.Fatalf("Lookup(%#x) = %+v; model %+v", k, e, o)
			}
		}
	}
	for _, k := range m.stale {
		if m.live(k) != nil {
			continue // the variant came round again
		}
		if e, ok := u.Lookup(k); ok {
			tb.Fatalf("Lookup(stale %#x) = %+v", k, e)
		}
	}
}
