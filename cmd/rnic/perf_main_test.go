package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if goroutines outlive the tests: perf must
// close its devices, connections, listeners and control sockets.
func TestMain(m *testing.M) {
	if os.Getenv("RNIC_TEST_MAIN") == "1" && len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		// The test binary run as rnic itself (what "rnic nic up" starts).
		root := newRootCmd()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	before := len(goroutines())
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		for len(goroutines()) > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if g := goroutines(); len(g) > before {
			fmt.Fprintf(os.Stderr, "goroutines leaked:\n%s\n", strings.Join(g, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// goroutines returns the stacks of the running goroutines, without the
// one os/signal starts for good on its first use (perf's Ctrl-C
// handling) and the runtime's own cleanup goroutine, which shows while it
// runs a cleanup (closing an exited process's pidfd, for one).
func goroutines() []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.Contains(g, "os/signal.loop") && !strings.Contains(g, "runtime.runCleanups") {
			out = append(out, g)
		}
	}
	return out
}
