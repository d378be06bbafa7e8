#!/usr/bin/env bash
# crucible under a real Slurm (tests/cluster/slurm_cluster.sh: munged,
# slurmctld and one slurmd on this machine): a 2-rank training job submitted
# with sbatch (`crucible launch` inside it runs the ranks with srun) finishes
# with the weights of one process (reproducible mode); the same job
# preempted (`scancel --signal=USR1 --batch`, Slurm's warning before
# preemption) checkpoints at the step boundary, requeues itself
# (`launch --requeue`, sbatch --requeue), runs again, resumes and finishes
# byte-identical; and every start records its queue wait in events.jsonl and
# the report. Started by ctest with the crucible binary's path; exit 77 (skip)
# where the Slurm harness cannot run.
#   tests/cluster/slurm_train.sh BUILD/crucible [--nodes 2]
# --nodes 2: the same on two Slurm nodes, one slurmd in each of two namespace
# hosts (tests/cluster/netns_cluster.sh), one rank per node, Open MPI over
# TCP between them; the ranks must have run on both nodes.
set -euo pipefail
bin="$(realpath "$1")"
nodes=1
[[ "${2:-}" == --nodes ]] && nodes="$3"
[[ "$nodes" == 1 || "$nodes" == 2 ]] || { echo "[slurm train] --nodes: 1 or 2"; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d /tmp/crucible_slurm_train.XXXXXX)
chmod 755 "$work"
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
source "$here/lib.sh"
cluster_job "$work"
# The job script, as docs/cluster.md gives it: exec, so that the batch
# step's signal reaches the supervisor.
cat > "$work/job.sh" <<JOB
#!/usr/bin/env bash
#SBATCH --ntasks=2
#SBATCH --nodes=$nodes
#SBATCH --requeue
exec "$bin" launch --requeue -n 2 --threads 1 -- train "$work/cfg.toml" --run-dir "\$RUN"
JOB
cat > "$work/scenario.sh" <<'SCENARIO'
#!/usr/bin/env bash
set -euo pipefail
work="$1"
# Two nodes: Open MPI's TCP between the namespace hosts (sbatch passes the
# environment on to the job).
[[ -n "${CLUSTER_SUBNET:-}" ]] && export OMPI_MCA_btl_tcp_if_include=$CLUSTER_SUBNET OMPI_MCA_oob_tcp_if_include=$CLUSTER_SUBNET
# state ID: the job's JobState.
state() { scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# finish ID SECONDS: wait for COMPLETED (or fail naming the state and logs).
finish() {
  local end=$((SECONDS + $2)) s
  while :; do
    s=$(state "$1")
    [[ "$s" == COMPLETED ]] && return 0
    if [[ "$s" == FAILED || "$s" == CANCELLED || "$s" == TIMEOUT || "$s" == NODE_FAIL ]] || ((SECONDS > end)); then
      cat "$work"/*.out 2>/dev/null; scontrol show job "$1"; echo "[slurm train] job $1 ended $s"; exit 1
    fi
    sleep 0.2
  done
}
plain=$(RUN="$work/plain" sbatch --parsable -o "$work/plain.out" "$work/job.sh")
echo "[slurm train] plain: job $plain"
finish "$plain" 180
pre=$(RUN="$work/pre" sbatch --parsable -o "$work/pre.%j.%r.out" --open-mode=append "$work/job.sh")
at=$((10 + RANDOM % 25))
echo "$at" > "$work/pre.step"
end=$((SECONDS + 120))
until [[ -f "$work/pre/metrics.jsonl" ]] && (( $(wc -l < "$work/pre/metrics.jsonl") >= at )); do
  ((SECONDS < end)) || { cat "$work"/pre*.out; echo "[slurm train] never reached step $at"; exit 1; }
  sleep 0.02
done
echo "[slurm train] preempting job $pre at step $at"
scancel --signal=USR1 --batch "$pre"
finish "$pre" 240
SCENARIO
set +e
if [[ $nodes == 1 ]]; then
  "$here/slurm_cluster.sh" --cpus 2 -- bash "$work/scenario.sh" "$work" > "$work/slurm.log" 2>&1
else
  "$here/netns_cluster.sh" -n 2 -- "$here/slurm_cluster.sh" --cpus 1 --netns -- bash "$work/scenario.sh" "$work" \
    > "$work/slurm.log" 2>&1
fi
rc=$?
set -e
if [[ $rc -eq 77 ]]; then cat "$work/slurm.log"; exit 77; fi
if [[ $rc -ne 0 ]]; then cat "$work/slurm.log"; echo "[slurm train] failed ($rc)"; exit 1; fi
for run in plain pre; do same_as_one "$work" "$work/$run" "slurm train" || { cat "$work"/*.out; exit 1; }; done
python3 - "$work" "$(cat "$work/pre.step")" "$nodes" <<'PY'
import json, sys
work, at, nodes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def events(run): return [json.loads(l) for l in open(f"{work}/{run}/events.jsonl")]
def fail(m): print("[slurm train] " + m); sys.exit(1)
plain = events("plain")
q = [e for e in plain if e["event"] == "queue"]
if len(q) != 1 or not q[0]["wait_s"] >= 0 or not q[0]["job_id"]: fail(f"plain: queue events {q}")
if "finished" not in [e["event"] for e in plain]: fail("plain: not finished")
# Where the ranks ran: every attempt of both jobs on the nodes asked for.
want = ["host1", "host2"] if nodes == 2 else None
for run in ("plain", "pre"):
    for e in events(run):
        if e["event"] == "ranks_up" and want and e["hosts"] != want: fail(f"{run}: ranks on {e['hosts']}, not {want}")
pre = events("pre")
names = [e["event"] for e in pre]
q = [e for e in pre if e["event"] == "queue"]
if len(q) != 2 or [e["restarts"] for e in q] != [0, 1]: fail(f"pre: expected two starts (restarts 0, 1): {q}")
stop = [e for e in pre if e["event"] == "preempted"]
if len(stop) != 1 or not stop[0]["clean"] or stop[0]["checkpoint_step"] < at: fail(f"pre: preemption {stop}")
if "requeue" not in names or names[-1] != "finished": fail(f"pre: events {names}")
print(f"[slurm train] preempted after step {at}, checkpoint {stop[0]['checkpoint_step']}, waits {[e['wait_s'] for e in q]} s")
PY
"$bin" report "$work/pre" > /dev/null
grep -q "waited in the Slurm queue" "$work/pre/report.html" || { echo "[slurm train] the report does not show the queue wait"; exit 1; }
echo "[slurm train] $nodes node(s): sbatch, preempt + requeue: finished byte-identical; queue waits recorded"
