package atu

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentUse runs the control path (register, bind, invalidate,
// free, deregister) and the data path (Translate, Read, Lookup, Stats)
// from several goroutines at once, as the verbs API and the NIC's engines
// do, under -race. Each worker checks its own results; a reader checks a
// shared region and window throughout. After deregistration a worker's
// key must never again reach its buffer, even if another worker's region
// has taken the index.
func TestConcurrentUse(t *testing.T) {
	const workers = 4
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for _, name := range []string{"tiny", "nic"} {
		t.Run(name, func(t *testing.T) {
			u := newATU(t, 64, shapeNamed(t, name))
			shared := pattern(3*4096+10, 9)
			const sharedVA = 0x9_0000_0ff0
			sk := mustReg(t, u, MRSpec{PD: 1, Buf: shared, IOVA: sharedVA, Access: LocalWrite | RemoteRead | MWBind})
			sw := mustAllocMW(t, u, 1, KindMW1)
			mustBind(t, u, Bind{MW: sw, NewKey: sw, MR: sk, PD: 1, VA: sharedVA + 100, Length: 8000, Access: RemoteRead})

			var done atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() { // the reader
				var segs []Seg
				buf := make([]byte, 64)
				for !done.Load() {
					var f Fault
					segs, f = u.Translate(&Request{Key: sk, PD: 1, VA: sharedVA, Len: uint64(len(shared))}, segs[:0])
					if f != OK || len(segs) != 4 || !aliases(u, segs, shared) {
						t.Errorf("shared region: %v, %d segments", f, len(segs))
						return
					}
					segs, f = u.Translate(&Request{Key: sw, PD: 1, QPN: 1, VA: sharedVA + 100, Len: 8000, Access: RemoteRead, Remote: true}, segs[:0])
					if f != OK || !aliases(u, segs, shared[100:8100]) {
						t.Errorf("shared window: %v", f)
						return
					}
					if f := u.Read(1, sk, sharedVA+4000, buf); f != OK || string(buf) != string(shared[4000:4064]) {
						t.Errorf("shared Read: %v", f)
						return
					}
					if _, ok := u.Lookup(sk); !ok {
						t.Error("shared region vanished")
						return
					}
					u.Stats()
				}
			})
			var workersWG sync.WaitGroup
			for w := range workers {
				workersWG.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					pd := uint32(10 + w)
					qpn := uint32(100 + w)
					var segs []Seg
					for i := range iters {
						s := randSpec(rng, pd)
						s.Access = s.Access&^ZeroBased | LocalWrite | MWBind
						n := uint64(len(s.Buf))
						k, err := u.RegMR(s)
						if err != nil {
							t.Errorf("worker %d iter %d: RegMR: %v", w, i, err)
							return
						}
						var f Fault
						segs, f = u.Translate(&Request{Key: k, PD: pd, VA: s.IOVA, Len: n, Access: LocalWrite}, segs[:0])
						if f != OK || !aliases(u, segs, s.Buf) {
							t.Errorf("worker %d iter %d: Translate(own region) = %v or wrong segments", w, i, f)
							return
						}
						if f := u.Read(pd, k, s.IOVA, make([]byte, min(n, 100))); f != OK {
							t.Errorf("worker %d iter %d: Read = %v", w, i, f)
							return
						}
						mw, err := u.AllocMW(pd, KindMW2)
						if err != nil {
							t.Errorf("worker %d iter %d: AllocMW: %v", w, i, err)
							return
						}
						nk := nextVariant(mw)
						if f := u.BindMW(Bind{MW: mw, NewKey: nk, MR: k, PD: pd, QPN: qpn, VA: s.IOVA, Length: n, Access: RemoteRead | ZeroBased}); f != OK {
							t.Errorf("worker %d iter %d: BindMW = %v", w, i, f)
							return
						}
						segs, f = u.Translate(&Request{Key: nk, PD: pd, QPN: qpn, VA: 0, Len: n, Access: RemoteRead, Remote: true}, segs[:0])
						if f != OK || !aliases(u, segs, s.Buf) {
							t.Errorf("worker %d iter %d: Translate(own window) = %v or wrong segments", w, i, f)
							return
						}
						if err := u.DeregMR(k); !errors.Is(err, ErrBusy) {
							t.Errorf("worker %d iter %d: DeregMR with a window bound = %v", w, i, err)
							return
						}
						if i%2 == 0 {
							if f := u.Invalidate(nk, pd, qpn, true); f != OK {
								t.Errorf("worker %d iter %d: Invalidate = %v", w, i, f)
								return
							}
						}
						if err := u.DeallocMW(nk); err != nil {
							t.Errorf("worker %d iter %d: DeallocMW: %v", w, i, err)
							return
						}
						if err := u.DeregMR(k); err != nil {
							t.Errorf("worker %d iter %d: DeregMR: %v", w, i, err)
							return
						}
						// The old keys must never reach the old buffer.
						for _, old := range []uint32{k, nk} {
							segs, f = u.Translate(&Request{Key: old, PD: pd, QPN: qpn, VA: s.IOVA, Len: 1, Remote: true, Access: RemoteRead}, segs[:0])
							if f == OK && startsAt(u, segs[0], &s.Buf[0]) {
								t.Errorf("worker %d iter %d: stale key %#x still reaches the deregistered buffer", w, i, old)
								return
							}
						}
					}
				})
			}
			workersWG.Wait()
			done.Store(true)
			wg.Wait()
			st := u.Stats()
			if st.MRs != 1 || st.MWs != 1 || st.MTTEntries != 4 {
				t.Fatalf("after the workers: %d MRs, %d MWs, %d MTT entries; want 1, 1, 4", st.MRs, st.MWs, st.MTTEntries)
			}
		})
	}
}

// aliases reports whether segs resolve, on u's host bus and in order, to
// exactly the bytes of buf. It does not fail the test, so the workers'
// goroutines can use it.
func aliases(u *ATU, segs []Seg, buf []byte) bool {
	at := 0
	for _, s := range segs {
		n := int(s.Len)
		if n == 0 || at+n > len(buf) || !startsAt(u, s, &buf[at]) {
			return false
		}
		at += n
	}
	return at == len(buf)
}
