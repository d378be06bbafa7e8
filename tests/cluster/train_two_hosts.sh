#!/usr/bin/env bash
# Data-parallel training across two namespace hosts over TCP (Open MPI's tcp
# BTL only) in reproducible mode, its weights equal to a one-process run's
# byte for byte: under plain mpirun, under `crucible launch --hostfile` (the
# supervisor hears the other host's heartbeats and the job finishes), and
# with host 2's rank killed mid-run (the death is named by rank and host, the
# job restarts itself from its checkpoint); tensor parallelism across the hosts
# trains and warns that its group spans them. Started by ctest with the crucible
# binary's path; exit 77 (skip) where the cluster harness cannot run.
#   tests/cluster/train_two_hosts.sh BUILD/crucible
set -euo pipefail
bin="$(realpath "$1")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d /tmp/crucible_two_hosts.XXXXXX)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
source "$here/lib.sh"
cluster_job "$work"
# cluster NAME COMMAND: COMMAND (a shell string: \$CLUSTER_* expand inside) on the two hosts.
cluster() {
  local name="$1"; shift
  set +e
  "$here/netns_cluster.sh" -n 2 -- sh -c "$*" > "$work/$name.log" 2>&1
  local rc=$?
  set -e
  if [[ $rc -eq 77 ]]; then cat "$work/$name.log"; exit 77; fi
  if [[ $rc -ne 0 ]]; then cat "$work/$name.log"; echo "[two hosts] $name failed ($rc)"; exit 1; fi
}
same_weights() { same_as_one "$work" "$work/$1" "two hosts"; }
mca="--mca btl self,tcp --mca btl_tcp_if_include \$CLUSTER_SUBNET --mca oob_tcp_if_include \$CLUSTER_SUBNET"
cluster two "mpirun --allow-run-as-root --hostfile \$CLUSTER_HOSTFILE --mca plm_rsh_agent \$CLUSTER_AGENT $mca \
  --bind-to none -x OMP_NUM_THREADS=1 -n 2 '$bin' train '$work/cfg.toml' --run-dir '$work/two'"
grep -q ", 2 ranks (mpi) x " "$work/two.log" || { cat "$work/two.log"; echo "[two hosts] not a 2-rank run"; exit 1; }
same_weights two
# Under the supervisor: Open MPI's MCA parameters from the environment.
env="OMPI_MCA_plm_rsh_agent=\$CLUSTER_AGENT OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=\$CLUSTER_SUBNET \
  OMPI_MCA_oob_tcp_if_include=\$CLUSTER_SUBNET"
launch="'$bin' launch --hostfile \$CLUSTER_HOSTFILE -n 2 --threads 1 -- train '$work/cfg.toml'"
cluster launched "$env $launch --run-dir '$work/launched'"
grep -q "\[supervisor\] job finished" "$work/launched.log" ||
  { cat "$work/launched.log"; echo "[two hosts] the supervisor did not see the job finish"; exit 1; }
same_weights launched
# Tensor parallelism over 2 hosts x 1 slot: it trains, and the job says that
# its TP group spans the hosts (every block's allreduces cross the network).
cluster tp_spans "$env $launch --run-dir '$work/tp_spans' --set dist.tp=2 --set train.steps=4"
grep -q "\[dist\] warning: the tensor-parallel group of ranks 0-1 spans hosts host1, host2" "$work/tp_spans.log" ||
  { cat "$work/tp_spans.log"; echo "[two hosts] tp=2 over two hosts: no warning that its group spans them"; exit 1; }
grep -q "\[supervisor\] job finished" "$work/tp_spans.log" || { cat "$work/tp_spans.log"; echo "[two hosts] tp=2 did not finish"; exit 1; }
cluster killed "$env $launch --run-dir '$work/killed' --set fault.restart_backoff_s=0.1 \
  --set 'fault.inject=[\"kill@6:rank=1\"]'"
grep -q "without a report from rank 1 (host host2, last in .* of step 6)" "$work/killed.log" ||
  { cat "$work/killed.log"; echo "[two hosts] the death on host 2 was not named by rank and host"; exit 1; }
grep -q "\[supervisor\] job finished after 1 restart" "$work/killed.log" ||
  { cat "$work/killed.log"; echo "[two hosts] the job did not recover by itself"; exit 1; }
same_weights killed
# The README's own job (the embedded default: fortunes, curation on, the auto
# profile), shortened, across the two hosts: stopped at step 3, the same
# command run again continues it, and the result is one process's run (one
# thread each: oneDNN splits its sums by the thread count).
short=(--set train.steps=6 --set train.threads=1 --set dist.reproducible=true --set train.eval_every=0 --set run.sample_tokens=0)
(cd "$work" && "$bin" train "${short[@]}" --set train.grad_accum=2 --run-dir "$work/default_one" > "$work/default_one.log" 2>&1) ||
  { cat "$work/default_one.log"; exit 1; }
default="cd '$work' && $env '$bin' launch --hostfile \$CLUSTER_HOSTFILE -n 2 --threads 1 -- train ${short[*]} --run-dir '$work/default'"
cluster default_stop "$default --stop-at 3"
grep -q "stopped at step 3" "$work/default_stop.log" || { cat "$work/default_stop.log"; echo "[two hosts] default: not stopped at 3"; exit 1; }
cluster default_resume "$default"
grep -q "resumed from .*step_0000003" "$work/default_resume.log" ||
  { cat "$work/default_resume.log"; echo "[two hosts] default: not resumed from step 3"; exit 1; }
a=$(sha256sum < "$work/default_one/ckpt/step_0000006/model.safetensors")
b=$(sha256sum < "$work/default/ckpt/step_0000006/model.safetensors")
[[ "$a" == "$b" ]] || { echo "[two hosts] default job: stopped and resumed across hosts, weights differ from one process"; exit 1; }
cmp -s "$work/default_one/tokenizer.model" "$work/default/tokenizer.model" ||
  { echo "[two hosts] default job: another tokenizer after the resume"; exit 1; }
echo "[two hosts] mpirun, launch, a killed host's rank and the default job stopped and resumed over TCP: weights byte-identical to one process"
