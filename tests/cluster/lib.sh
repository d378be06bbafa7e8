# Shared by the cluster tests (sourced): the training job they run and the
# comparison with one process.
#
# cluster_job WORK: writes WORK/cfg.toml (60 steps of a small model over a
# copy of the computers fortunes, checkpoints every 5 steps, reproducible
# mode, 2 micro-batches per rank) and trains it in one process with the
# global batch of two ranks (grad_accum 4) into WORK/one.
cluster_job() {
  local work="$1"
  mkdir -p "$work/corpus" && cp /usr/share/games/fortunes/computers "$work/corpus/"
  cat > "$work/cfg.toml" <<TOML
[model]
n_layer = 2
n_head = 2
n_embd = 64
vocab_size = 512
seq_len = 64
[data]
source = ["$work/corpus"]
format = "fortunes"
cache_dir = "$work/data"
val_fraction = 0.1
[train]
steps = 60
batch_size = 4
grad_accum = 2
seed = 11
eval_every = 0
eval_batches = 1
threads = 1
[ckpt]
every = 5
[run]
sample_tokens = 0
[dist]
reproducible = true
TOML
  "$bin" train "$work/cfg.toml" --run-dir "$work/one" --set train.grad_accum=4 > "$work/one.log" 2>&1 ||
    { cat "$work/one.log"; return 1; }
}

# same_as_one WORK RUN WHAT: RUN's final weights equal the one-process run's, byte for byte.
same_as_one() {
  local a b
  a=$(sha256sum < "$1/one/ckpt/step_0000060/model.safetensors")
  b=$(sha256sum < "$2/ckpt/step_0000060/model.safetensors")
  [[ "$a" == "$b" ]] || { echo "[$3] $2: weights differ from the one-process run"; return 1; }
}
