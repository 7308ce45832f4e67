package atu

import (
	"fmt"
	"testing"
)

// BenchmarkTranslate measures a 4 KiB translation: the per-SGE or
// per-packet cost the engines pay. hit: the NIC's default caches with
// everything resident. miss: one-entry MPT cache and two-entry MTT cache,
// rotating over 64 regions, so every lookup misses and evicts. off: caches
// disabled, every lookup reads the host tables without a fill.
func BenchmarkTranslate(b *testing.B) {
	for _, bc := range []struct {
		name    string
		shape   string
		regions int
		off     uint64 // offset of the range in its region: 0 one page, 0x800 two
		window  bool
	}{
		{"hit/1page", "nic", 1, 0, false},
		{"hit/2pages", "nic", 1, 0x800, false},
		{"hit/window", "nic", 1, 0x800, true},
		{"miss/1page", "tiny", 64, 0, false},
		{"miss/2pages", "tiny", 64, 0x800, false},
		{"miss/window", "tiny", 64, 0x800, true},
		{"off/2pages", "off", 1, 0x800, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			u := newATU(b, 2*bc.regions+1, shapeNamed(b, bc.shape))
			reqs := make([]Request, bc.regions)
			for i := range reqs {
				va := uint64(i+1) << 32
				k := mustReg(b, u, MRSpec{PD: 1, Buf: make([]byte, 16*4096), IOVA: va, Access: LocalWrite | RemoteWrite | MWBind})
				reqs[i] = Request{Key: k, PD: 1, VA: va + bc.off, Len: 4096, Access: LocalWrite}
				if bc.window {
					w := mustAllocMW(b, u, 1, KindMW2)
					mustBind(b, u, Bind{MW: w, NewKey: w, MR: k, PD: 1, QPN: 3, VA: va, Length: 16 * 4096, Access: RemoteWrite})
					reqs[i] = Request{Key: w, PD: 1, QPN: 3, VA: va + bc.off, Len: 4096, Access: RemoteWrite, Remote: true}
				}
			}
			dst := make([]Seg, 0, 4)
			for i := range reqs { // warm up
				if _, f := u.Translate(&reqs[i], dst[:0]); f != OK {
					b.Fatal(f)
				}
			}
			before := u.Stats()
			b.SetBytes(4096)
			i := 0
			for b.Loop() {
				u.Translate(&reqs[i], dst[:0])
				if i++; i == len(reqs) {
					i = 0
				}
			}
			st := u.Stats()
			calls := float64(st.Translations - before.Translations)
			b.ReportMetric(float64(st.MPT.Misses-before.MPT.Misses)/calls, "mpt-miss/op")
			b.ReportMetric(float64(st.MTT.Misses-before.MTT.Misses)/calls, "mtt-miss/op")
		})
	}
}

// BenchmarkRead measures the CPU's inline-data copy (Read) of 64 bytes and
// 4 KiB across a page boundary.
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			u := newATU(b, 2, shapeNamed(b, "nic"))
			k := mustReg(b, u, MRSpec{PD: 1, Buf: make([]byte, 4*4096), IOVA: 0x1000})
			dst := make([]byte, n)
			b.SetBytes(int64(n))
			for b.Loop() {
				if f := u.Read(1, k, 0x1000+4096-32, dst); f != OK {
					b.Fatal(f)
				}
			}
		})
	}
}
