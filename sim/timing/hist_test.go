package timing

import (
	"encoding/json"
	"testing"
)

// TestHistogramJSON: a histogram written and read back answers every
// quantile as before.
func TestHistogramJSON(t *testing.T) {
	h := Histogram{Bits: 7}
	for v := range int64(5000) {
		h.Add(v * v % 100003)
	}
	b, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	var g Histogram
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		if g.Quantile(q) != h.Quantile(q) {
			t.Errorf("quantile %v: %d after the round trip, %d before", q, g.Quantile(q), h.Quantile(q))
		}
	}
	if g.Count() != h.Count() || g.Mean() != h.Mean() || g.Max() != h.Max() {
		t.Errorf("count/mean/max %d/%v/%d, want %d/%v/%d", g.Count(), g.Mean(), g.Max(), h.Count(), h.Mean(), h.Max())
	}
	if err := json.Unmarshal([]byte(`{"bits":3,"buckets":[[99999,1]]}`), &g); err == nil {
		t.Error("a bucket out of range was accepted")
	}
}
