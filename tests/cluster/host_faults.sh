#!/usr/bin/env bash
# Faults that cross hosts, on two namespace hosts (tests/cluster/netns_cluster.sh)
# under `crucible launch --hostfile`, in reproducible mode so that every
# recovered run can be compared byte for byte with one process:
#   vanish  every process of host 2 killed at a random step: the supervisor
#           names the host, says its processes are gone (the host answers),
#           within the heartbeat window; the job restarts on both hosts and
#           finishes with the one-process weights;
#   cut     host 2's link set down at a random step, --min-ranks 1: the hang
#           is named as the lost host (unreachable, not a slow collective)
#           within the window, the job continues on host 1 alone (elastic
#           shrink, same global batch), then the link comes back, SIGHUP
#           grows it back to both hosts, and it finishes with the
#           one-process weights.
#   fence   host 2's link set down for good, --min-ranks 1: besides the
#           shrink, host 2's rank, cut off from its supervisor, must fence
#           itself (exit: a partitioned host stops working on the run)
#           CRUCIBLE_FENCE_S = max(10, 3 x window) after the cut, not before
#           (nothing else can reach it) and not much later; the job finishes
#           on host 1 with the one-process weights.
# Started by ctest with the crucible binary's path; exit 77 (skip) where the
# cluster harness cannot run.
#   tests/cluster/host_faults.sh BUILD/crucible
set -euo pipefail
bin="$(realpath "$1")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d /tmp/crucible_host_faults.XXXXXX)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
window=2
source "$here/lib.sh"
cluster_job "$work"
cat >> "$work/cfg.toml" <<TOML
[fault]
heartbeat_window_s = $window
restart_backoff_s = 0.2
TOML
# Each scenario runs inside the cluster (COMMAND of netns_cluster.sh).
cat > "$work/scenario.sh" <<'SCENARIO'
#!/usr/bin/env bash
set -euo pipefail
kind="$1" bin="$2" work="$3"
read -r -a ns <<< "$CLUSTER_NS"
run="$work/$kind"
export OMPI_MCA_plm_rsh_agent=$CLUSTER_AGENT OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=$CLUSTER_SUBNET OMPI_MCA_oob_tcp_if_include=$CLUSTER_SUBNET
min=(); [[ "$kind" != vanish ]] && min=(--min-ranks 1)
"$bin" launch --hostfile "$CLUSTER_HOSTFILE" -n 2 --threads 1 "${min[@]}" -- train "$work/cfg.toml" \
  --run-dir "$run" > "$work/$kind.log" 2>&1 &
sup=$!
# wait_for WHAT SECONDS CONDITION...: until CONDITION holds, or fail naming WHAT.
wait_for() {
  local what="$1" limit="$2"; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS > end)) || ! kill -0 "$sup" 2>/dev/null; then
      cat "$work/$kind.log"; echo "[host faults] $kind: no $what"; kill "$sup" 2>/dev/null; exit 1
    fi
    sleep 0.02
  done
}
at=$((8 + RANDOM % 20))
echo "$at" > "$work/$kind.step"
wait_for "step $at" 120 bash -c "(( \$(wc -l < '$run/metrics.jsonl' 2>/dev/null || echo 0) >= $at ))"
# ranks_alive NS: host NS still runs a crucible process.
ranks_alive() {
  local pid
  for pid in $(ip netns pids "$1"); do [[ "$(cat /proc/$pid/comm 2>/dev/null)" == crucible ]] && return 0; done
  return 1
}
if [[ "$kind" == vanish ]]; then
  ip netns pids "${ns[1]}" | xargs -r kill -9
elif [[ "$kind" == fence ]]; then
  ranks_alive "${ns[1]}" || { echo "[host faults] fence: no rank on host 2 before the cut"; exit 1; }
  ip netns exec "${ns[1]}" ip link set eth0 down
  cut=$(date +%s.%N)
  end=$((SECONDS + 40))
  while ranks_alive "${ns[1]}"; do
    ((SECONDS < end)) || { echo "[host faults] fence: host 2's rank still runs 40 s after the cut"; exit 1; }
    sleep 0.05
  done
  python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$cut" > "$work/fence.gone_s"
