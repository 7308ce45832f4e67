package atu

import (
	"testing"
)

// TestZeroAllocs checks that the data path allocates nothing once dst has
// capacity (DESIGN.md: the steady-state data path allocates nothing):
// Translate of regions and windows, faults, and Read, with the caches
// hitting (nic), missing without storing (off) and missing with an
// eviction on every access (tiny, alternating between two regions). The
// cache counters confirm which path was measured.
func TestZeroAllocs(t *testing.T) {
	const runs = 500
	for _, name := range []string{"nic", "off", "tiny"} {
		t.Run(name, func(t *testing.T) {
			u := newATU(t, 8, shapeNamed(t, name))
			var bufs [2][]byte
			var keys, wins [2]uint32
			for i := range bufs {
				bufs[i] = pattern(64*4096, byte(i))
				va := uint64(i+1) << 32
				keys[i] = mustReg(t, u, MRSpec{PD: 1, Buf: bufs[i], IOVA: va, Access: LocalWrite | RemoteRead | MWBind})
				wins[i] = mustAllocMW(t, u, 1, KindMW2)
				mustBind(t, u, Bind{MW: wins[i], NewKey: wins[i], MR: keys[i], PD: 1, QPN: 5, VA: va, Length: 64 * 4096, Access: RemoteRead | ZeroBased})
			}
			dst := make([]Seg, 0, 4)
			var call int
			next := func() int { // which region: alternate on tiny, so each access evicts
				call++
				if name == "tiny" {
					return call % 2
				}
				return 0
			}
			bad := 0
			ops := []struct {
				name string
				f    func()
			}{
				{"Translate 4 KiB, 2 pages", func() {
					i := next()
					r := Request{Key: keys[i], PD: 1, VA: uint64(i+1)<<32 + 0x1800, Len: 4096, Access: LocalWrite}
					if s, f := u.Translate(&r, dst[:0]); f != OK || len(s) != 2 {
						bad++
					}
				}},
				{"Translate through a window", func() {
					i := next()
					r := Request{Key: wins[i], PD: 1, QPN: 5, VA: 0x2000, Len: 4096, Access: RemoteRead, Remote: true}
					if s, f := u.Translate(&r, dst[:0]); f != OK || len(s) != 1 {
						bad++
					}
				}},
				{"Translate fault", func() {
					i := next()
					r := Request{Key: keys[i], PD: 1, VA: 0, Len: 4096}
					if _, f := u.Translate(&r, dst[:0]); f != FaultBounds {
						bad++
					}
				}},
				{"Read", func() {
					i := next()
					if f := u.Read(1, keys[i], uint64(i+1)<<32+100, bufs[1-i][:300]); f != OK {
						bad++
					}
				}},
			}
			for _, op := range ops {
				op.f() // warm up
				before := u.Stats()
				if a := testing.AllocsPerRun(runs, op.f); a != 0 {
					t.Errorf("%s: %v allocations per call, want 0", op.name, a)
				}
				after := u.Stats()
				misses := after.MPT.Misses - before.MPT.Misses + after.MTT.Misses - before.MTT.Misses
				switch {
				case op.name == "Read":
					if after != before {
						t.Errorf("Read changed the statistics")
					}
				case name == "nic" && misses != 0:
					t.Errorf("%s: %d cache misses with everything resident", op.name, misses)
				case name != "nic" && misses < runs:
					t.Errorf("%s: %d cache misses in %d calls: the miss path was not measured", op.name, misses, runs)
				}
			}
			if bad != 0 {
				t.Errorf("%d measured calls did not give the expected result", bad)
			}
		})
	}
}
