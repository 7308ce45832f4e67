package demo

import (
	"fmt"
	"testing"
)

func TestPass(t *testing.T) {
	t.Log("a passing test's log: go test without -v does not print it")
	fmt.Println("nor what it prints")
}

func TestFail(t *testing.T) {
	t.Log("logged before the failure")
	t.Error("boom\nsecond line")
}

func TestNeedsVerbs(t *testing.T) {
	t.Log("a log before the skip")
	t.Skip("skipped: no <infiniband/verbs.h> to build the provider against; Debian: apt-get install libibverbs-dev")
}

func TestSubs(t *testing.T) {
	t.Run("slow", func(t *testing.T) { t.Skip("covered without -race: slow under the race detector") })
	t.Run("bad", func(t *testing.T) { t.Error("a subtest failed") })
	t.Run("good", func(t *testing.T) { t.Log("a passing subtest") })
}

func TestParentSkip(t *testing.T) {
	t.Run("first", func(t *testing.T) { t.Skip("needs root") })
	t.Skip("needs root")
}

func TestMany(t *testing.T) {
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		t.Run(n, func(t *testing.T) { t.Skip("sync.Pool drops buffers at random under -race") })
	}
	t.Run("f", func(t *testing.T) {})
}
