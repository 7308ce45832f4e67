#!/usr/bin/env bash
# ecn-interop.sh — DCQCN on the real-time path (link/udp): against a Linux
# RED qdisc that marks ECN, and against the kernel's Soft-RoCE (rdma_rxe),
# in a VM of the rxe-peer harness on its private network namespace.
#
# A development check, not part of the default test run: it needs root,
# qemu and the rxe-peer harness (../shared/tools/rxe-peer, or RXE_PEER),
# and takes a few minutes because the VM runs under full emulation.
#
# Three cases:
#  (a) red-lo: RED with ECN on the real-time path. rnic (a static build)
#      and the guest kernel's sch_tbf.ko and sch_red.ko go into VM a's 9p
#      share (the harness's initramfs has only sch_netem; the host kernel
#      has no sch_red, so RED runs in the guest). In VM a, the loopback
#      is shaped by "tbf rate $RATE" with a child "red ... ecn", and an
#      rnic perf write_bw server (127.0.0.1) and client (127.0.0.2), both
#      with --dcqcn, run through it: RED marks their ECT(0) packets CE,
#      the server's notification point sends CNPs, the client's reaction
#      point cuts its rate. Passes when both complete, tc -s reports
#      marked packets, the server's np_cnp_sent > 0 and the client's
#      rp_cnp_handled > 0.
#  (b) rxe-gets-cnps: rnic perf write_bw server on the host side
#      (198.18.0.1) with --dcqcn --rx-mark-ce 0.05 (it marks 5 % of the
#      ECN-capable frames it receives CE, as a congested switch would),
#      ib_write_bw client on rxe in VM a with --tclass 2 (its packets
#      ECT(0)): rnic sends CNPs (BTH opcode 0x81) to rxe's QP. Passes
#      when ib_write_bw completes with its result line and rnic's
#      np_cnp_sent > 0. Records rxe's hw_counters and "rdma statistic"
#      before and after, the CNPs on the wire (tcpdump on rxetap-a), and
#      rnic's tx_packets beside rxe's rcvd_pkts: rxe 6.1 drops a CNP in
#      rxe_rcv() -> hdr_check() -> check_type_state() (an RC QP takes
#      only opcodes with the top bits 000: 0x81 & 0xe0 = 0x80) before it
#      counts the packet, and has no counter for it.
#  (c) rnic-ect-to-rxe: rnic perf write_bw client on the host side with
#      --dcqcn (its packets leave ECT(0)) against ib_write_bw server on
#      rxe: passes when both complete (the ICRC masks the ECN bits, so
#      rxe accepts ECN-capable RoCE packets). tcpdump shows the TOS.
# They run in the order (b), (c), (a): rxe's kernel socket holds UDP port
# 4791 on every address of the guest, so (a) deletes rxe0 and unloads
# rdma_rxe first (and loads it again and re-adds rxe0 afterwards).
#
# Usage: sudo scripts/ecn-interop.sh [--keep]
#   --keep  leave the VM running at the end
# Environment: RXE_PEER (harness directory), RATE (tbf/RED rate, default
# 2mbit: rnic moves about 5 Mb/s through the emulated guest's loopback,
# so the bottleneck must be below that), ITERS_A (default 200 x 4 KiB),
# ITERS_B (default 200 x 64 KiB),
# OUT (results file, default /tmp/rnic-ecn-interop.txt; the full outputs
# go to OUT.log).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peer=${RXE_PEER:-$here/../shared/tools/rxe-peer}
out=${OUT:-/tmp/rnic-ecn-interop.txt}
keep=0
for a in "$@"; do
	case $a in
	--keep) keep=1 ;;
	*) echo "usage: $0 [--keep]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "ecn-interop.sh: must run as root (network namespace, VM)" >&2; exit 2; }
[ -x "$peer/peer.sh" ] || { echo "ecn-interop.sh: no rxe-peer harness at $peer (set RXE_PEER)" >&2; exit 2; }

