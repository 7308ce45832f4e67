#!/usr/bin/env bash
# The project's test run (the README's test command):
#  1. every package with the race detector;
#  2. the end-to-end matrix again without it, now including the 64 MiB
#     messages and the cases too slow under the race detector;
#  3. a short run of every fuzz target.
# Set FUZZTIME (default 10s) to fuzz longer.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}

go test -race -count=1 ./...
go test -count=1 -run 'TestMatrix' .

# Every fuzz target, each for $fuzztime (go test -fuzz takes one target at a time).
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/func //' | sort -u); do
		echo "fuzz $pkg $target ($fuzztime)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
	done
done
