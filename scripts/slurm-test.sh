#!/usr/bin/env bash
# slurm-test.sh — a sweep on a real Slurm cluster, compared with the same
# sweep in one process.
#
# Starts a one-node Slurm cluster on this machine (munged, slurmctld and
# slurmd from Debian's slurm-wlm and munge, with a private configuration,
# state and munge socket in a temporary directory, the daemons on
# 127.0.0.1 ports 16817/16818), writes a small sweep with
# "rnic sim ... --slurm DIR --slurm-shards 3", submits it with the
# generated submit.sh (a job array and its merge), waits for the merge,
# and compares its table, CSV and JSON with one "rnic sim" run of the
# same sweep, byte for byte; "rnic sim status" is checked on the way.
# Then it kills a running task's batch script and its run with SIGKILL
# and checks that status counts it failed. It stops the daemons it started.
#
# Needs root (slurmd runs jobs as their users). Where Slurm is missing it
# installs Debian's slurm-wlm and munge with apt-get (INSTALL=0: it does
# not). Exit status: 0 passed, 1 failed, 77 skipped (not root, or Slurm
# not installed and not installable), saying why.
#
# Usage: sudo scripts/slurm-test.sh     (go test ./cmd/rnic -run TestSlurmCluster runs it)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
skip() { echo "slurm-test: skipped: $*"; exit 77; }
fail() { echo "slurm-test: FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs the jobs)"
if [ "${INSTALL:-1}" = 1 ] && ! command -v slurmctld >/dev/null && command -v apt-get >/dev/null; then
	echo "slurm-test: apt-get install slurm-wlm munge"
	(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge) >/dev/null 2>&1 ||
		skip "apt-get install slurm-wlm munge failed"
fi
for c in munged slurmctld slurmd sbatch sinfo squeue runuser; do
	command -v "$c" >/dev/null || skip "$c is not installed (apt-get install slurm-wlm munge)"
done
[ -r /etc/munge/munge.key ] || skip "no /etc/munge/munge.key (the munge package makes it)"

D=$(mktemp -d /tmp/rnic-slurm.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	sleep 1
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	[ "${KEEP:-0}" = 1 ] || rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D"/{state,spool,munge,work}
chown munge:munge "$D/munge"
chmod 755 "$D"

runuser -u munge -- munged --socket="$D/munge/munge.socket" --pid-file="$D/munge/munged.pid" \
	--log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" || fail "munged did not start"
for _ in $(seq 50); do [ -s "$D/munge/munged.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$D/munge/munged.pid")")

node=$(hostname -s)
cat >"$D/slurm.conf" <<CONF
ClusterName=rnictest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
CredType=cred/munge
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=rnic Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$D/slurm.conf
slurmctld -f "$SLURM_CONF" -c -i || fail "slurmctld did not start ($(tail -3 "$D/slurmctld.log" 2>/dev/null))"
for _ in $(seq 50); do [ -s "$D/slurmctld.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$D/slurmctld.pid")")
slurmd -f "$SLURM_CONF" -N "$node" || fail "slurmd did not start ($(tail -3 "$D/slurmd.log" 2>/dev/null))"
for _ in $(seq 50); do [ -s "$D/slurmd.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$D/slurmd.pid")")
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo -h -o %T | grep -q idle || fail "the node did not come up: $(sinfo 2>&1; tail -5 "$D/slurmd.log")"
echo "slurm-test: one-node cluster up ($(sinfo -h -o '%P %D %T %c CPUs'))"

# RNIC names an rnic binary to use (the Go test passes its own, which
# acts as rnic with RNIC_TEST_MAIN=1; sbatch passes the environment on
# to the jobs); else one is built.
rnic=${RNIC:-}
if [ -z "$rnic" ]; then
	(cd "$here" && go build -o "$D/rnic-build" ./cmd/rnic) || fail "go build"
	rnic=$D/rnic-build
fi
sweep=(sim --test write_bw,write_lat --size 64,4K --qps 1,2 --iters 40 --metadata --csv out.csv --json out.json)

mkdir -p "$D/whole"
(cd "$D/whole" && "$rnic" "${sweep[@]}" -q >result.txt) || fail "the one-process run"
(cd "$D/work" && "$rnic" "${sweep[@]}" --slurm "$D/sweep" --slurm-shards 3 --slurm-time 10:00) || fail "rnic sim --slurm"
"$D/sweep/submit.sh" || fail "submit.sh"
for _ in $(seq 300); do
	[ -e "$D/sweep/result.txt" ] && break
	grep -q . "$D"/sweep/state/*.failed 2>/dev/null && break
	sleep 1
done
status=$("$rnic" sim status "$D/sweep")
echo "$status"
[ -e "$D/sweep/result.txt" ] || fail "no merged result after 300 s: $(squeue; cat "$D"/sweep/logs/*.log)"
echo "$status" | grep -q "done 3, running 0, failed 0, pending 0" || fail "status: $status"
for f in result.txt out.csv out.json; do
	cmp "$D/whole/$f" "$D/sweep/$f" || fail "$f of the Slurm sweep differs from the one-process run's"
done
echo "slurm-test: 3 array tasks and the merge ran on Slurm; table, CSV and JSON identical to one process"

# A task killed outright (SIGKILL: as the OOM killer or a failed node
# ends it) writes neither done nor failed; status finds it gone from
# Slurm's queue and counts it failed.
(cd "$D/work" && "$rnic" sim --test write_bw --size 64K --pairs 8 --incast --iters 200000 --metadata --limit 10s \
	--slurm "$D/killed" --slurm-shards 1 --slurm-time 10:00 >/dev/null) || fail "rnic sim --slurm (the sweep to kill)"
sub=$("$D/killed/submit.sh") || fail "submit.sh (the sweep to kill)"
jid=$(echo "$sub" | sed -n 's/^submitted job array \([0-9]*\) .*/\1/p')
[ -n "$jid" ] || fail "no job ID in: $sub"
for _ in $(seq 60); do [ -s "$D/killed/state/1.job" ] && break; sleep 0.5; done
[ -s "$D/killed/state/1.job" ] || fail "the task did not start: $(squeue; cat "$D"/killed/logs/*.log 2>/dev/null)"
status=$("$rnic" sim status "$D/killed")
echo "$status" | grep -q "done 0, running 1, failed 0, pending 0" || fail "status of the running task: $status"
# The batch script (slurmd's copy in its spool) and what it runs, with
# SIGKILL: nothing of the task can write its end.
script=$(pgrep -f "$D/spool/job[0-9]*/slurm_script") || fail "no batch script running: $(squeue)"
for p in $script; do kill -STOP "$p"; pkill -KILL -P "$p"; kill -KILL "$p"; done # stopped, it cannot note its child's end
for _ in $(seq 60); do squeue -h -o %A | grep -qx "$(cat "$D/killed/state/1.job")" || break; sleep 0.5; done
scancel "$jid" 2>/dev/null # the merge job, which waits for it
status=$("$rnic" sim status "$D/killed")
echo "$status"
[ -e "$D/killed/state/1.done" ] && fail "the killed task finished before it was killed (make its run longer)"
echo "$status" | grep -q "done 0, running 0, failed 1, pending 0" || fail "status of the killed task: $status"
echo "$status" | grep -q "no longer in Slurm's queue" || fail "status does not say the task vanished: $status"
echo "slurm-test: PASS: the sweep matches one process; a task killed outright shows as failed"
