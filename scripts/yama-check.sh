#!/usr/bin/env bash
# yama-check.sh — rnic under Yama's ptrace_scope 1 (Ubuntu's default)
# and 2, as a non-root user, in a VM of the rxe-peer harness
# (../shared/tools/rxe-peer, or RXE_PEER; root needed), whose Debian
# kernel has Yama. Where the NIC reaches a program's memory with
# process_vm_readv/writev, Yama decides who may:
#   scope 1: a program names the NIC's process (PR_SET_PTRACER, done by
#     the provider at ibv_open_device), one process: two NICs in one
#     process (rnic nic up --addr A --addr B) serve a program that uses
#     both (provider/tests/fork.c: RDMA between them, fork, the child's
#     own verbs); two programs each on a NIC of its own run as usual
#     (ib_write_bw); NICs in two processes cannot both reach one program:
#     ibv_reg_mr fails with EACCES and the provider says why;
#   scope 2: no unprivileged NIC may: EACCES, and why.
# Prints each case and "yama-check: N passed, M failed"; exits 1 if any
# failed.
#   sudo ./scripts/yama-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${RXE_PEER:-$PWD/../shared/tools/rxe-peer}
state=${RXE_PEER_STATE:-/tmp/rxe-peer}
[ -x "$peer/peer.sh" ] || { echo "yama-check.sh: no rxe-peer harness at $peer (set RXE_PEER)" >&2; exit 2; }
share=$state/vm-a/share
tmp=$(mktemp -d)
trap '"$peer/peer.sh" stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/rnic" ./cmd/rnic
./scripts/build-provider.sh "$tmp/lib" >/dev/null
cc -O2 -Wall -o "$tmp/fork" provider/tests/fork.c -L"$tmp/lib" -l:libibverbs.so.1
# runas UID CMD...: the VM's busybox setpriv cannot change uids.
cat >"$tmp/runas.c" <<'C'
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	uid_t id = (uid_t)atoi(argv[1]);
	if (setgroups(0, NULL) || setgid(id) || setuid(id)) {
		perror("runas");
		return 2;
	}
	execvp(argv[2], argv + 2);
	perror(argv[2]);
	return 127;
}
C
cc -O2 -Wall -o "$tmp/runas" "$tmp/runas.c"
cat >"$tmp/guest.sh" <<'GUEST'
# Runs in the VM, as root; the cases run as uid 1000.
pass=0 fail=0
u() { /share/x/runas 1000 env HOME=/tmp/u RNIC_RUN_DIR=/tmp/u/run XDG_RUNTIME_DIR=/tmp/u LD_LIBRARY_PATH=/share/x/lib "$@"; }
check() { # name, expected pattern, command...
	local name=$1 want=$2
	shift 2
	local out
	out=$("$@" 2>&1)
	if printf '%s\n' "$out" | grep -q -- "$want"; then
		pass=$((pass + 1)); echo "PASS $name"; printf '%s\n' "$out" | grep -m1 -- "$want" | sed 's/^/    /'
	else
		fail=$((fail + 1)); echo "FAIL $name: want /$want/, got:"; printf '%s\n' "$out" | sed 's/^/    /'
	fi
}
mkdir -p /tmp/u && chown 1000:1000 /tmp/u
ip link set lo up 2>/dev/null
# The VM's rxe holds UDP port 4791 on every address: rnic takes its place.
rdma link delete rxe0 2>/dev/null
rmmod rdma_rxe 2>/dev/null
echo "kernel $(uname -r), Yama ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope)"
echo 1 >/proc/sys/kernel/yama/ptrace_scope
u /share/x/rnic nic up --addr 127.0.0.1 --addr 127.0.0.2 >/dev/null
check "scope 1, two NICs in one process: RDMA, fork" '^ok$' u /share/x/fork
check "scope 1: ibv_devinfo" 'rnic1' u ibv_devinfo
u /share/x/rnic nic up --addr 127.0.0.3 >/dev/null
u ib_write_bw -d rnic0 -x 1 -n 200 >/dev/null 2>&1 &
sleep 2
check "scope 1, two programs on NICs of two processes: ib_write_bw" '^ 65536 *200 ' u ib_write_bw -d rnic2 -x 1 -n 200 127.0.0.1
wait
u /share/x/rnic nic down --all >/dev/null
u /share/x/rnic nic up --addr 127.0.0.1 >/dev/null
u /share/x/rnic nic up --addr 127.0.0.2 >/dev/null
check "scope 1, one program on NICs of two processes: EACCES, and why" "ptrace_scope is 1 and this program let in the NIC of pid" u /share/x/fork
echo 2 >/proc/sys/kernel/yama/ptrace_scope
check "scope 2: EACCES, and why" "ptrace_scope is 2" u /share/x/fork
u /share/x/rnic nic down --all >/dev/null
echo "yama-check: $pass passed, $fail failed"
GUEST
"$peer/peer.sh" start --vms 1 >/dev/null
chmod -R a+rX "$tmp"
rm -rf "$share/x" && cp -r "$tmp" "$share/x"
out=$("$peer/peer.sh" exec a --timeout 600 -- 'sh /share/x/guest.sh')
echo "$out"
grep -q "yama-check: [0-9]* passed, 0 failed" <<<"$out"
