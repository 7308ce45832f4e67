#!/usr/bin/env bash
# Runs the data path's benchmarks and prints issue 13's table: each
# measure beside its reference measured in the same run (copy(), raw UDP
# sockets), and its aim. The machines are shared and noisy: run it more
# than once and quote ranges.
#   ./scripts/bench.sh            (about 2 minutes)
# BENCHTIME (default 2s) is go test's -benchtime; the raw output goes to
# ${OUT:-/tmp/rnic-bench.txt}.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rnic-bench.txt}
bt=${BENCHTIME:-2s}
{
	go test -run '^$' -bench 'BenchmarkWriteBW|BenchmarkWriteLat|BenchmarkIdleQPMemory/queues1' -benchtime "$bt" .
	go test -run '^$' -bench 'BenchmarkEnginePair|BenchmarkQPContextMemory' -benchtime "$bt" ./internal/transport
	go test -run '^$' -bench 'BenchmarkLoopback' -benchtime 1x ./perftest
	GOMAXPROCS=1 go test -run '^$' -bench 'BenchmarkSimSpeed/qps=(1|4096)/metadata' -benchtime 1x ./sim/perf
} 2>&1 | tee "$out" | grep -E '^(Benchmark|ok|FAIL|---)' >&2
go run ./scripts/benchtable <"$out"
