#!/usr/bin/env bash
# interop.sh — run rnic against the Linux kernel's Soft-RoCE (rdma_rxe) and
# the real perftest, in a VM on a private network namespace.
#
# A development check, not part of the default test run: it needs root,
# qemu and the rxe-peer harness (../shared/tools/rxe-peer, or RXE_PEER),
# and takes tens of minutes because the VM runs under full emulation.
#
# For every test (write_bw read_bw send_bw atomic_bw write_lat read_lat
# send_lat), size, QP count, MTU (1024: link MTU 1500; 4096: 9000) and
# loss (0, 1 %), it runs both directions:
#   rnic client (host side of the namespace, 198.18.0.1) → ib_* server in the VM (198.18.0.11)
#   ib_* client in the VM                                 → rnic server on the host side
# With loss, the VM drops 1 % of what it sends (tc netem in the guest; the
# host kernel has no netem) and rnic drops 1 % of what it sends (its own
# link, --loss 0.01).
#
# A run passes when both programs exit 0 and print their result line:
# perftest exits non-zero on any error completion, so does rnic perf.
#
# Usage: sudo scripts/interop.sh [--quick] [--keep] [--provider]
#   --quick     fewer sizes (64 B, 64 KiB) and one QP count (1)
#   --keep      leave the VM running at the end
#   --provider  instead: Debian's unmodified programs through rnic's
#               libibverbs.so.1 (a NIC of "rnic nic up" on the host side)
#               against the same programs on rxe0, both directions: the
#               seven perftest tests (default size, 200 iterations) and
#               ibv_{rc,uc,ud,srq}_pingpong with -c (each side checks the
#               data). Needs gcc and libibverbs-dev on the host.
#   --nonposted instead: ATOMIC WRITE and FLUSH (IBTA 1.5) against rxe on
#               Linux 6.12 (the harness's RXE_PEER_BACKPORTS=1 image; 6.1
#               lacks both): rnic (Go) as the requester of both against
#               provider/tests/nonposted.c on rxe0; that program on rxe0 as
#               the ATOMIC WRITE requester against itself through rnic's
#               library on the host side; and the reverse. rdma-core 44
#               cannot post a FLUSH, so FLUSH is rnic to rxe only.
#   --cm        instead: RDMA CM against Linux's rdma_cm on rxe0, both
#               directions: rping -V (1000 pings) with the cm package's
#               cm.Dial as its client and cm.Listen as its server, udaddy
#               with cm.DialUD and cm.ListenUD; then Debian's unmodified
#               rping, udaddy, ib_write_bw -R, rstream and riostream
#               (rsockets) through rnic's librdmacm
#               (a NIC of rnic nic up) against the same on rxe0.
# Environment: RXE_PEER (harness directory), TESTS, SIZES, QPS, MTUS,
# LOSSES to narrow the matrix; OUT (results file, default
# /tmp/rnic-interop.txt).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peer=${RXE_PEER:-$here/../shared/tools/rxe-peer}
out=${OUT:-/tmp/rnic-interop.txt}
quick=0
keep=0
provider=0
nonposted=0
cmmode=0
for a in "$@"; do
	case $a in
	--quick) quick=1 ;;
	--keep) keep=1 ;;
	--provider) provider=1 ;;
	--nonposted) nonposted=1 ;;
	--cm) cmmode=1 ;;
	*) echo "usage: $0 [--quick] [--keep] [--provider | --nonposted | --cm]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "interop.sh: must run as root (network namespace, VM)" >&2; exit 2; }
[ -x "$peer/peer.sh" ] || { echo "interop.sh: no rxe-peer harness at $peer (set RXE_PEER)" >&2; exit 2; }

TESTS=${TESTS:-"write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat"}
if [ $quick = 1 ]; then
	SIZES=${SIZES:-"64 65536"}
	QPS=${QPS:-"1"}
