package experiment

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteBreakdowns(t *testing.T) {
	sw := &Sweep{Profiles: []string{"cx6", "hangu"}, Sets: []Set{{"link.propagation_ns", []string{"10", "1000"}}}, QPs: []int{1, 2}}
	var b bytes.Buffer
	if err := WriteBreakdowns(&b, sw); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"cx6 link.propagation_ns=10: one 8-byte RDMA WRITE", "cx6 link.propagation_ns=1000: one 8-byte",
		"hangu link.propagation_ns=10: one 8-byte", "hangu link.propagation_ns=1000: one 8-byte",
		"at[ns]", "host starts posting the WRITE", "payload written, visible to host", "host polls the completion",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("breakdown lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "RDMA WRITE, from"); n != 4 {
		t.Errorf("%d breakdowns, want one per profile and override (4), not per QP count:\n%s", n, out)
	}
}
