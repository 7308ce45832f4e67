package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeGo stands in for go when TestTestSh runs scripts/test.sh: it
// builds with the real go, lists three packages, and answers each go test
// run of test.sh with a stream of its own ($FAKE_DIR/race.json for the
// -race run, matrix.json for -run TestMatrix, allocs.json for the
// allocation tests without -race, norace.json for sim/perf), failing if
// that stream has a failure. It logs its arguments.
const fakeGo = `#!/usr/bin/env bash
printf '%s\n' "$*" >> "$FAKE_DIR/calls"
case "$1" in
build) exec "$REAL_GO" "$@" ;;
list)
	shift
	case "$1" in
	-f) echo "$FAKE_DIR/pkgdir" ;;
	./...) printf '%s\n' github.com/rnic/rnic github.com/rnic/rnic/cmd/rnic github.com/rnic/rnic/sim/perf ;;
	*) for p; do echo "github.com/rnic/rnic/${p#./}"; done ;;
	esac ;;
test)
	case " $* " in
	*" -fuzz="*) echo "ok  fuzzed"; exit 0 ;;
	*" -race "*) s=race ;;
	*TestMatrix*) s=matrix ;;
	*Allocs*) s=allocs ;;
	*) s=norace ;;
	esac
	cat "$FAKE_DIR/$s.json"
	! grep -q '"Action":"fail"' "$FAKE_DIR/$s.json" ;;
*) echo "fake go: unexpected: go $*" >&2; exit 2 ;;
esac
`

const mod = "github.com/rnic/rnic"

// pkgRun is the events of one package's run: its tests' results (name →
// "pass", "fail" or a skip message), then its end.
func pkgRun(pkg string, tests [][2]string) []event {
	evs := []event{{Action: "start", Package: pkg}}
	failed := false
	for _, tr := range tests {
		name, res := tr[0], tr[1]
		evs = append(evs, event{Action: "run", Package: pkg, Test: name},
			event{Action: "output", Package: pkg, Test: name, Output: "=== RUN   " + name + "\n"})
		switch res {
		case "pass":
			evs = append(evs, event{Action: "output", Package: pkg, Test: name, Output: "--- PASS: " + name + " (0.00s)\n"},
				event{Action: "pass", Package: pkg, Test: name})
		case "fail":
			failed = true
			evs = append(evs, event{Action: "output", Package: pkg, Test: name, Output: "    x_test.go:1: it broke\n"},
				event{Action: "output", Package: pkg, Test: name, Output: "--- FAIL: " + name + " (0.00s)\n"},
				event{Action: "fail", Package: pkg, Test: name})
		default:
			evs = append(evs, event{Action: "output", Package: pkg, Test: name, Output: "    x_test.go:1: " + res + "\n"},
				event{Action: "output", Package: pkg, Test: name, Output: "--- SKIP: " + name + " (0.00s)\n"},
				event{Action: "skip", Package: pkg, Test: name})
		}
	}
	if failed {
		return append(evs, event{Action: "output", Package: pkg, Output: "FAIL\n"},
			event{Action: "output", Package: pkg, Output: "FAIL\t" + pkg + "\t0.100s\n"},
			event{Action: "fail", Package: pkg})
	}
	return append(evs, event{Action: "output", Package: pkg, Output: "PASS\n"},
		event{Action: "output", Package: pkg, Output: "ok  \t" + pkg + "\t0.100s\n"},
		event{Action: "pass", Package: pkg})
}