else
	SIZES=${SIZES:-"2 64 4096 65536 1048576"}
	QPS=${QPS:-"1 4"}
fi
MTUS=${MTUS:-"1024 4096"}
LOSSES=${LOSSES:-"0 1"}

host=198.18.0.1
vm=198.18.0.11
bin=$here/bin/rnic
mkdir -p "$here/bin"
echo "building rnic" >&2
(cd "$here" && go build -o "$bin" ./cmd/rnic) || exit 1
if [ $nonposted = 1 ]; then
	export RXE_PEER_BACKPORTS=1
fi
"$peer/build.sh" >/dev/null || exit 1

# iters picks few iterations: the emulated VM moves about 0.1 Gb/s. A
# 1 MiB round trip at 1 % loss takes seconds (rxe's requester goes back to
# the gap and the responder replays the rest, about ten times per 1 MiB).
iters() {
	local test=$1 size=$2
	case $test in
	*_lat) if [ "$size" -ge 1048576 ]; then echo 20; else echo 100; fi ;;
	*) if [ "$size" -ge 1048576 ]; then echo 10; elif [ "$size" -ge 65536 ]; then echo 50; else echo 200; fi ;;
	esac
}

pass=0
fail=0
printf '%-9s %-10s %8s %3s %5s %5s  %-4s %s\n' direction test size qps mtu loss pass result >"$out"

# record appends a row to the results and prints it.
record() {
	local row
	row=$(printf '%-9s %-10s %8s %3s %5s %4s%%  %-4s %s' "$@")
	echo "$row" >>"$out"
	echo "$row"
}

# result extracts perftest's result row (bandwidth or latency) from output.
result() {
	awk '/#bytes/ {getline; print; exit}' <<<"$1" | tr -s ' \t' ' ' | sed 's/^ //'
}

run_pair() {
	local dir=$1 test=$2 size=$3 qps=$4 mtu=$5 loss=$6
	local n args sargs rloss=""
	n=$(iters "$test" "$size")
	# -u 18: a local ACK timeout of 1.07 s instead of perftest's 67 ms.
	# The emulated VM's rxe answers one QP's READs for a while before it
	# gets to the next QP: with 4 QPs of 1 MiB READs a QP hears nothing
	# for longer than 67 ms, times out, and every resent READ request
	# makes rxe send its 1 MiB again. Both sides get the same timeout.
	args="-F -n $n -u 18"
	[ "$test" != atomic_bw ] && args="$args -s $size"
	[ "$qps" != 1 ] && args="$args -q $qps"
	[ "$loss" != 0 ] && rloss="--loss 0.0$loss"
	local rout vout rrc vrc
	if [ "$dir" = rnic-cli ]; then
		local job
		job=$("$peer/peer.sh" server a -- "ib_$test -d rxe0 -x 1 $args" 2>/dev/null) || {
			record "$dir" "$test" "$size" "$qps" "$mtu" "$loss" FAIL "ib server did not start"
			fail=$((fail + 1)); return; }
		# peer.sh returns when perftest has printed its banner, which
		# comes just before it listens: give it a moment, as perftest's
		# client does not retry a refused connection (nor does rnic's).
		sleep 1
		rout=$(timeout 300 ip netns exec rxepeer "$bin" perf "$test" -d $host $args $rloss --timeout 60s $vm 2>/tmp/rnic-interop-err.$$); rrc=$?
		rout="$rout
$(grep -v "iterations (" /tmp/rnic-interop-err.$$)"; rm -f /tmp/rnic-interop-err.$$
		vout=$("$peer/peer.sh" wait a "$job" --timeout 120 2>&1); vrc=$?
	else
		ip netns exec rxepeer timeout 300 "$bin" perf "$test" -d $host $args $rloss --timeout 60s >/tmp/rnic-interop-srv.$$ 2>/tmp/rnic-interop-err.$$ &
		local spid=$!
		sleep 1
		vout=$("$peer/peer.sh" exec a --timeout 240 -- "ib_$test -d rxe0 -x 1 $args $host" 2>&1); vrc=$?
		wait $spid; rrc=$?
		rout="$(cat /tmp/rnic-interop-srv.$$)
$(grep -v "iterations (" /tmp/rnic-interop-err.$$)"; rm -f /tmp/rnic-interop-srv.$$ /tmp/rnic-interop-err.$$
	fi
	local res
	res=$(result "$rout")
	[ -z "$res" ] && res=$(result "$vout")
	if [ $rrc = 0 ] && [ $vrc = 0 ] && [ -n "$res" ]; then
		pass=$((pass + 1))
		record "$dir" "$test" "$size" "$qps" "$mtu" "$loss" PASS "$res$rerun"
		return
	fi
	{ echo "--- $dir $test $size q$qps mtu$mtu loss$loss$rerun"; echo "$rout" | tail -20; echo "--- ib side"; echo "$vout" | tail -20; } >>"$out.log"
	if [ -z "$rerun" ] && vm_sick; then
		# The emulated VM's virtio-net stopped transmitting (the guest
		# logs "transmit queue 0 timed out"; seen after minutes of
		# traffic, and the same case then passes on a fresh VM): the
		# peer cannot send anything, so the case says nothing about
		# either side's protocol.
		# Boot a fresh VM and run the case again; the row says so.
		echo "--- VM a's network hung; restarting it and running the case again" >>"$out.log"
		restarts=$((restarts + 1))
		start_vm "$mtu" "$loss"
		rerun=" (rerun: VM network hung)"
		run_pair "$@"
		rerun=""
		return
	fi
	fail=$((fail + 1))
	record "$dir" "$test" "$size" "$qps" "$mtu" "$loss" FAIL "rnic rc=$rrc ib rc=$vrc$rerun"
}

