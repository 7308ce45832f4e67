package abi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic/internal/hostif"
)

// TestHeader fails when the checked-in C header is not what the Go
// definitions make: the provider would then build against another ABI
// than the NIC's. Run go generate ./internal/abi.
func TestHeader(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", "..", HeaderPath))
	if err != nil {
		t.Fatal(err)
	}
	if want := Header(); string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s drifted from the Go definitions (go generate ./internal/abi): line %d is\n\t%s\nwant\n\t%s", HeaderPath, i+1, g, w)
			}
		}
	}
}

// TestHeaderNamesEveryOp: every operation the host interface defines has
// its C name (a new Op must be added to the lists).
func TestHeaderNamesEveryOp(t *testing.T) {
	seen := map[uint16]bool{}
	for _, o := range append(append([]op{}, verbsOps...), cmOps...) {
		if seen[uint16(o.op)] {
			t.Errorf("op %d named twice", o.op)
		}
		seen[uint16(o.op)] = true
	}
	for v := 1; v < 200; v++ {
		name := opString(uint16(v))
		if !strings.HasPrefix(name, "op(") && !seen[uint16(v)] {
			t.Errorf("%s (%d) has no C name in package abi's lists", name, v)
		}
	}
}

func opString(v uint16) string { return hostif.Op(v).String() }