// TestTestSh runs scripts/test.sh itself, with fakeGo as go, and checks
// that its go test runs go through testsummary (go test's ok and FAIL
// lines and failures printed), that it ends by naming the tests that
// skipped in any of its runs with their reasons (after a failure too),
// that a failure fails it, and that it runs scripts/deps.sh first.
func TestTestSh(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		realGo = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	script, err := filepath.Abs("../test.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, failing := range []bool{false, true} {
		name := "passing"
		if failing {
			name = "failing"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			for _, d := range []string{bin, filepath.Join(dir, "pkgdir")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write := func(path, s string, mode os.FileMode) {
				t.Helper()
				if err := os.WriteFile(path, []byte(s), mode); err != nil {
					t.Fatal(err)
				}
			}
			write(filepath.Join(bin, "go"), fakeGo, 0o755)
			write(filepath.Join(dir, "pkgdir", "x_test.go"), "package x\n\nfunc FuzzFake(f *testing.F) {}\n", 0o644)
			cmdTests := [][2]string{
				{"TestExec", "pass"},
				{"TestProvider", "skipped: no <infiniband/verbs.h> to build the provider against; Debian: apt-get install libibverbs-dev"},
				{"TestRDMACM", "skipped: no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev"},
				{"TestUCX", "skipped: no ucx_info; Debian: apt-get install ucx-utils"},
				{"TestFabric", "skipped: no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev"},
			}
			if failing {
				cmdTests = append(cmdTests, [2]string{"TestBroken", "fail"})
			}
			race := append(pkgRun(mod, [][2]string{
				{"TestMatrix", "pass"},
				{"TestMatrix/mtu256", "covered without -race: 10 % loss at MTU 256 is slow under the race detector"},
				{"TestAllocs", "the race detector allocates"},
			}), pkgRun(mod+"/cmd/rnic", cmdTests)...)
			write(filepath.Join(dir, "race.json"), stream(race...), 0o644)
			write(filepath.Join(dir, "norace.json"), stream(pkgRun(mod+"/sim/perf", [][2]string{{"TestScale", "set RNIC_SCALE=1"}})...), 0o644)
			write(filepath.Join(dir, "matrix.json"), stream(pkgRun(mod, [][2]string{{"TestMatrix", "pass"}, {"TestMatrix/mtu256", "pass"}})...), 0o644)
			write(filepath.Join(dir, "allocs.json"), stream(pkgRun(mod, [][2]string{{"TestAllocs", "pass"}})...), 0o644)

			cmd := exec.Command("bash", script)
			cmd.Env = append(os.Environ(),
				"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"FAKE_DIR="+dir, "REAL_GO="+realGo, "FUZZTIME=1s",
				// deps.sh: ucx-utils missing, and not to be installed.
				"INSTALL=0", "DEPS_MISSING=ucx-utils")
			outb, err := cmd.CombinedOutput()
			out := string(outb)
			if failing {
				if err == nil {
					t.Errorf("test.sh passed with a failing test:\n%s", out)
				}
			} else if err != nil {
				t.Errorf("test.sh: %v\n%s", err, out)
			}

			apt := "skipped: TestProvider in ./cmd/rnic (no <infiniband/verbs.h> to build the provider against; Debian: apt-get install libibverbs-dev)\n" +
				"skipped: TestRDMACM, TestFabric in ./cmd/rnic (no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev)\n" +
				"skipped: TestUCX in ./cmd/rnic (no ucx_info; Debian: apt-get install ucx-utils)\n"
			want := []string{
				// deps.sh ran, printing what it would install.
				"apt-get install -y --no-install-recommends ucx-utils\n",
				// go test's output.
				"ok  \t" + mod + "\t0.100s\n",
				// The skips of all four runs, by reason; TestMatrix/mtu256
				// and TestAllocs ran without -race, so they are not listed.
				"\n5 tests skipped, by the reason each gave:\n" + apt +
					"skipped: TestScale in ./sim/perf (set RNIC_SCALE=1)\n" +
					"to install the Debian packages named above: ",
				"apt-get install -y libibverbs-dev librdmacm-dev ucx-utils\n",
				"ok  \t" + mod + "/cmd/rnic\t0.100s\n",
				"ok  \t" + mod + "/sim/perf\t0.100s\n",
				"fuzz " + mod + "/cmd/rnic FuzzFake (1s)\n",
			}
			if failing {
				want = []string{
					want[0], want[1],
					"--- FAIL: TestBroken (0.00s)\n    x_test.go:1: it broke\nFAIL\nFAIL\t" + mod + "/cmd/rnic\t0.100s\n",
					// Stopped after the failing run: the skips of that run,
					// TestMatrix/mtu256 among them.
					"\n6 tests skipped, by the reason each gave:\n" + apt +
						"skipped: TestMatrix/mtu256 in . (covered without -race: 10 % loss at MTU 256 is slow under the race detector)\n" +
						"skipped: TestAllocs in . (the race detector allocates)\n" +
						"to install the Debian packages named above: ",
				}
			}
			for _, s := range want {
				if !strings.Contains(out, s) {
					t.Errorf("test.sh's output lacks\n%s\nin:\n%s", s, out)
				}
			}
			if i, j := strings.LastIndex(out, "fuzz "), strings.Index(out, "tests skipped"); j < i {
				t.Errorf("the skips are not at the end:\n%s", out)
			}
			if failing && strings.Contains(out, "fuzz ") {
				t.Errorf("test.sh went on after the failure:\n%s", out)
			}

			// Every go test run but the fuzzing used -json (through
			// testsummary), with test.sh's own flags.
			calls, err := os.ReadFile(filepath.Join(dir, "calls"))
			if err != nil {
				t.Fatal(err)
			}
			var runs []string
			for _, c := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
				if strings.HasPrefix(c, "test ") && !strings.Contains(c, "-fuzz=") {
					runs = append(runs, c)
				}
			}
			wantRuns := []string{
				"test -json -race -count=1 " + mod + " " + mod + "/cmd/rnic",
				"test -json -count=1 ./sim/perf",
				"test -json -count=1 -run TestMatrix .",
				"test -json -count=1 -run TestDataPathAllocs|TestPipeZeroAllocs|TestZeroAllocs . ./link/mem ./link/udp",
			}
			if failing {
				wantRuns = wantRuns[:1]
			}
			if strings.Join(runs, "\n") != strings.Join(wantRuns, "\n") {
				t.Errorf("go test runs:\n%s\nwant:\n%s", strings.Join(runs, "\n"), strings.Join(wantRuns, "\n"))
			}
		})
	}
}
