#!/usr/bin/env bash
# What the tests use from the system besides Go, as Debian/Ubuntu
# packages. A test whose needs are missing skips, saying which package it
# wants (./scripts/test.sh names the skipped tests at the end).
#   ./scripts/deps.sh          (./scripts/test.sh runs it first)
# Run as root where apt-get is (Debian, Ubuntu), it installs what is
# missing; otherwise, or with INSTALL=0, it prints the command that would.
# It does not fail: if apt-get does, it says so and the tests skip.
# DEPS_MISSING="pkg ..." takes the place of the look-up (to test this script).
set -euo pipefail

# Some of the programs are in /usr/sbin, which users' PATH may lack.
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

# missing prints the packages whose files are missing here, one per line.
missing() {
	if [ -n "${DEPS_MISSING+set}" ]; then
		for p in ${DEPS_MISSING}; do echo "$p"; done
		return
	fi
	# The libibverbs provider's tests: a C compiler, rdma-core's headers,
	# the unmodified programs they run, rdma-core's own test suite.
	command -v cc >/dev/null || printf '%s\n' gcc libc6-dev
	[ -e /usr/include/infiniband/verbs.h ] || echo libibverbs-dev
	[ -e /usr/include/rdma/rdma_cma.h ] || echo librdmacm-dev # rnic's librdmacm.so.1 is built against it
	command -v rping >/dev/null || echo rdmacm-utils            # rping, udaddy, ucmatose, rdma_server, cmtime
	command -v ibv_devices >/dev/null || echo ibverbs-utils
	command -v ib_write_bw >/dev/null || echo perftest
	command -v strace >/dev/null || echo strace # the system-call budget of a busy NIC's program
	[ -e /usr/share/doc/rdma-core/tests/run_tests.py ] || echo python3-pyverbs # rdma-core's test suite
	command -v ucx_info >/dev/null || echo ucx-utils                              # UCX over rnic
	command -v fi_info >/dev/null || echo libfabric-bin                           # libfabric over rnic
	command -v ip >/dev/null || echo iproute2                                     # network namespaces
	command -v slurmctld >/dev/null || printf '%s\n' slurm-wlm munge             # a one-node Slurm cluster (scripts/slurm-test.sh)
}

mapfile -t need < <(missing)
[ ${#need[@]} -gt 0 ] || exit 0

root=false
[ "$(id -u)" = 0 ] && root=true
apt=false
command -v apt-get >/dev/null && apt=true

if [ "${INSTALL:-1}" != 0 ] && $root && $apt; then
	echo "deps.sh: installing what the tests use: apt-get install ${need[*]}"
	if (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"); then
		exit 0
	fi
	echo "deps.sh: apt-get install ${need[*]} failed: the tests that need them will skip (named at the end)" >&2
	exit 0
fi

cmd="apt-get install -y --no-install-recommends ${need[*]}"
$root || cmd="sudo $cmd"
if $apt; then
	why="not root"
	[ "${INSTALL:-1}" = 0 ] && why="INSTALL=0"
	echo "deps.sh: some of what the tests use is missing, and not installed ($why): the tests that need it will skip. To install it:"
	echo "  $cmd"
else
	echo "deps.sh: some of what the tests use is missing (no apt-get here: Debian/Ubuntu packages ${need[*]}): the tests that need it will skip"
fi
