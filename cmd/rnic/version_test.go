package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/rnic/rnic"
)

// TestVersion: "rnic --version" prints the module's version constant,
// which is a semantic version.
func TestVersion(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(rnic.Version) {
		t.Errorf("rnic.Version %q is not a semantic version", rnic.Version)
	}
	for _, arg := range []string{"--version", "-v"} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{arg})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if want := "rnic version " + rnic.Version + "\n"; out.String() != want {
			t.Errorf("rnic %s printed %q, want %q", arg, out.String(), want)
		}
	}
}
