#!/usr/bin/env bash
# Runs the data path's benchmarks and prints issue 13's table: each
# measure beside its reference measured in the same run (copy(), raw UDP
# sockets), and its aim. The machines are shared and noisy: run it more
# than once and quote ranges.
#   ./scripts/bench.sh            (about 2 minutes)
# BENCHTIME (default 2s) is go test's -benchtime; the raw output goes to
# ${OUT:-/tmp/rnic-bench.txt}.
#
# Against another commit, in one run:
#   ./scripts/bench.sh --against REV [--rounds N] [--short] [--guard P]
# builds REV's benchmarks in a temporary worktree and this tree's, runs
# them interleaved (REV, this, this, REV, REV, this, ...: N rounds each,
# default 3; with --short a round is REV, this, this, REV, its two values
# of each build averaged) and prints, for every benchmark and unit, each build's median
# and range and the ratio this ÷ REV round by round (scripts/benchcmp),
# then this tree's issue-13 table from its last round. --short runs only
# the guarded measures (the engine's cost per small packet, the
# simulator's speed with 1 and 4096 QPs); --guard P exits 1 when one of
# them is more than P % worse than REV by the median of the rounds
# (.ci/run: --short --guard 25 against .ci/bench-base).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rnic-bench.txt}
bt=${BENCHTIME:-2s}

against="" rounds=3 short=0 guard=0
while [ $# -gt 0 ]; do
	case $1 in
	--against) against=${2:?--against needs a commit}; shift 2 ;;
	--rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
	--short) short=1; shift ;;
	--guard) guard=${2:?--guard needs a per cent}; shift 2 ;;
	*) echo "usage: $0 [--against REV [--rounds N] [--short] [--guard P]]" >&2; exit 2 ;;
	esac
done

if [ -z "$against" ]; then
	{
		go test -run '^$' -bench 'BenchmarkWriteBW|BenchmarkWriteLat|BenchmarkIdleQPMemory/queues1' -benchtime "$bt" .
		go test -run '^$' -bench 'BenchmarkEnginePair|BenchmarkQPContextMemory' -benchtime "$bt" ./internal/transport
		go test -run '^$' -bench 'BenchmarkLoopback' -benchtime 1x ./perftest
		GOMAXPROCS=1 go test -run '^$' -bench 'BenchmarkSimSpeed/qps=(1|4096)/metadata' -benchtime 1x ./sim/perf
	} 2>&1 | tee "$out" | grep -E '^(Benchmark|ok|FAIL|---)' >&2
	go run ./scripts/benchtable <"$out"
	exit 0
fi

# The benchmarks: package, GOMAXPROCS (empty: the machine's), -bench
# pattern, -benchtime.
if [ "$short" = 1 ]; then
	sets=(
		"./internal/transport||^BenchmarkEnginePairSmall\$|1s"
		"./sim/perf|1|^BenchmarkSimSpeed/qps=(1|4096)/metadata\$|1x"
	)
else
	sets=(
		".||BenchmarkWriteBW|BenchmarkWriteLat|BenchmarkIdleQPMemory/queues1|$bt"
		"./internal/transport||BenchmarkEnginePair|BenchmarkQPContextMemory|$bt"
		"./perftest||BenchmarkLoopback|1x"
		"./sim/perf|1|BenchmarkSimSpeed/qps=(1|4096)/metadata|1x"
	)
fi

rev=$(git rev-parse --verify "$against^{commit}")
dir=$(mktemp -d "${TMPDIR:-/tmp}/rnic-bench-against.XXXXXX")
cleanup() {
	git worktree remove --force "$dir/old-src" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
git worktree add --quiet --detach "$dir/old-src" "$rev"

# build TREE SRC: the test binaries of every set, from source tree SRC.
build() {
	local tree=$1 src=$2 i=0
	for s in "${sets[@]}"; do
		local pkg=${s%%|*}
		(cd "$src" && go test -c -o "$dir/$tree.$i.test" "$pkg") || {
			echo "bench: building $pkg of $tree failed" >&2
			exit 1
		}
		i=$((i + 1))
	done
}
echo "bench: building $against ($rev) and this tree" >&2
build old "$dir/old-src"
build new "$PWD"

# run TREE SRC ROUND: one round of every set, into $dir/TREE.ROUND.txt.
run() {
	local tree=$1 src=$2 r=$3 i=0
	for s in "${sets[@]}"; do
		local pkg procs pattern time rest
		pkg=${s%%|*}
		rest=${s#*|}
		procs=${rest%%|*}
		rest=${rest#*|}
		time=${rest##*|}
		pattern=${rest%|*}
		if [ -f "$dir/$tree.$i.test" ]; then
			(cd "$src/$pkg" && env ${procs:+GOMAXPROCS=$procs} "$dir/$tree.$i.test" -test.run '^$' \
				-test.bench "$pattern" -test.benchtime "$time") >>"$dir/$tree.$(printf %03d "$r").txt" 2>&1 || true
		fi
		i=$((i + 1))
	done
}
# A round is REV, this (or the reverse). With --short it is REV, this,
# this, REV (or the reverse), each build's two values averaged, so that a
# load that rises or falls during the round weighs on both builds alike.
for r in $(seq 1 "$rounds"); do
	echo "bench: round $r of $rounds" >&2
	first=old second=new
	if [ $((r % 2)) = 0 ]; then
		first=new second=old
	fi
	order="$first $second"
	if [ "$short" = 1 ]; then
		order="$order $second $first"
	fi
	for tree in $order; do
		if [ "$tree" = old ]; then run old "$dir/old-src" "$r"; else run new "$PWD" "$r"; fi
	done
done
cat "$dir"/new.*.txt >"$out"
status=0
go run ./scripts/benchcmp -old "$dir/old.*.txt" -new "$dir/new.*.txt" -old-name "$against" -guard "$guard" || status=$?
if [ "$short" = 0 ]; then
	echo
	echo "This tree, its last round:"
	go run ./scripts/benchtable <"$dir/new.$(printf %03d "$rounds").txt"
fi
exit "$status"
