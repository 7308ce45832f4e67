package perf

import (
	"errors"
	"testing"
)

// TestSpecValidate: a Spec runs as it says or not at all. Zero fields
// take their defaults; values out of range, and values the test would not
// honour (it used to run them as something else and report them as
// asked), are refused with the parameter's name.
func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec  Spec
		param string // "": valid
	}{
		{Spec{}, ""},
		{Spec{Test: WriteLat, TxDepth: 1, CQMod: 1}, ""},
		{Spec{Test: WriteBW, Random: true, Footprint: 1 << 20}, ""},
		{Spec{Test: WriteLat, Inline: NoInline}, ""},
		{Spec{Test: SendBW, Inline: 64}, ""},
		{Spec{Test: WriteBW, PageSize: 2 << 20}, ""},
		{Spec{Test: AtomicBW, Size: 64}, ""}, // atomics move 8 bytes; the result says 8
		{Spec{Size: -1}, "size"},
		{Spec{QPs: -1}, "qps"},
		{Spec{Pairs: -2}, "pairs"},
		{Spec{Iters: -1}, "iters"},
		{Spec{Warmup: -1}, "warmup"},
		{Spec{Iters: 5, Warmup: 5}, "warmup"},
		{Spec{TxDepth: -1}, "tx_depth"},
		{Spec{TxDepth: 4, CQMod: 8}, "tx_depth"},
		{Spec{PostList: -1}, "post_list"},
		{Spec{TxDepth: 4, PostList: 8}, "post_list"},
		{Spec{Test: WriteLat, PostList: 2}, "post_list"},
		{Spec{Threads: -1}, "threads"},
		{Spec{CQMod: -1}, "cq_mod"},
		{Spec{MRChurn: -1}, "mr_churn_ns"},
		{Spec{Limit: -1}, "limit"},
		{Spec{Inline: -2}, "inline"},
		{Spec{Size: 4096, Footprint: 100}, "footprint"},
		{Spec{PageSize: 3000}, "page_size"},
		{Spec{PageSize: 2048}, "page_size"},
		{Spec{PageSize: 2 << 30}, "page_size"},
		{Spec{Test: WriteLat, Random: true}, "random"},
		{Spec{Test: ReadLat, TxDepth: 8}, "tx_depth"},
		{Spec{Test: SendLat, CQMod: 4}, "cq_mod"},
		{Spec{Test: ReadBW, Inline: 64}, "inline"},
		{Spec{Test: AtomicBW, Inline: 8}, "inline"},
	} {
		err := tc.spec.Validate()
		var se *SpecError
		switch {
		case tc.param == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec, err)
		case tc.param != "" && (!errors.As(err, &se) || se.Param != tc.param):
			t.Errorf("%+v: error %v, want one about %s", tc.spec, err, tc.param)
		}
	}
}

// TestNoInline: NoInline sends nothing inline where write_lat would
// default to 220 bytes, and the result says 0.
func TestNoInline(t *testing.T) {
	p := mustProfile(t, "cx6")
	def, err := Run(p, Spec{Test: WriteLat, Size: 8, Iters: 100})
	if err != nil {
		t.Fatal(err)
	}
	none, err := Run(p, Spec{Test: WriteLat, Size: 8, Iters: 100, Inline: NoInline})
	if err != nil {
		t.Fatal(err)
	}
	if def.Spec.Inline != 220 || none.Spec.Inline != 0 {
		t.Errorf("inline %d (default) and %d (NoInline), want 220 and 0", def.Spec.Inline, none.Spec.Inline)
	}
	// Without inline data the NIC reads the payload over PCIe: slower.
	if none.LatAvg <= def.LatAvg {
		t.Errorf("latency without inline %.0f ns, with %.0f ns", none.LatAvg, def.LatAvg)
	}
}
