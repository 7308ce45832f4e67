package perftest

import (
	"fmt"
	"strings"
)

// Verb is the RDMA operation a test measures (perftest's VerbType, whose
// numbering the output code relies on).
type Verb int

const (
	VerbSend   Verb = 0
	VerbWrite  Verb = 1
	VerbRead   Verb = 2
	VerbAtomic Verb = 3
)

// String returns perftest's name of the verb (testsStr).
func (v Verb) String() string {
	return [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[v]
}

// Kind says what a test measures.
type Kind int

const (
	BW  Kind = iota // bandwidth and message rate
	LAT             // latency
)

// Test is one of perftest's programs.
type Test int

const (
	WriteBW Test = iota
	ReadBW
	SendBW
	AtomicBW
	WriteLat
	ReadLat
	SendLat
)

var tests = [...]struct {
	name string
	verb Verb
	kind Kind
}{
	WriteBW:  {"write_bw", VerbWrite, BW},
	ReadBW:   {"read_bw", VerbRead, BW},
	SendBW:   {"send_bw", VerbSend, BW},
	AtomicBW: {"atomic_bw", VerbAtomic, BW},
	WriteLat: {"write_lat", VerbWrite, LAT},
	ReadLat:  {"read_lat", VerbRead, LAT},
	SendLat:  {"send_lat", VerbSend, LAT},
}

// Tests lists every test, in perftest's usual order.
func Tests() []Test { return []Test{WriteBW, ReadBW, SendBW, AtomicBW, WriteLat, ReadLat, SendLat} }

// String returns the test's name without the "ib_" prefix: "write_bw".
func (t Test) String() string {
	if !t.Valid() {
		return fmt.Sprintf("Test(%d)", int(t))
	}
	return tests[t].name
}

// Valid reports whether t is one of Tests.
func (t Test) Valid() bool { return t >= 0 && int(t) < len(tests) }

// MarshalText writes the test's name (a JSON or TOML string).
func (t Test) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("perftest: no test %d", int(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText reads a test's name, as ParseTest.
func (t *Test) UnmarshalText(b []byte) error {
	v, err := ParseTest(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Verb returns the operation the test measures.
func (t Test) Verb() Verb { return tests[t].verb }

// Kind returns BW or LAT.
func (t Test) Kind() Kind { return tests[t].kind }

// ParseTest accepts a test's name with or without "ib_": "write_bw",
// "ib_send_lat".
func ParseTest(s string) (Test, error) {
	name := strings.TrimPrefix(s, "ib_")
	for _, t := range Tests() {
		if t.String() == name {
			return t, nil
		}
	}
	names := make([]string, 0, len(tests))
	for _, t := range Tests() {
		names = append(names, t.String())
	}
	return 0, fmt.Errorf("perftest: unknown test %q (want one of %s)", s, strings.Join(names, ", "))
}

// AtomicType is the atomic operation of atomic_bw (-A).
type AtomicType int

const (
	CmpAndSwap  AtomicType = 0
	FetchAndAdd AtomicType = 1
)

// String returns perftest's name (atomicTypesStr).
func (a AtomicType) String() string { return [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}[a] }

// ParseAtomicType parses -A's argument.
func ParseAtomicType(s string) (AtomicType, error) {
	switch s {
	case "CMP_AND_SWAP":
		return CmpAndSwap, nil
	case "FETCH_AND_ADD":
		return FetchAndAdd, nil
	}
	return 0, fmt.Errorf("perftest: invalid atomic type %q (want CMP_AND_SWAP or FETCH_AND_ADD)", s)
}
