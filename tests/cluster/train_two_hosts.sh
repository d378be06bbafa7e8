#!/usr/bin/env bash
# Data-parallel training across two namespace hosts over TCP (Open MPI's tcp
# BTL only) in reproducible mode: its weights equal a one-process run's byte
# for byte. Started by ctest with the crucible binary's path; exit 77 (skip)
# where the cluster harness cannot run.
#   tests/cluster/train_two_hosts.sh BUILD/crucible
set -euo pipefail
bin="$(realpath "$1")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d /tmp/crucible_two_hosts.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" && cp /usr/share/games/fortunes/computers "$work/corpus/"
cat > "$work/cfg.toml" <<TOML
[model]
n_layer = 2
n_head = 2
n_embd = 32
vocab_size = 512
seq_len = 32
[data]
source = ["$work/corpus"]
format = "fortunes"
cache_dir = "$work/data"
val_fraction = 0.1
[train]
steps = 8
batch_size = 2
grad_accum = 2
seed = 5
eval_every = 0
eval_batches = 1
threads = 1
[ckpt]
every = 8
[run]
sample_tokens = 0
[dist]
reproducible = true
TOML
# One process with the global batch of the two ranks: grad_accum 4.
"$bin" train "$work/cfg.toml" --run-dir "$work/one" --set train.grad_accum=4 > "$work/one.log" 2>&1 ||
  { cat "$work/one.log"; exit 1; }
set +e
"$here/netns_cluster.sh" -n 2 -- sh -c "mpirun --allow-run-as-root --hostfile \$CLUSTER_HOSTFILE --mca plm_rsh_agent \$CLUSTER_AGENT \
  --mca btl self,tcp --mca btl_tcp_if_include \$CLUSTER_SUBNET --mca oob_tcp_if_include \$CLUSTER_SUBNET \
  --bind-to none -x OMP_NUM_THREADS=1 -n 2 '$bin' train '$work/cfg.toml' --run-dir '$work/two'" > "$work/two.log" 2>&1
rc=$?
set -e
if [[ $rc -eq 77 ]]; then cat "$work/two.log"; exit 77; fi
if [[ $rc -ne 0 ]]; then cat "$work/two.log"; echo "[two hosts] training across the hosts failed ($rc)"; exit 1; fi
grep -q ", 2 ranks (mpi) x " "$work/two.log" || { cat "$work/two.log"; echo "[two hosts] not a 2-rank run"; exit 1; }
a=$(sha256sum < "$work/one/ckpt/step_0000008/model.safetensors")
b=$(sha256sum < "$work/two/ckpt/step_0000008/model.safetensors")
if [[ "$a" != "$b" ]]; then echo "[two hosts] weights differ from the one-process run"; exit 1; fi
echo "[two hosts] 2 hosts over TCP: weights byte-identical to one process"
