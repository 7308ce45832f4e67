#!/usr/bin/env bash
# bench-provider.sh — the libibverbs provider's speed beside the Go path
# and the raw UDP reference, in one run (issue 11's "Speed"):
#   1. the Go path: perftest's write_bw (64 KiB, MTU 4096) and write_lat
#      (8 B) in Go between two NICs on link/udp over loopback, each with
#      its raw UDP reference measured in the same run
#      (go test -bench Loopback ./perftest);
#   2. the provider path: Debian's unmodified ib_write_bw -s 65536 and
#      ib_write_lat -s 8 through rnic's libibverbs.so.1, server and
#      client as two processes on two NICs of "rnic nic up" (127.0.0.71
#      and .72).
# Each ROUNDS times (default 3), alternating, so that a noisy machine
# shows as a spread. Needs gcc, libibverbs-dev and perftest.
#   ./scripts/bench-provider.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
tmp=$(mktemp -d)
trap 'RNIC_RUN_DIR=$tmp/run "$tmp/rnic" nic down --all >/dev/null 2>&1; rm -rf "$tmp"' EXIT
go build -o "$tmp/rnic" ./cmd/rnic
./scripts/build-provider.sh "$tmp/lib" >/dev/null
export RNIC_RUN_DIR=$tmp/run XDG_RUNTIME_DIR=$tmp/xdg
mkdir -p "$RNIC_RUN_DIR" "$XDG_RUNTIME_DIR"
"$tmp/rnic" nic up --addr 127.0.0.71 >/dev/null
"$tmp/rnic" nic up --addr 127.0.0.72 >/dev/null

pair() { # program, args: the server on rnic0, the client on rnic1; prints the client's result row
	local prog=$1
	shift
	LD_LIBRARY_PATH=$tmp/lib "$prog" -d rnic0 -x 1 -p 18999 "$@" >/dev/null 2>&1 &
	local s=$!
	local out=""
	for _ in $(seq 50); do
		sleep 0.1
		out=$(LD_LIBRARY_PATH=$tmp/lib "$prog" -d rnic1 -x 1 -p 18999 "$@" 127.0.0.1 2>&1) && break
	done
	wait $s || true
	awk '/#bytes/ {getline; print; exit}' <<<"$out"
}

for r in $(seq "$rounds"); do
	echo "== round $r"
	go test -run '^$' -bench Loopback -benchtime 1x ./perftest | grep -E '^Benchmark' | sed 's/^/go path: /'
	echo "provider ib_write_bw -s 65536 -n 20000:  $(pair ib_write_bw -s 65536 -n 20000 | awk '{print $4 " MB/s average"}')"
	echo "provider ib_write_lat -s 8 -n 20000:     $(pair ib_write_lat -s 8 -n 20000 | awk '{print $5 " usec typical, " $6 " usec average"}')"
done
