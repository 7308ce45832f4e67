package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/stream.want.txt from the output")

// run runs the command on stdin and returns its output and exit status.
func run(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errOut)
	if errOut.Len() > 0 {
		t.Errorf("testsummary %q wrote to stderr: %s", args, errOut.String())
	}
	return out.String(), code
}

func notRoot(t *testing.T) {
	old := isRoot
	isRoot = func() bool { return false }
	t.Cleanup(func() { isRoot = old })
}

// stream writes events as go test -json does.
func stream(evs ...event) string {
	var b strings.Builder
	for _, e := range evs {
		j, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// The skip lines of testdata/stream.json, recorded from testdata/demo.
var demoSkips = `
13 tests skipped, by the reason each gave:
skipped: TestNeedsVerbs in ., TestProvider in ./cmd/tool (no <infiniband/verbs.h> to build the provider against; Debian: apt-get install libibverbs-dev)
skipped: TestRDMACM in ./cmd/tool (no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev)
skipped: TestSlurm in ./cmd/tool (slurm-test: skipped: no slurmctld; slurm-test: apt-get install slurm-wlm munge)
skipped: TestPerftest/ib_write_bw in ./cmd/tool (no ib_write_bw; Debian: apt-get install perftest)
skipped: TestPerftest/ib_read_bw in ./cmd/tool (no ib_read_bw; Debian: apt-get install perftest)
skipped: TestSubs/slow in . (covered without -race: slow under the race detector)
skipped: TestParentSkip in . (needs root)
skipped: TestMany (5 subtests) in . (sync.Pool drops buffers at random under -race)
to install the Debian packages named above: sudo apt-get install -y libibverbs-dev librdmacm-dev slurm-wlm munge perftest
`

// TestRecordedStream feeds a recorded go test -json stream (passes,
// failures in a test and a subtest, a build failure, a package without
// tests, skipped tests and subtests with their messages) and checks what
// is printed: go test's own output, then the skips by reason.
func TestRecordedStream(t *testing.T) {
	notRoot(t)
	in, err := os.ReadFile("testdata/stream.json")
	if err != nil {
		t.Fatal(err)
	}
	out, code := run(t, string(in), "-module", "example.com/demo")
	if code != 1 {
		t.Errorf("exit status %d, want 1 (a test and a build failed)", code)
	}
	golden := filepath.Join("testdata", "stream.want.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("output:\n%s\nwant (%s):\n%s", out, golden, want)
	}
	// What go test without -json prints, in its order: the failures
	// (nested subtests, log lines), the FAIL and ok lines.
	for _, s := range []string{
		"# example.com/demo/broken [example.com/demo/broken.test]\nbroken/broken_test.go:5:33: undefined: undefined\n",
		"--- FAIL: TestFail (0.00s)\n    demo_test.go:14: logged before the failure\n    demo_test.go:15: boom\n        second line\n" +
			"--- FAIL: TestSubs (0.00s)\n    --- FAIL: TestSubs/bad (0.00s)\n        demo_test.go:25: a subtest failed\n" +
			"FAIL\nFAIL\texample.com/demo\t0.006s\nFAIL\texample.com/demo/broken [build failed]\n" +
			"ok  \texample.com/demo/cmd/tool\t0.007s\n?   \texample.com/demo/nofiles\t[no test files]\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks\n%s", s)
		}
	}
	// Not printed without -v: passing and skipped tests' output.
	for _, s := range []string{"nor what it prints", "a passing test's log", "a passing subtest", "=== RUN", "--- SKIP", "--- PASS", "a log before the skip"} {
		if strings.Contains(out, s) {
			t.Errorf("output has %q, which go test without -v does not print", s)
		}
	}
	if !strings.HasSuffix(out, demoSkips) {
		t.Errorf("output does not end with the skips:\n%s\ngot:\n%s", demoSkips, out)
	}
}

// TestRecordThenSummary is scripts/test.sh's use: two runs recorded in
// one file, then the skips of both. A test skipped in one run and run in
// the other (TestSubs/slow: under -race, then without) is not listed.
func TestRecordThenSummary(t *testing.T) {
	notRoot(t)
	in, err := os.ReadFile("testdata/stream.json")
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "results")
	out, code := run(t, string(in), "-record", rec, "-module", "example.com/demo")
	if code != 1 {
		t.Errorf("first run: exit status %d, want 1", code)
	}
	if strings.Contains(out, "skipped") {
		t.Errorf("-record printed the skips:\n%s", out)
	}
	second := stream(
		event{Action: "start", Package: "example.com/demo"},
		event{Action: "run", Package: "example.com/demo", Test: "TestSubs"},
		event{Action: "run", Package: "example.com/demo", Test: "TestSubs/slow"},
		event{Action: "output", Package: "example.com/demo", Test: "TestSubs/slow", Output: "--- PASS: TestSubs/slow (1.00s)\n"},
		event{Action: "pass", Package: "example.com/demo", Test: "TestSubs/slow"},
		event{Action: "pass", Package: "example.com/demo", Test: "TestSubs"},
		event{Action: "output", Package: "example.com/demo", Output: "PASS\n"},
		event{Action: "output", Package: "example.com/demo", Output: "ok  \texample.com/demo\t1.010s\n"},
		event{Action: "pass", Package: "example.com/demo"},
	)
	out, code = run(t, second, "-record", rec, "-module", "example.com/demo")
	if code != 0 || out != "ok  \texample.com/demo\t1.010s\n" {
		t.Errorf("second run: exit status %d, output:\n%s", code, out)
	}
	out, code = run(t, "", "-summary", rec, "-module", "example.com/demo")
	want := strings.Replace(demoSkips, "skipped: TestSubs/slow in . (covered without -race: slow under the race detector)\n", "", 1)
	want = strings.Replace(want, "13 tests", "12 tests", 1)
	if code != 0 || out != want {
		t.Errorf("summary: exit status %d, output:\n%s\nwant:\n%s", code, out, want)
	}

	// Nothing recorded (no test ran): nothing to say.
	if out, _ := run(t, "", "-summary", filepath.Join(t.TempDir(), "none")); out != "" {
		t.Errorf("summary of no runs: %q", out)
	}
}