RATE=${RATE:-2mbit}
ITERS_A=${ITERS_A:-200}
ITERS_B=${ITERS_B:-200}
host=198.18.0.1
vm=198.18.0.11
cache=${RXE_PEER_CACHE:-/var/cache/rxe-peer}
share=${RXE_PEER_STATE:-/tmp/rxe-peer}/vm-a/share
bin=$here/bin/rnic-static
tmp=$(mktemp -d /tmp/rnic-ecn.XXXXXX)
mkdir -p "$here/bin"
echo "building rnic (static)" >&2
(cd "$here" && CGO_ENABLED=0 go build -o "$bin" ./cmd/rnic) || exit 1
"$peer/build.sh" >/dev/null || exit 1

start=$(date +%s)
pass=0
fail=0
: >"$out"
: >"$out.log"

# record NAME PASS|FAIL DETAIL appends a row to the results and prints it.
record() {
	local row
	row=$(printf '%-16s %-4s %s' "$1" "$2" "$3")
	echo "$row" >>"$out"
	echo "$row"
	if [ "$2" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

# note TEXT... prints and logs lines of evidence.
note() {
	printf '%s\n' "$@" | tee -a "$out.log"
}

# ctr NAME TEXT prints counter NAME's value from rnic's "dcqcn:" line or
# its --counters line in TEXT (0 if absent).
ctr() {
	local v
	v=$(grep -oE "(^| )$1 [0-9]+" <<<"$2" | tail -1 | awk '{print $2}')
	echo "${v:-0}"
}

# result extracts perftest's result row from output.
result() {
	awk '/#bytes/ {getline; print; exit}' <<<"$1" | tr -s ' \t' ' ' | sed 's/^ //'
}

"$peer/peer.sh" start --vms 1 >&2 || { echo "ecn-interop.sh: VM did not start" >&2; exit 1; }
kv=$("$peer/peer.sh" exec a --timeout 30 -- 'uname -r' 2>/dev/null | tail -1)
note "guest kernel: $kv"

# The guest kernel's qdisc modules, from the harness's unpacked kernel:
# decompressed if need be, and with no dependencies (both are
# self-contained in 6.1 and 6.12).
for m in sch_tbf sch_red; do
	f=$(find "$cache"/kernel/*/lib/modules/"$kv" -name "$m.ko*" 2>/dev/null | head -1)
	[ -n "$f" ] || { echo "ecn-interop.sh: no $m.ko for $kv under $cache" >&2; exit 1; }
	case $f in
	*.xz) xz -dc "$f" >"$share/$m.ko" ;;
	*.zst) zstd -qdc "$f" >"$share/$m.ko" ;;
	*) cp "$f" "$share/$m.ko" ;;
	esac
	deps=$(modinfo -F depends "$share/$m.ko")
	[ -z "$deps" ] || { echo "ecn-interop.sh: $m.ko depends on $deps" >&2; exit 1; }
done
cp "$bin" "$share/rnic"

# rxe_counters prints rxe0's hw_counters (name:value) and rdma statistic.
rxe_counters() {
	"$peer/peer.sh" exec a --timeout 60 -- 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done; rdma statistic show' 2>&1
}

# (b) rnic (host side) sends CNPs to rxe.
note "--- (b) rxe hw_counters before"
before=$(rxe_counters)
note "$before"
ip netns exec rxepeer tcpdump -i rxetap-a -nn -w "$tmp/cnp.pcap" 'udp dst port 4791 and udp[8] = 0x81' 2>/dev/null &
tpid=$!
ip netns exec rxepeer timeout 300 "$bin" perf write_bw -d $host -F -n "$ITERS_B" --dcqcn --rx-mark-ce 0.05 --counters --timeout 60s >"$tmp/b-srv.txt" 2>"$tmp/b-err.txt" &
spid=$!
sleep 1
vout=$("$peer/peer.sh" exec a --timeout 300 -- "ib_write_bw -d rxe0 -x 1 -F --tclass 2 -n $ITERS_B $host" 2>&1); vrc=$?
wait $spid; rrc=$?
sleep 1
kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
after=$(rxe_counters)
rout="$(cat "$tmp/b-srv.txt")
$(grep -v "iterations (" "$tmp/b-err.txt")"
wirecnps=$(tcpdump -r "$tmp/cnp.pcap" -nn 2>/dev/null | wc -l)
note "--- (b) rnic server" "$rout" "--- (b) ib_write_bw client (rxe)" "$vout" "--- (b) rxe hw_counters after" "$after" \
	"--- (b) CNPs to 198.18.0.11 on rxetap-a: $wirecnps; the first ones:" "$(tcpdump -r "$tmp/cnp.pcap" -nn -v -c 2 2>/dev/null)"
note "--- (b) rxe's kernel log" "$("$peer/peer.sh" exec a --timeout 30 -- 'dmesg | grep -i -E "rxe|qp type|icrc" | tail -5' 2>&1)"
rcvd() { awk '$1 == "rcvd_pkts" {print $2}' <<<"$1"; }
drcvd=$(( $(rcvd "$after") - $(rcvd "$before") ))
cnp=$(ctr np_cnp_sent "$rout")
txp=$(ctr tx_packets "$rout")
note "(b) rnic tx_packets $txp (np_cnp_sent $cnp, acks_sent $(ctr acks_sent "$rout")); rxe rcvd_pkts +$drcvd (tx_packets - np_cnp_sent = $((txp - cnp)))"
res=$(result "$vout")
if [ $vrc = 0 ] && [ $rrc = 0 ] && [ -n "$res" ] && [ "$cnp" -gt 0 ]; then
	record rxe-gets-cnps PASS "np_cnp_sent $cnp ($wirecnps on the wire), rxe rcvd_pkts +$drcvd of rnic's $txp packets; ib_write_bw: $res"
else
	record rxe-gets-cnps FAIL "ib rc=$vrc rnic rc=$rrc np_cnp_sent $cnp"
fi

# (c) rnic (host side, ECT(0)) to rxe's ib_write_bw server.
job=$("$peer/peer.sh" server a -- "ib_write_bw -d rxe0 -x 1 -F -n $ITERS_B" 2>/dev/null)
sleep 1
ip netns exec rxepeer timeout 120 tcpdump -i rxetap-a -nn -v -c 2 "udp dst port 4791 and dst host $vm" >"$tmp/c-tos.txt" 2>/dev/null &
tpid=$!
rout=$(ip netns exec rxepeer timeout 300 "$bin" perf write_bw -d $host -F -n "$ITERS_B" --dcqcn --timeout 60s $vm 2>"$tmp/c-err.txt"); rrc=$?
rout="$rout
$(grep -v "iterations (" "$tmp/c-err.txt")"
vout=$("$peer/peer.sh" wait a "$job" --timeout 120 2>&1); vrc=$?
kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
note "--- (c) rnic client" "$rout" "--- (c) ib_write_bw server (rxe)" "$vout" "--- (c) rnic's packets on rxetap-a" "$(cat "$tmp/c-tos.txt")"
res=$(result "$rout")
[ -z "$res" ] && res=$(result "$vout")
tos=$(grep -oE 'tos 0x[0-9a-f]+[^,]*' "$tmp/c-tos.txt" | head -1)
if [ $vrc = 0 ] && [ $rrc = 0 ] && [ -n "$res" ]; then
	record rnic-ect-to-rxe PASS "${tos:-tos ?}; $res"
else
	record rnic-ect-to-rxe FAIL "rnic rc=$rrc ib rc=$vrc"
fi

# (a) RED with ECN on VM a's loopback, rnic to rnic.
# RED marks above 6000 bytes of average queue, every ECT packet above
# 18000 (and drops the packets that are not ECN-capable: CNPs and TCP).
# Its limit is above what the two QPs can have in flight (-t 16 x 4 KiB
# and the ACKs), so that it never drops for lack of room. That much in
# flight queues for about 0.3 s at 2 Mb/s (DCQCN at its 100 Gb/s line
# rate recovers far faster than it is cut), longer than perftest's ACK
# timeout (-u 14, 67 ms): -u 20 (4.3 s) keeps go-back-N out of it.
burst=$(( (2 * 6000 + 18000) / (3 * 1000) + 5 ))
# rxe's kernel UDP socket holds port 4791 on every address of the guest:
# rxe0 goes, and rdma_rxe with it, for the time of this case.
qdisc="rdma link delete rxe0 2>/dev/null
grep -q '^rdma_rxe ' /proc/modules && { rmmod rdma_rxe || exit 3; }
grep -q '^sch_tbf ' /proc/modules || insmod /share/sch_tbf.ko
grep -q '^sch_red ' /proc/modules || insmod /share/sch_red.ko
tc qdisc del dev lo root 2>/dev/null
tc qdisc add dev lo root handle 1: tbf rate $RATE burst 8kb latency 1s || exit 3
tc qdisc add dev lo parent 1:1 handle 10: red limit 200000 min 6000 max 18000 avpkt 1000 burst $burst probability 0.1 bandwidth $RATE ecn || exit 3
tc qdisc show dev lo"
note "--- (a) qdisc on VM a's lo"
o=$("$peer/peer.sh" exec a --timeout 60 -- "$qdisc" 2>&1); rc=$?
note "$o"
if [ $rc != 0 ]; then
	record red-lo FAIL "qdisc setup failed (rc=$rc)"
else
	perf="XDG_RUNTIME_DIR=/tmp /share/rnic perf write_bw -s 4096 -n $ITERS_A -m 1024 -t 16 -Q 8 -u 20 -F --dcqcn --timeout 60s"
	run="rm -f /share/ecn-a-srv.txt /share/ecn-a-cli.txt
$perf -d 127.0.0.1 >/share/ecn-a-srv.txt 2>&1 &
s=\$!
i=0
until grep -q 'Waiting for client' /share/ecn-a-srv.txt; do
	i=\$((i + 1)); [ \$i -gt 600 ] && { echo 'server did not start'; kill \$s; exit 4; }
	sleep 0.1
done
$perf -d 127.0.0.2 127.0.0.1 >/share/ecn-a-cli.txt 2>&1
c=\$?
wait \$s
s=\$?
echo \"rc client \$c server \$s\"
tc -s qdisc show dev lo
tc qdisc del dev lo root
insmod /usr/lib/modules/\$(uname -r)/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko && rdma link add rxe0 type rxe netdev eth0"
	o=$("$peer/peer.sh" exec a --timeout 400 -- "$run" 2>&1)
	srv=$(grep -v "iterations (" "$share/ecn-a-srv.txt" 2>/dev/null)
	cli=$(grep -v "iterations (" "$share/ecn-a-cli.txt" 2>/dev/null)
	note "--- (a) server" "$srv" "--- (a) client" "$cli" "--- (a) job" "$o"
	marked=$(grep -oE 'marked [0-9]+' <<<"$o" | head -1 | awk '{print $2}')
	early=$(grep -oE 'early [0-9]+' <<<"$o" | head -1 | awk '{print $2}')
	cnp=$(ctr np_cnp_sent "$(grep '^dcqcn:' <<<"$srv")")
	handled=$(ctr rp_cnp_handled "$(grep '^dcqcn:' <<<"$cli")")
	res=$(result "$cli")
	if grep -q 'rc client 0 server 0' <<<"$o" && [ -n "$res" ] && [ "${marked:-0}" -gt 0 ] && [ "$cnp" -gt 0 ] && [ "$handled" -gt 0 ]; then
		record red-lo PASS "RED marked ${marked} (early drops ${early:-?}), server np_cnp_sent $cnp, client rp_cnp_handled $handled; $res"
	else
		record red-lo FAIL "$(grep -o 'rc client.*' <<<"$o"), marked ${marked:-?}, np_cnp_sent $cnp, rp_cnp_handled $handled"
	fi
fi

[ $keep = 1 ] || "$peer/peer.sh" stop >&2
rm -rf "$tmp"
echo
echo "$pass passed, $fail failed in $(( $(date +%s) - start )) s; table in $out, outputs in $out.log"
[ $fail = 0 ]