# vm_sick reports whether VM a's network is dead: its virtio-net transmit
# queue hung, or it does not answer ping.
vm_sick() {
	grep -q "transmit queue 0 timed out" "${RXE_PEER_STATE:-/tmp/rxe-peer}/vm-a/console.log" 2>/dev/null && return 0
	! ip netns exec rxepeer ping -c 2 -W 2 -q $vm >/dev/null 2>&1
}

# start_vm (re)starts VM a with the link MTU for path MTU $1 and the
# guest-side loss $2 (percent).
start_vm() {
	local link=1500
	[ "$1" = 4096 ] && link=9000
	"$peer/peer.sh" start --vms 1 --mtu $link >&2 || { echo "interop.sh: VM did not start" >&2; exit 1; }
	if [ "$2" != 0 ]; then
		"$peer/peer.sh" exec a -- "tc qdisc replace dev eth0 root netem loss ${2}%" >/dev/null
	fi
}

# run_prog runs an unmodified program through rnic's library on the host
# side against the same program on rxe0 in VM a: direction rnic-cli (the
# host side is the client) or ib-cli.
run_prog() {
	local dir=$1 prog=$2 args=$3 hout vout hrc vrc
	local host_cmd="ip netns exec rxepeer env RNIC_RUN_DIR=$run LD_LIBRARY_PATH=$lib timeout 180 $prog -d rnic0 $args"
	if [ "$dir" = rnic-cli ]; then
		local job
		job=$("$peer/peer.sh" server a -- "$prog -d rxe0 $args" 2>/dev/null) || {
			record "$dir" "$prog" - 1 1024 0 FAIL "the VM's server did not start"; fail=$((fail + 1)); return; }
		sleep 1
		hout=$($host_cmd $vm 2>&1); hrc=$?
		vout=$("$peer/peer.sh" wait a "$job" --timeout 120 2>&1); vrc=$?
	else
		$host_cmd >/tmp/rnic-interop-srv.$$ 2>&1 &
		local spid=$!
		sleep 1
		vout=$("$peer/peer.sh" exec a --timeout 180 -- "$prog -d rxe0 $args $host" 2>&1); vrc=$?
		wait $spid; hrc=$?
		hout=$(cat /tmp/rnic-interop-srv.$$); rm -f /tmp/rnic-interop-srv.$$
	fi
	local res
	res=$(result "$hout")
	[ -z "$res" ] && res=$(result "$vout") # a latency test's server prints no result
	[ -z "$res" ] && res=$(grep -m1 'bytes in' <<<"$hout")
	if [ $hrc = 0 ] && [ $vrc = 0 ] && [ -n "$res" ]; then
		pass=$((pass + 1))
		record "$dir" "$prog" - 1 1024 0 PASS "$res"
		return
	fi
	{ echo "--- $dir $prog $args"; echo "$hout" | tail -20; echo "--- rxe side"; echo "$vout" | tail -20; } >>"$out.log"
	fail=$((fail + 1))
	record "$dir" "$prog" - 1 1024 0 FAIL "rnic side rc=$hrc rxe side rc=$vrc"
}

