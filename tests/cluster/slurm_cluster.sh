#!/usr/bin/env bash
# A real Slurm cluster inside one machine, without systemd: its own munged,
# one slurmctld and one slurmd (this host, NodeAddr 127.0.0.1), all on a
# private socket, private ports and a private temporary directory, so a
# system Slurm or another run of this script is not disturbed. Runs COMMAND
# with the cluster up and tears everything down on exit, after a failure or a
# signal alike.
#
#   tests/cluster/slurm_cluster.sh [--cpus N] [--netns] -- COMMAND...
#
# --netns: run inside tests/cluster/netns_cluster.sh; the nodes are its hosts
# (host1..hostN, one slurmd in each namespace, NodeAddr its address), and
# slurmctld listens on the bridge's address (.254). Without it: one node.
#
# The node has N CPUs (default nproc; more than the machine has is allowed,
# SlurmdParameters=config_overrides) in partition "debug" (Default, no time
# limit, OverSubscribe=YES: jobs share CPUs only when they ask --oversubscribe,
# else a job that does not fit pends with Reason=Resources).
# COMMAND sees SLURM_CONF (every Slurm command reads it; jobs inherit it),
# SLURM_CLUSTER_DIR (the private directory), SLURM_CLUSTER_LOGS (slurmctld.log,
# slurmd.log, munged.log), SLURM_CLUSTER_NODE (the first node's name),
# SLURM_CLUSTER_CPUS, SLURM_CLUSTER_MPI (pmix: `srun --mpi=pmix` makes Open MPI
# ranks one world; MpiDefault is none), SLURM_CLUSTER_MUNGE_SOCKET (`munge -n
# --socket=...`; Slurm itself reads it from AuthInfo), SLURM_CLUSTER_WAIT (a
# command: `$SLURM_CLUSTER_WAIT JOBID [TIMEOUT_S]` waits for the job's final
# end, requeues included, and exits with its exit code; sbatch --wait polls
# after 2, 10, 42 s...) and PMIX_MCA_gds=hash.
# No slurmdbd: no sacct; a finished job stays in `scontrol show job` for
# MinJobAge (300 s). Jobs start about 1 s after sbatch (batch_sched_delay=0,
# sched_interval=1). A requeued job pends (Reason=BeginTime) and starts again
# after AuthInfo cred_expire: 5 s here, Slurm's minimum (default 120);
# `scontrol requeuehold` leaves it held until `scontrol release`.
# Exit 77 (a skip to ctest) when the machine cannot: not root, or Slurm or
# munge not installed; else COMMAND's exit code (1 if the cluster never came
# up, with the daemon logs on stderr).
set -uo pipefail
cpus=$(nproc --all)  # not OMP_NUM_THREADS, which nproc honours
netns=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpus) cpus="$2"; shift 2 ;;
    --netns) netns=1; shift ;;
    --) shift; break ;;
    *) echo "[slurm] unknown option $1 (usage: slurm_cluster.sh [--cpus N] -- COMMAND...)" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 || ! "$cpus" =~ ^[1-9][0-9]{0,2}$ ]]; then
  echo "[slurm] usage: slurm_cluster.sh [--cpus N (1-999)] -- COMMAND..." >&2
  exit 2