// TestUnfinished: a test binary that times out leaves tests without a
// result; their output (the panic) is printed, and the run fails.
func TestUnfinished(t *testing.T) {
	const p = "example.com/m/x"
	in := stream(
		event{Action: "start", Package: p},
		event{Action: "run", Package: p, Test: "TestA"},
		event{Action: "output", Package: p, Test: "TestA", Output: "=== RUN   TestA\n"},
		event{Action: "output", Package: p, Test: "TestA", Output: "    x_test.go:3: waiting\n"},
		event{Action: "run", Package: p, Test: "TestA/sub"},
		event{Action: "output", Package: p, Test: "TestA/sub", Output: "=== RUN   TestA/sub\n"},
		event{Action: "output", Package: p, Test: "TestA/sub", Output: "panic: test timed out after 1s\n"},
		event{Action: "output", Package: p, Test: "TestA/sub", Output: "\trunning tests:\n"},
		event{Action: "output", Package: p, Output: "FAIL\texample.com/m/x\t1.009s\n"},
		event{Action: "fail", Package: p},
	)
	out, code := run(t, in, "-module", "example.com/m")
	want := "=== RUN   TestA (did not finish)\n    x_test.go:3: waiting\n" +
		"    === RUN   TestA/sub (did not finish)\npanic: test timed out after 1s\n\trunning tests:\n" +
		"FAIL\texample.com/m/x\t1.009s\n"
	if code != 1 || out != want {
		t.Errorf("exit status %d, output:\n%s\nwant:\n%s", code, out, want)
	}
}

// TestPassing: a passing run prints the ok lines only, and says nothing
// was skipped; lines that are not events are passed on.
func TestPassing(t *testing.T) {
	const p = "example.com/m"
	in := "go: downloading example.com/dep v1.0.0\n" + stream(
		event{Action: "start", Package: p},
		event{Action: "run", Package: p, Test: "TestA"},
		event{Action: "output", Package: p, Test: "TestA", Output: "=== RUN   TestA\n"},
		event{Action: "output", Package: p, Test: "TestA", Output: "    a_test.go:3: a log\n"},
		event{Action: "output", Package: p, Test: "TestA", Output: "--- PASS: TestA (0.00s)\n"},
		event{Action: "pass", Package: p, Test: "TestA"},
		event{Action: "output", Package: p, Output: "PASS\n"},
		event{Action: "output", Package: p, Output: "ok  \texample.com/m\t0.010s\n"},
		event{Action: "pass", Package: p},
	)
	out, code := run(t, in, "-module", p)
	want := "go: downloading example.com/dep v1.0.0\nok  \texample.com/m\t0.010s\n\nno test skipped\n"
	if code != 0 || out != want {
		t.Errorf("exit status %d, output:\n%s\nwant:\n%s", code, out, want)
	}
}

// TestOrder: packages are printed in the order they started, as go test
// prints them, however their events interleave.
func TestOrder(t *testing.T) {
	in := stream(
		event{Action: "start", Package: "m/a"},
		event{Action: "start", Package: "m/b"},
		event{Action: "output", Package: "m/b", Output: "ok  \tm/b\t0.1s\n"},
		event{Action: "pass", Package: "m/b"},
		event{Action: "output", Package: "m/a", Output: "ok  \tm/a\t0.2s\n"},
		event{Action: "pass", Package: "m/a"},
	)
	if out, _ := run(t, in, "-module", "m"); !strings.HasPrefix(out, "ok  \tm/a\t0.2s\nok  \tm/b\t0.1s\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestSkipReason(t *testing.T) {
	for _, c := range []struct {
		out  []string
		want string
	}{
		{[]string{"=== RUN   TestX\n", "    x_test.go:9: skipped: no ucx_info; Debian: apt-get install ucx-utils\n", "--- SKIP: TestX (0.00s)\n"},
			"no ucx_info; Debian: apt-get install ucx-utils"},
		{[]string{"=== RUN   TestX\n", "    x_test.go:8: a log first\n", "    x_test.go:9: the reason\n", "        on two lines\n", "--- SKIP: TestX (0.00s)\n"},
			"the reason; on two lines"},
		{[]string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "no message"},
	} {
		tt := &test{name: "TestX"}
		for _, o := range c.out {
			tt.items = appendText(tt.items, o)
		}
		if got := skipReason(tt); got != c.want {
			t.Errorf("skipReason(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}