# finish_library ends a run of the library's modes (--provider,
# --nonposted): the NIC down, the VM stopped unless --keep, the summary,
# and the exit status (0: all passed).
finish_library() {
	ip netns exec rxepeer env RNIC_RUN_DIR=$run "$bin" nic down --all >&2
	[ $keep = 1 ] || "$peer/peer.sh" stop >&2
	rm -rf "$lib" "$run"
	echo
	echo "$pass passed, $fail failed in $(( $(date +%s) - start )) s; table in $out, failures in $out.log"
	[ $fail = 0 ]
	exit
}

start=$(date +%s)
: >"$out.log"
rerun=""
restarts=0
if [ $cmmode = 1 ]; then
	lib=$(mktemp -d /tmp/rnic-interop-lib.XXXXXX)
	run=$(mktemp -d /tmp/rnic-interop-run.XXXXXX)
	(cd "$here" && go test -c -o "$lib/cm.test" ./cm) || exit 1
	start_vm 1024 0
	# cmrow name, the Go test's status and output, the VM side's, what the
	# Go test logs when it passed.
	cmrow() {
		if [ "$2" = 0 ] && [ "$4" = 0 ] && grep -q "$6" <<<"$3"; then
			pass=$((pass + 1)); record "$1" cm - 1 1024 0 PASS "$(grep -o "$6.*" <<<"$3" | head -1)"
		else
			fail=$((fail + 1)); record "$1" cm - 1 1024 0 FAIL "go rc=$2 rxe rc=$4"
			{ echo "--- $1"; echo "$3" | tail -20; echo "$5" | tail -20; } >>"$out.log"
		fi
	}
	gotest() { # env assignments..., then the test's name
		local t=${*: -1}
		ip netns exec rxepeer env RNIC_CM_ADDR=$host "${@:1:$#-1}" timeout 150 "$lib/cm.test" -test.run "^$t\$" -test.v 2>&1
	}
	# cm.Dial (Go) → rping -s -V on rxe0.
	job=$("$peer/peer.sh" server a --port 7174 -- "rping -s -a $vm -p 7174 -C 1000 -V" 2>/dev/null)
	sleep 1
	o=$(gotest RNIC_RPING_SERVER=$vm:7174 RNIC_RPING_COUNT=1000 TestInteropRping); rc=$?
	vo=$("$peer/peer.sh" wait a "$job" --timeout 120 2>&1); vrc=$?
	cmrow rping-go-cli "$rc" "$o" "$vrc" "$vo" "rping client: 1000 pings verified"
	# rping -c -V on rxe0 → cm.Listen (Go).
	gotest RNIC_RPING_LISTEN=7174 RNIC_RPING_COUNT=1000 TestInteropRping >/tmp/rnic-cm-srv.$$ &
	spid=$!
	sleep 2
	vo=$("$peer/peer.sh" exec a --timeout 120 -- "rping -c -a $host -p 7174 -C 1000 -V" 2>&1); vrc=$?
	wait $spid; rc=$?
	cmrow rping-rxe-cli "$rc" "$(cat /tmp/rnic-cm-srv.$$)" "$vrc" "$vo" "rping server: 1000 pings served"
	# cm.DialUD (Go) → udaddy on rxe0.
	job=$("$peer/peer.sh" server a --port 7174 -- "udaddy -b $vm" 2>/dev/null)
	sleep 1
	o=$(gotest RNIC_UDADDY_SERVER=$vm:7174 TestInteropUdaddy); rc=$?
	vo=$("$peer/peer.sh" wait a "$job" --timeout 60 2>&1); vrc=$?
	cmrow udaddy-go-cli "$rc" "$o" "$vrc" "$vo" "udaddy client: 10 datagrams"
	# udaddy -s on rxe0 → cm.ListenUD (Go).
	gotest RNIC_UDADDY_LISTEN=7174 TestInteropUdaddy >/tmp/rnic-cm-srv.$$ &
	spid=$!
	sleep 2
	vo=$("$peer/peer.sh" exec a --timeout 60 -- "udaddy -s $host" 2>&1); vrc=$?
	wait $spid; rc=$?
	cmrow udaddy-rxe-cli "$rc" "$(cat /tmp/rnic-cm-srv.$$)" "$vrc" "$vo" "udaddy server: 10 datagrams"
	rm -f /tmp/rnic-cm-srv.$$
	# Unmodified programs through rnic's librdmacm on a NIC of rnic nic
	# up (the host side's address now), against the same on rxe0.
	"$here/scripts/build-provider.sh" "$lib" >/dev/null || exit 1
	ip netns exec rxepeer env RNIC_RUN_DIR=$run "$bin" nic up --addr $host >&2 || exit 1
	hostcm() { ip netns exec rxepeer env RNIC_RUN_DIR=$run LD_LIBRARY_PATH=$lib timeout 150 "$@"; }
	libpair() { # name, VM server, host client, host server, VM client, what a passing client prints[, wait]
		job=$("$peer/peer.sh" server a --port 7174 -- "$2" 2>/dev/null)
		# perftest -R says it waits for a client before it listens; and
		# Debian's perftest 4.5-0.20 crashes when a REJ makes it retry
		# (a use-after-free in its retry loop, fixed upstream by
		# 3d9d8d0): its server on the emulated VM gets longer.
		sleep "${7:-3}"
		o=$(hostcm $3 2>&1); rc=$?
		vo=$("$peer/peer.sh" wait a "$job" --timeout 120 2>&1); vrc=$?
		cmrow "$1-rnic-cli" "$rc" "$o" "$vrc" "$vo" "$6"
		hostcm $4 >/tmp/rnic-cm-srv.$$ 2>&1 &
		spid=$!
		sleep 3
		vo=$("$peer/peer.sh" exec a --timeout 150 -- "$5" 2>&1); vrc=$?
		wait $spid; rc=$?
		cmrow "$1-ib-cli" "$vrc" "$vo" "$rc" "$(cat /tmp/rnic-cm-srv.$$)" "$6"
	}
	libpair rping "rping -s -a $vm -C 1000 -V -v" "rping -c -a $vm -C 1000 -V -v" \
		"rping -s -a $host -C 1000 -V -v" "rping -c -a $host -C 1000 -V -v" "ping data: rdma-ping-999"
	libpair udaddy "udaddy -b $vm" "udaddy -s $vm" "udaddy -b $host" "udaddy -s $host" "data transfers complete"
	libpair ib_write_bw_R "ib_write_bw -R -d rxe0 -x 1 -n 200" "ib_write_bw -R -d rnic0 -x 1 -n 200 $vm" \
		"ib_write_bw -R -d rnic0 -x 1 -n 200" "ib_write_bw -R -d rxe0 -x 1 -n 200 $host" " 65536 " 10
	# rsockets: rdma-core's rsocket protocol on rxe0 against rnic's.
	rs="-S 65536 -C 50 -T v"
	libpair rstream "rstream -b $vm $rs" "rstream -s $vm $rs" "rstream -b $host $rs" "rstream -s $host $rs" "custom    64k     50"
	# The harness's image has no riostream: Debian's goes in by the share.
	cp "$(command -v riostream)" "${RXE_PEER_STATE:-/tmp/rxe-peer}/vm-a/share/riostream"
	libpair riostream "/share/riostream -b $vm $rs" "riostream -s $vm $rs" "riostream -b $host $rs" \
		"/share/riostream -s $host $rs" "custom    64k     50"
	rm -f /tmp/rnic-cm-srv.$$
	finish_library
