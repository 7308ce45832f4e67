#!/usr/bin/env bash
# The project's test run (the README's test command):
#  1. every package with the race detector, but the ones that start no
#     goroutine (norace below);
#  2. those without it, and the end-to-end matrix again without it, now
#     including the 64 MiB messages and the cases too slow under the race
#     detector, and the allocation tests, which skip under it;
#  3. a short run of every fuzz target.
# Set FUZZTIME (default 10s) to fuzz longer.
# First scripts/deps.sh: run as root on Debian or Ubuntu it installs with
# apt-get what the tests use from the system (a C compiler, rdma-core's
# headers and programs, perftest, UCX, libfabric, ...); as another user,
# or with INSTALL=0, it prints the command that would. A test whose needs
# are missing skips, saying why: go test's output goes through
# scripts/testsummary, which prints what go test prints and records each
# skipped test with its skip message, and at the end (after a failure too)
# the skipped tests are listed, one line per reason.
# Step 1 includes the soak (TestSoak: random operation mixes on 8 QP pairs
# under each link/mem fault profile, 3 s per profile). A long soak, each
# profile for 10 minutes, with the seed printed if it fails:
#   go test -run '^TestSoak$' -soak.duration=10m -timeout 0 .
# and a failing seed again: go test -run '^TestSoak$/^<profile>$' -soak.seed=N .
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
# cmd/rnic/default.pgo optimizes the rnic command (scripts/pgo.sh); the
# tests build without it, so that cmd/rnic's test binary does not compile
# every package a second time (with the race detector, the longest
# compile of the run). PGO changes what is inlined, not what code does.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-pgo=off"

./scripts/deps.sh

# gotest runs go test with its output through testsummary, the results
# appended to $tmp/results; the EXIT trap prints the skips recorded there.
tmp=$(mktemp -d)
summary() {
	local rc=$?
	if [ -x "$tmp/testsummary" ]; then
		"$tmp/testsummary" -summary "$tmp/results" || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap summary EXIT
# (-buildvcs=false: git refuses to tell another user's checkout's state)
go build -buildvcs=false -o "$tmp/testsummary" ./scripts/testsummary
gotest() { go test -json "$@" | "$tmp/testsummary" -record "$tmp/results"; }

# sim/perf runs the timing model: its programs' threads are coroutines of
# the virtual clock (rnic.VirtualClock.Go, iter.Pull), one running at a
# time, every event on one clock. The race detector has nothing to find
# there and makes it 25 times slower (16 s alone, 7 min under -race on two
# cores), so it runs without. A package listed here must start no
# goroutine and use no sync: checked.
norace=(./sim/perf)
for p in "${norace[@]}"; do
	if grep -nE '(^|[^A-Za-z0-9_.])go (func|[A-Za-z_][A-Za-z0-9_.]*\()|"sync"|"sync/atomic"|errgroup' "$p"/*.go; then
		echo "$p starts goroutines or synchronises them (above): take it out of norace in $0 so that it runs under -race" >&2
		exit 1
	fi
done
mapfile -t race < <(go list ./... | grep -vxF "$(go list "${norace[@]}")")
gotest -race -count=1 "${race[@]}"
gotest -count=1 "${norace[@]}"
gotest -count=1 -run 'TestMatrix' .
# The allocation tests of the steady paths, which skip under -race (the
# race detector and sync.Pool allocate there).
gotest -count=1 -run 'TestDataPathAllocs|TestPipeZeroAllocs|TestZeroAllocs' . ./link/mem ./link/udp

# Every fuzz target, each for $fuzztime (go test -fuzz takes one target at a time).
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/func //' | sort -u); do
		echo "fuzz $pkg $target ($fuzztime)"
		out=$(mktemp)
		if go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
			rm -f "$out"
			continue
		fi
		# Go before 1.27 can fail a fuzz run at the -fuzztime deadline
		# with a bare "context deadline exceeded" when a worker is slow to
		# stop (go.dev/issue/75804): no input failed and none was written.
		# Only that is let through, and only if the target's corpus still
		# passes; any other failure, or a written input, fails the run.
		if grep -q 'Failing input written to' "$out" || ! grep -q '^    context deadline exceeded$' "$out"; then
			rm -f "$out"
			exit 1
		fi
		rm -f "$out"
		echo "fuzz $pkg $target: the fuzzer stopped with a bare 'context deadline exceeded' (go.dev/issue/75804) and wrote no input; replaying the corpus"
		go test -count=1 -run="^${target}\$" "$pkg"
	done
done
