#!/usr/bin/env bash
# Regenerates cmd/rnic/default.pgo, the CPU profile that go build, go run
# and go install of ./cmd/rnic use for profile-guided optimization (Go
# picks default.pgo in a main package's directory). The profile is of
# what the rnic command spends its time on: the simulator (rnic sim: 64 B
# WRITEs on 1 and 4096 QPs in metadata mode, an 8 -> 1 incast with a shared
# buffer and PFC) and the wall-clock data path (in-process WRITEs, the
# UDP loopback perftest of rnic perf and rnic nic up). Run it after a
# change that moves where that time goes; a stale profile still builds,
# and gains less.
#   ./scripts/pgo.sh        (about half a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d "${TMPDIR:-/tmp}/rnic-pgo.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# profile NAME PKG GOMAXPROCS PATTERN BENCHTIME: one benchmark run's CPU
# profile, from a binary built without PGO (the profile is of plain code).
profile() {
	local name=$1 pkg=$2 procs=$3 pattern=$4 time=$5
	go test -pgo=off -c -o "$dir/$name.test" "$pkg"
	(cd "$pkg" && env ${procs:+GOMAXPROCS=$procs} "$dir/$name.test" -test.run '^$' \
		-test.bench "$pattern" -test.benchtime "$time" -test.cpuprofile "$dir/$name.pprof" >/dev/null)
}
profile sim ./sim/perf 1 'SimSpeed/qps=(1|4096)/metadata$' 1x
profile incast ./sim/perf 1 'SimSpeed/incast8/dcqcn/fabric=shared' 1x
profile mem . '' 'WriteBW/(64B|64KiB)$|WriteLat' 1s
profile udp ./perftest '' 'LoopbackWrite(BW|Lat)$' 1x
go tool pprof -proto "$dir"/*.pprof >cmd/rnic/default.pgo
echo "pgo: wrote cmd/rnic/default.pgo ($(wc -c <cmd/rnic/default.pgo) bytes)" >&2
