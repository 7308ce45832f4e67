#!/usr/bin/env bash
# bench-provider.sh — the libibverbs provider's speed beside the Go path
# and the raw UDP reference, in one run (issue 27's speed table).
#
# Five tests: write_lat, read_lat, send_lat (-s 8) and write_bw, read_bw
# (-s 65536, MTU 4096). Each round runs every test four ways, in turn:
#   go1  the Go path, both sides in one process (go test -bench Loopback
#        ./perftest: two NICs on link/udp over loopback), with its raw UDP
#        reference (raw) measured in the same benchmark;
#   go2  the Go path in two processes: rnic perf server and client on
#        127.0.0.73 and .74;
#   c1   Debian's unmodified ib_*_lat / ib_*_bw through rnic's
#        libibverbs.so.1, server and client as two programs on two NICs
#        of one "rnic nic up --addr 127.0.0.71 --addr 127.0.0.72" (sibling
#        NICs: frames handed over in memory);
#   c2   the same programs on two NICs of two "rnic nic up" processes
#        (frames through loopback UDP).
# The provider's NICs are up (idle) only while their rows run. After the
# last round it prints, per test and way, the median and the range over
# the rounds, and the provider's medians as a ratio of the Go path's in
# the same arrangement (c1/go1, c2/go2): latency below 1 and bandwidth
# above 1 are the provider doing better. The machine is shared and noisy:
# read ranges and ratios, not one figure. Needs gcc, libibverbs-dev and
# perftest.
#   ./scripts/bench-provider.sh [ROUNDS]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
tmp=$(mktemp -d)
export RNIC_RUN_DIR=$tmp/run XDG_RUNTIME_DIR=$tmp/xdg
mkdir -p "$RNIC_RUN_DIR" "$XDG_RUNTIME_DIR"
trap '"$tmp/rnic" nic down --all >/dev/null 2>&1; rm -rf "$tmp"' EXIT
go build -o "$tmp/rnic" ./cmd/rnic
go test -c -o "$tmp/perftest.test" ./perftest
./scripts/build-provider.sh "$tmp/lib" >/dev/null
res=$tmp/results # lines: way test value

lat_tests="write_lat read_lat send_lat"
bw_tests="write_bw read_bw"
args() { # test: the perftest arguments of the test
	case $1 in
	*_lat) echo "-s 8 -n 20000" ;;
	*) echo "-s 65536 -n 5000 -m 4096" ;;
	esac
}
field() { # test: the column of the result row to keep (t_typical or BW average)
	case $1 in
	*_lat) echo 5 ;;
	*) echo 4 ;;
	esac
}

row() { # the first result row after perftest's header (progress lines are not rows)
	awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 4 && $2 ~ /^[0-9]+$/ { print; exit }'
}

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
	row <<<"$out"
}

goPair() { # test, args: rnic perf server and client, two processes; prints the client's result row
	local t=$1
	shift
	"$tmp/rnic" perf "$t" -d 127.0.0.73 -p 18998 "$@" >/dev/null 2>&1 &
	local s=$!
	local out=""
	for _ in $(seq 50); do
		sleep 0.1
		out=$("$tmp/rnic" perf "$t" -d 127.0.0.74 -p 18998 "$@" 127.0.0.73 2>&1) && break
	done
	wait $s || true
	row <<<"$out"
}

provider() { # way (c1 or c2): every test through the provider
	local way=$1
	if [ "$way" = c1 ]; then
		"$tmp/rnic" nic up --addr 127.0.0.71 --addr 127.0.0.72 >/dev/null
	else
		"$tmp/rnic" nic up --addr 127.0.0.71 >/dev/null
		"$tmp/rnic" nic up --addr 127.0.0.72 >/dev/null
	fi
	for t in $lat_tests $bw_tests; do
		# shellcheck disable=SC2046
		v=$(pair "ib_$t" $(args "$t") | awk -v f="$(field "$t")" '{print $f}')
		echo "$way $t ${v:-FAILED}" | tee -a "$res"
	done
	"$tmp/rnic" nic down --all >/dev/null
}

for r in $(seq "$rounds"); do
	echo "== round $r"
	"$tmp/perftest.test" -test.run '^$' -test.bench Loopback -test.benchtime 1x >"$tmp/go1" 2>&1 || true
	for t in $lat_tests $bw_tests; do
		name=$(awk -v t="$t" 'BEGIN { split(t, p, "_"); print "BenchmarkLoopback" toupper(substr(p[1],1,1)) substr(p[1],2) (p[2] == "bw" ? "BW" : "Lat") }')
		line=$(grep "^$name-" "$tmp/go1" || true)
		case $t in
		*_lat) unit=t_typical_usec raw=raw_usec ;;
		*) unit=MB/s raw=raw_MB/s ;;
		esac
		v=$(awk -v u="$unit" '{for (i = 3; i < NF; i++) if ($(i+1) == u) print $i}' <<<"$line")
		w=$(awk -v u="$raw" '{for (i = 3; i < NF; i++) if ($(i+1) == u) print $i}' <<<"$line")
		echo "go1 $t ${v:-FAILED}" | tee -a "$res"
		echo "raw $t ${w:-FAILED}" | tee -a "$res"
	done
	for t in $lat_tests $bw_tests; do
		# shellcheck disable=SC2046
		v=$(goPair "$t" $(args "$t") | awk -v f="$(field "$t")" '{print $f}')
		echo "go2 $t ${v:-FAILED}" | tee -a "$res"
	done
	provider c1
	provider c2
done

echo
echo "== $rounds rounds: median (min-max); µs typical for *_lat, MB/s average for *_bw"
awk '
	{ v[$2 " " $1] = v[$2 " " $1] " " $3; tests[$2] = 1 }
	function med(s,   a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		lo = a[1]; hi = a[n]
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		printf "%-10s %-22s %-22s %-22s %-22s %-22s %7s %7s\n", "test", "raw UDP", "go1", "c1 (NICs 1 process)", "go2", "c2 (NICs 2 processes)", "c1/go1", "c2/go2"
		n = split("write_lat read_lat send_lat write_bw read_bw", order, " ")
		for (k = 1; k <= n; k++) {
			t = order[k]
			if (!(t in tests)) continue
			line = sprintf("%-10s", t)
			split("raw go1 c1 go2 c2", ways, " ")
			for (w = 1; w <= 5; w++) {
				m[ways[w]] = med(v[t " " ways[w]])
				line = line sprintf(" %-22s", sprintf("%.1f (%s-%s)", m[ways[w]], lo, hi))
			}
			r1 = m["go1"] > 0 ? m["c1"] / m["go1"] : 0
			r2 = m["go2"] > 0 ? m["c2"] / m["go2"] : 0
			print line sprintf(" %7.2f %7.2f", r1, r2)
		}
	}' "$res"