fi
skip() { echo "[slurm] skipped: $1" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (SlurmUser=root, slurmd)"
for tool in munged munge unmunge slurmctld slurmd sbatch srun sinfo squeue scontrol scancel; do
  command -v "$tool" >/dev/null || skip "no $tool (apt-get install slurm-wlm munge)"
done

# Every process this cluster starts (daemons, job steps) carries
# CRUCIBLE_SLURM_DIR=<its directory> in its environment; slurmstepd blanks its
# environment but works in a directory under it (as the daemons do).
marked() {
  local p cwd
  grep -lzx "CRUCIBLE_SLURM_DIR=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    [[ "$cwd" == "$1" || "$cwd" == "$1/"* || "$cwd" == "$1 (deleted)" ]] && echo "${p#/proc/}"
  done
}
kill_marked() {
  local pids
  mapfile -t pids < <(marked "$1")
  [[ ${#pids[@]} -gt 0 ]] && kill -9 "${pids[@]}" 2>/dev/null
  return 0
}
# What a harness killed with SIGKILL left (its traps never ran): directories
# named after a process that is gone, and whatever still runs out of them.
for dir in /tmp/crucible_slurm.*; do
  [[ -d "$dir" ]] || continue
  pid="${dir#/tmp/crucible_slurm.}"; pid="${pid%%.*}"
  [[ "$pid" =~ ^[0-9]+$ ]] || continue
  # Alive: a process of that PID that is no zombie and runs this script.
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)
  if [[ -n "$state" && "$state" != [ZX] ]] \
    && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q slurm_cluster; then
    continue
  fi
  kill_marked "$dir"
  rm -rf "$dir"
done

node=$(hostname -s)
# The nodes: NAME ADDR, and where each slurmd runs (a namespace, or here).
names=("$node") addrs=(127.0.0.1) spaces=("") ctld_addr=127.0.0.1
if [[ -n "$netns" ]]; then
  [[ -n "${CLUSTER_NS:-}" ]] || { echo "[slurm] --netns: not inside tests/cluster/netns_cluster.sh" >&2; exit 2; }
  read -r -a spaces <<< "$CLUSTER_NS"
  read -r -a addrs <<< "$CLUSTER_HOSTS"
  names=()
  for k in $(seq 1 "${#spaces[@]}"); do names+=("host$k"); done
  ctld_addr="${addrs[0]%.*}.254"
fi
# Two ports below the ephemeral range (32768-), picked from our PID, passed
# over while something listens on either.
ctld_port=$(( 20000 + ($$ % 6000) * 2 ))
for k in $(seq 20); do
  (: < "/dev/tcp/127.0.0.1/$ctld_port") 2>/dev/null || (: < "/dev/tcp/127.0.0.1/$(( ctld_port + 1 ))") 2>/dev/null || break
  ctld_port=$(( (ctld_port - 20000 + 2) % 12000 + 20000 ))
done
slurmd_port=$(( ctld_port + 1 ))
work=$(mktemp -d "/tmp/crucible_slurm.$$.XXXXXX")
chmod 711 "$work"   # munged wants every directory above its socket searchable by all
logs="$work/log" msock="$work/munge/munge.socket"
conf="$work/slurm.conf"
export CRUCIBLE_SLURM_DIR="$work"

dump_logs() {
  local f
  for f in "$logs"/*.log; do
    [[ -s "$f" ]] || continue
    echo "[slurm] ---- $f (last 40 lines)" >&2
    tail -n 40 "$f" >&2
  done
}
teardown() {
  local ctld
  ctld=$(cat "$work/slurmctld.pid" 2>/dev/null)
  if [[ -S "$msock" && "$ctld" =~ ^[0-9]+$ ]] && kill -0 "$ctld" 2>/dev/null; then
    timeout 10 scancel --quiet --user=root 2>/dev/null
    for k in $(seq 50); do
      [[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ]] && break
      sleep 0.2
    done
  fi
  # No state to keep: SIGKILL (SIGTERM costs each daemon about 2 s).
  kill_marked "$work"
  rm -rf "$work"
}
trap teardown EXIT
trap 'exit 130' INT TERM
now() { echo "${EPOCHREALTIME/[.,]/}"; }  # microseconds
secs() { printf '%d.%02d' $(( $1 / 1000000 )) $(( $1 % 1000000 / 10000 )); }
fail() { echo "[slurm] $1" >&2; dump_logs; exit 1; }

mkdir -p "$logs" "$work/munge" "$work/ctld" "$work/slurmd"
chmod 755 "$work/munge"
: > "$work/plugstack.conf"   # not /etc/slurm/plugstack.conf: no site SPANK plugins

# munged: a fresh key, its own socket, pid, seed and log files.
t0=$(now)
if command -v mungekey >/dev/null; then
  mungekey --create --keyfile="$work/munge/munge.key" --bits=1024 || fail "mungekey failed"
else
  dd if=/dev/urandom of="$work/munge/munge.key" bs=128 count=1 status=none
fi
chmod 400 "$work/munge/munge.key"
munged --socket="$msock" --key-file="$work/munge/munge.key" --pid-file="$work/munge/munged.pid" \
  --seed-file="$work/munge/munged.seed" --log-file="$logs/munged.log" --num-threads=2 \
  || fail "munged did not start"
for k in $(seq 50); do
  munge -n --socket="$msock" 2>/dev/null | unmunge --socket="$msock" >/dev/null 2>&1 && break
  [[ $k -eq 50 ]] && fail "munged does not answer on $msock"
  sleep 0.1
done
t_munge=$(( $(now) - t0 ))

cat > "$conf" <<CONF
ClusterName=crucible
SlurmctldHost=$node($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$msock,cred_expire=5
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/slurmd/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.%n.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$work/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
MpiDefault=none
JobRequeue=1
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=300
$(for k in "${!names[@]}"; do
  echo "NodeName=${names[k]} NodeHostname=${names[k]} NodeAddr=${addrs[k]} CPUs=$cpus State=UNKNOWN"
done)
PartitionName=debug Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
# The nodes share this machine's /tmp, where Slurm's PMIx plugin makes one
# directory per job step and node: a directory of each node's own instead
# (bind-mounted over nodetmp inside the node's namespaces).
mkdir -p "$work/nodetmp"
[[ -n "$netns" ]] && echo "PMIxCliTmpDirBase=$work/nodetmp" > "$work/mpi.conf"
export SLURM_CONF="$conf"

t0=$(now)
slurmctld -f "$conf" || fail "slurmctld did not start"
for k in $(seq 100); do
  timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' && break
  [[ $k -eq 100 ]] && fail "slurmctld did not answer within 20 s"
  sleep 0.2
done
t_ctld=$(( $(now) - t0 ))

t0=$(now)
for k in "${!names[@]}"; do
  mkdir -p "$work/slurmd/${names[k]}" "$work/nodetmp.${names[k]}"
  if [[ -n "${spaces[k]}" ]]; then
    # Inside the host: its network, its name and its /etc/hosts (not
    # through ip netns exec, whose fresh /sys lacks the cgroup mounts
    # slurmd insists on).
    nsenter --net="/run/netns/${spaces[k]}" unshare --mount --uts bash -c "hostname ${names[k]};
      [[ -f /etc/netns/${spaces[k]}/hosts ]] && mount --bind /etc/netns/${spaces[k]}/hosts /etc/hosts;
      mount --bind '$work/nodetmp.${names[k]}' '$work/nodetmp';
      exec slurmd -f '$conf' -N ${names[k]}" ||
      fail "slurmd of ${names[k]} did not start"
  else
    slurmd -f "$conf" || fail "slurmd did not start"
  fi
done
for k in $(seq 150); do
  state=$(timeout 5 sinfo -h -o %t 2>/dev/null | sort -u | tr '\n' ' ')
  [[ "$state" == "idle " ]] && break
  [[ $k -eq 150 ]] && fail "nodes ${names[*]} not idle within 30 s (sinfo: ${state:-nothing})"
  sleep 0.2
done
t_slurmd=$(( $(now) - t0 ))
echo "[slurm] up: munged $(secs $t_munge) s, slurmctld $(secs $t_ctld) s, slurmd $(secs $t_slurmd) s;" \
  "nodes ${names[*]}, $cpus CPUs each, ports $ctld_port/$slurmd_port, $work" >&2

# wait_job JOBID [TIMEOUT_S]: sbatch --wait polls after 2, 10, 42, 170 s;
# this polls every 0.2 s until the job has ended for good (a requeue is not
# an end) and exits with its exit code (128+signal when it died of one, 1 for
# another failed end, 124 past TIMEOUT_S, default 600).
cat > "$work/wait_job" <<'WAIT'
#!/usr/bin/env bash
job="$1" limit="${2:-600}" start=$SECONDS
while :; do
  info=$(scontrol -o show job "$job" 2>/dev/null) || { echo "wait_job: no job $job" >&2; exit 1; }
  state=$(grep -o 'JobState=[A-Z_]*' <<< "$info"); state="${state#JobState=}"
  case "$state" in
    BOOT_FAIL|CANCELLED|COMPLETED|DEADLINE|FAILED|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|TIMEOUT) break ;;
  esac
  (( SECONDS - start >= limit )) && { echo "wait_job: job $job still $state after $limit s" >&2; exit 124; }
  sleep 0.2
done
code=$(grep -o ' ExitCode=[0-9]*:[0-9]*' <<< "$info"); code="${code#*=}"
echo "wait_job: JobId=$job JobState=$state ExitCode=$code $(grep -o 'Restarts=[0-9]*' <<< "$info")" >&2
status="${code%:*}" sig="${code#*:}"
[[ "$state" == COMPLETED ]] && exit "$status"
(( status != 0 )) && exit "$status"
(( sig != 0 )) && exit $(( 128 + sig ))
exit 1
WAIT
chmod +x "$work/wait_job"

export SLURM_CLUSTER_DIR="$work" SLURM_CLUSTER_LOGS="$logs" SLURM_CLUSTER_NODE="${names[0]}"
export SLURM_CLUSTER_CPUS="$cpus" SLURM_CLUSTER_MPI=pmix SLURM_CLUSTER_MUNGE_SOCKET="$msock"
export SLURM_CLUSTER_WAIT="$work/wait_job"
export PMIX_MCA_gds=hash
"$@"