else
  ip netns exec "${ns[1]}" ip link set eth0 down
  wait_for "shrink to one host" 60 grep -q '"event":"shrink"' "$run/events.jsonl"
  wait_for "one-host attempt" 60 bash -c "grep '\"event\":\"ranks_up\"' '$run/events.jsonl' | grep -q '\"world\":1'"
  ip netns exec "${ns[1]}" ip link set eth0 up
  kill -HUP "$sup"
fi
wait "$sup" || { cat "$work/$kind.log"; echo "[host faults] $kind: the job did not finish by itself"; exit 1; }
SCENARIO
for kind in vanish cut fence; do
  set +e
  "$here/netns_cluster.sh" -n 2 -- bash "$work/scenario.sh" "$kind" "$bin" "$work" > "$work/$kind.cluster.log" 2>&1
  rc=$?
  set -e
  if [[ $rc -eq 77 ]]; then cat "$work/$kind.cluster.log"; exit 77; fi
  if [[ $rc -ne 0 ]]; then cat "$work/$kind.cluster.log"; echo "[host faults] $kind failed ($rc)"; exit 1; fi
  python3 - "$work/$kind/events.jsonl" "$kind" "$window" "$(cat "$work/$kind.step")" "$work" <<'PY' || { cat "$work/$kind.log"; exit 1; }
import json, sys
path, kind, window, at, work = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ev = [json.loads(l) for l in open(path)]
def fail(msg):
    print(f"[host faults] {kind}: {msg}"); sys.exit(1)
failures = [e for e in ev if e["event"] == "failure"]
if len(failures) != 1: fail(f"expected one failure, got {len(failures)}: {failures}")
f = failures[0]
if f["step"] < at: fail(f"failure at step {f['step']}, before the fault at step {at}")
hosts = f["hosts"]
if len(hosts) != 1 or hosts[0]["host"] != "host2" or not hosts[0]["whole_host"] or hosts[0]["ranks"] != [1]:
    fail(f"the failure does not name host2 as a whole: {f}")
want = ("died", "answers") if kind == "vanish" else ("host lost", "no answer")
if (f["what"], hosts[0]["reach"]) != want: fail(f"expected {want}, got {(f['what'], hosts[0]['reach'])}: {f['message']}")
if kind != "vanish" and "host host2 is unreachable" not in f["message"]: fail(f"message: {f['message']}")
if kind == "vanish" and "host2" not in f["message"]: fail(f"message: {f['message']}")
# Detected within the heartbeat window (the probe adds 0.5 s, a poll 20 ms).
if not f["detect_s"] <= window + 1.5: fail(f"detected after {f['detect_s']} s (window {window} s)")
names = [e["event"] for e in ev]
if kind != "vanish":
    shrink = [e for e in ev if e["event"] == "shrink"]
    if not shrink or shrink[0]["to"] != 1 or shrink[0]["grad_accum"] != 4: fail(f"no shrink to 1 rank x 4: {shrink}")
if kind == "cut" and "grow" not in names: fail("no grow back after SIGHUP")
world = 1 if kind == "fence" else 2
fin = [e for e in ev if e["event"] == "finished"]
if not fin or fin[-1]["world"] != world or fin[-1]["step"] != 60: fail(f"not finished on {world} rank(s): {fin}")
print(f"[host faults] {kind}: fault at step {at}, detected after {f['detect_s']:.2f} s: {f['message']}")
if kind == "fence":
    # The rank's heartbeat thread exits after CRUCIBLE_FENCE_S of silence
    # (its last ack came at most 0.5 s before the cut; it checks every 0.2 s).
    fence = max(10.0, 3 * window)
    gone = float(open(f"{work}/fence.gone_s").read())
    if not fence - 1.0 <= gone <= fence + 3.0: fail(f"host 2's rank exited {gone} s after the cut (fence {fence} s)")
    print(f"[host faults] fence: host 2's rank fenced itself {gone:.2f} s after the cut (CRUCIBLE_FENCE_S {fence:.0f})")
PY
  same_as_one "$work" "$work/$kind" "host faults" || { cat "$work/$kind.log"; exit 1; }
done
echo "[host faults] a vanished host, a cut link and a partition: named within the window, recovered (the cut-off rank fenced), weights byte-identical"