fi
if [ $nonposted = 1 ]; then
	lib=$(mktemp -d /tmp/rnic-interop-lib.XXXXXX)
	run=$(mktemp -d /tmp/rnic-interop-run.XXXXXX)
	"$here/scripts/build-provider.sh" "$lib" >/dev/null || exit 1
	(cd "$here" && go test -c -o "$lib/rnic.test" .) || exit 1
	cc -O2 -Wall -o "$lib/nonposted" "$here/provider/tests/nonposted.c" -libverbs || exit 1
	"$peer/peer.sh" start --vms 1 --backports >&2 || { echo "interop.sh: VM did not start" >&2; exit 1; }
	cp "$lib/nonposted" "${RXE_PEER_STATE:-/tmp/rxe-peer}/vm-a/share/nonposted"
	np() { # name, command status, expected output, output
		if [ "$2" = 0 ] && grep -q "$3" <<<"$4"; then
			pass=$((pass + 1)); record "$1" atomic/flush - 1 1024 0 PASS "$3"
		else
			fail=$((fail + 1)); record "$1" atomic/flush - 1 1024 0 FAIL "rc=$2"
			{ echo "--- $1"; echo "$4" | tail -20; } >>"$out.log"
		fi
	}
	# rnic (Go API) requests ATOMIC WRITE of rxe 6.12, then FLUSH: rxe
	# 6.12 drops a conformant FLUSH (its ICRC check covers a FLUSH's
	# headers twice: rxe_opcode.c gives FLUSH no payload offset), so the
	# FLUSH row is expected to fail until rxe is fixed; it is reported,
	# not counted.
	job=$("$peer/peer.sh" server a --port 18950 -- "/share/nonposted server rxe0 18950" 2>/dev/null)
	sleep 1
	o=$(ip netns exec rxepeer env RNIC_NONPOSTED_PEER=$vm:18950 RNIC_NONPOSTED_ADDR=$host RNIC_NONPOSTED_FLUSH=0 \
		"$lib/rnic.test" -test.run '^TestInteropNonPosted$' -test.v 2>&1); rc=$?
	np rnic-go-cli "$rc" "ATOMIC WRITE completed" "$o"
	o=$("$peer/peer.sh" wait a "$job" --timeout 60 2>&1); rc=$?
	np rxe-server "$rc" "word 1122334455667788" "$o"
	job=$("$peer/peer.sh" server a --port 18953 -- "/share/nonposted server rxe0 18953" 2>/dev/null)
	sleep 1
	o=$(ip netns exec rxepeer env RNIC_NONPOSTED_PEER=$vm:18953 RNIC_NONPOSTED_ADDR=$host \
		"$lib/rnic.test" -test.run '^TestInteropNonPosted$' -test.v 2>&1); rc=$?
	if [ $rc = 0 ]; then
		record rnic-go-cli flush - 1 1024 0 PASS "FLUSH (range, region) answered by rxe"
	else
		record rnic-go-cli flush - 1 1024 0 KNOWN "rxe 6.12 does not answer FLUSH (its ICRC bug)"
		{ echo "--- rnic-go-cli flush"; echo "$o" | tail -5; } >>"$out.log"
	fi
	"$peer/peer.sh" kill a "$job" >/dev/null 2>&1
	# The host side's address now for a NIC of rnic nic up.
	ip netns exec rxepeer env RNIC_RUN_DIR=$run "$bin" nic up --addr $host >&2 || exit 1
	# rxe 6.12's ATOMIC WRITE to rnic's library on the host side.
	ip netns exec rxepeer env RNIC_RUN_DIR=$run LD_LIBRARY_PATH=$lib "$lib/nonposted" server rnic0 18951 >/tmp/rnic-np-srv.$$ 2>&1 &
	spid=$!
	sleep 1
	o=$("$peer/peer.sh" exec a --timeout 60 -- "/share/nonposted client rxe0 $host 18951" 2>&1); rc=$?
	np ib-cli "$rc" "atomic_write ok" "$o"
	wait $spid; rc=$?
	np rnic-server "$rc" "word 1122334455667788" "$(cat /tmp/rnic-np-srv.$$)"
	# rnic's library's ATOMIC WRITE (ibv_wr_atomic_write) to rxe 6.12.
	job=$("$peer/peer.sh" server a --port 18952 -- "/share/nonposted server rxe0 18952" 2>/dev/null)
	sleep 1
	o=$(ip netns exec rxepeer env RNIC_RUN_DIR=$run LD_LIBRARY_PATH=$lib "$lib/nonposted" client rnic0 $vm 18952 2>&1); rc=$?
	np rnic-cli "$rc" "atomic_write ok" "$o"
	o=$("$peer/peer.sh" wait a "$job" --timeout 60 2>&1); rc=$?
	np rxe-server "$rc" "word 1122334455667788" "$o"
	rm -f /tmp/rnic-np-srv.$$
	finish_library
