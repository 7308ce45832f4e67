package perftest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if goroutines outlive the tests: every run
// must close its device, its connection and its listener.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if leaked := waitGoroutines(before, 5*time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// waitGoroutines waits until at most n goroutines run, and otherwise
// returns their stacks.
func waitGoroutines(n int, d time.Duration) string {
	deadline := time.Now().Add(d)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			s := string(buf[:runtime.Stack(buf, true)])
			return strings.TrimSpace(s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ""
}
