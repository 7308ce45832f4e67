package rnic_test

import (
	"testing"

	"github.com/rnic/rnic"
)

// TestAdviseMR: ibv_advise_mr's prefetch walks a range's translations
// into the NIC's caches, so that a second walk (or the transfer) finds
// them there; a range that is not the PD's to name, or that the advice's
// right does not cover, is refused and named.
func TestAdviseMR(t *testing.T) {
	p := newPair(t, pairOpts{})
	buf := make([]byte, 64<<10)
	mr := must(p.pda.RegMR(buf, rnic.AccessLocalWrite))
	ro := must(p.pda.RegMR(make([]byte, 4096), 0))
	other := must(p.a.AllocPD())
	all := mr.SGE(0, len(buf))

	miss0 := counter(t, p.a, "mtt_cache_miss")
	walks0 := counter(t, p.a, "atu_translations")
	if err := p.pda.AdviseMR(rnic.AdvisePrefetch, []rnic.SGE{all}); err != nil {
		t.Fatalf("AdviseMR of a registered range: %v", err)
	}
	miss1 := counter(t, p.a, "mtt_cache_miss")
	if miss1 == miss0 {
		t.Errorf("the prefetch read no MTT entry (mtt_cache_miss stayed %d)", miss0)
	}
	if w := counter(t, p.a, "atu_translations"); w != walks0+1 {
		t.Errorf("atu_translations %d after one prefetch, want %d", w, walks0+1)
	}
	for _, a := range []rnic.Advice{rnic.AdvisePrefetch, rnic.AdvisePrefetchWrite, rnic.AdvisePrefetchNoFault} {
		if err := p.pda.AdviseMR(a, []rnic.SGE{all, {}}); err != nil {
			t.Errorf("AdviseMR %v again: %v", a, err)
		}
	}
	if m := counter(t, p.a, "mtt_cache_miss"); m != miss1 {
		t.Errorf("prefetching again missed the MTT cache %d times: the first prefetch did not fill it", m-miss1)
	}

	for _, c := range []struct {
		name   string
		pd     *rnic.PD
		advice rnic.Advice
		sgl    []rnic.SGE
		want   []string
	}{
		{"no ranges", p.pda, rnic.AdvisePrefetch, nil, []string{"no ranges"}},
		{"unknown advice", p.pda, rnic.Advice(7), []rnic.SGE{all}, []string{"unknown advice", "Advice(7)"}},
		{"past the region", p.pda, rnic.AdvisePrefetch, []rnic.SGE{mr.SGE(len(buf)-8, 16)}, []string{"range 0"}},
		{"bad key", p.pda, rnic.AdvisePrefetch, []rnic.SGE{all, {Addr: all.Addr, Length: 8, LKey: mr.LKey() ^ 0xff}}, []string{"range 1"}},
		{"another PD's region", other, rnic.AdvisePrefetch, []rnic.SGE{all}, []string{"range 0"}},
		{"write to a read-only region", p.pda, rnic.AdvisePrefetchWrite, []rnic.SGE{ro.SGE(0, 64)}, []string{"PREFETCH_WRITE", "range 0"}},
	} {
		errContains(t, c.pd.AdviseMR(c.advice, c.sgl), c.name, c.want...)
	}
	if err := p.pda.AdviseMR(rnic.AdvisePrefetch, []rnic.SGE{ro.SGE(0, 64)}); err != nil {
		t.Errorf("AdviseMR PREFETCH of a read-only region: %v", err)
	}
	must0(t, mr.Dereg())
	errContains(t, p.pda.AdviseMR(rnic.AdvisePrefetch, []rnic.SGE{all}), "a deregistered region", "range 0")
}