fi
if [ $provider = 1 ]; then
	lib=$(mktemp -d /tmp/rnic-interop-lib.XXXXXX)
	run=$(mktemp -d /tmp/rnic-interop-run.XXXXXX)
	"$here/scripts/build-provider.sh" "$lib" >/dev/null || exit 1
	start_vm 1024 0
	ip netns exec rxepeer env RNIC_RUN_DIR=$run "$bin" nic up --addr $host >&2 || exit 1
	for t in write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat; do
		for dir in rnic-cli ib-cli; do
			run_prog $dir ib_$t "-x 1 -n 200"
		done
	done
	for pp in rc uc ud srq; do
		size=4096
		[ $pp = ud ] && size=1024
		for dir in rnic-cli ib-cli; do
			run_prog $dir ibv_${pp}_pingpong "-g 1 -n 100 -s $size -c"
		done
	done
	finish_library
fi
for mtu in $MTUS; do
	start_vm "$mtu" 0
	for loss in $LOSSES; do
		if [ "$loss" != 0 ]; then
			"$peer/peer.sh" exec a -- "tc qdisc replace dev eth0 root netem loss ${loss}%" >/dev/null
		else
			"$peer/peer.sh" exec a -- "tc qdisc del dev eth0 root 2>/dev/null; true" >/dev/null
		fi
		for test in $TESTS; do
			sizes=$SIZES
			[ "$test" = atomic_bw ] && sizes=8
			qpss=$QPS
			case $test in *_lat) qpss=1 ;; esac
			for size in $sizes; do
				for q in $qpss; do
					for dir in rnic-cli ib-cli; do
						run_pair $dir "$test" "$size" "$q" "$mtu" "$loss"
					done
				done
			done
		done
	done
	[ $keep = 1 ] || "$peer/peer.sh" stop >&2
done

echo
echo "$pass passed, $fail failed in $(( $(date +%s) - start )) s ($restarts VM restarts); table in $out, failures in $out.log"
[ $fail = 0 ]
