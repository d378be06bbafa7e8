#!/usr/bin/env bash
# The GPU checks in one device call (docs/gpu.md).
#   scripts/gpu_check.sh pack   here: builds crucible and the GPU tests, packs them with the
#                               libraries the GPU machine lacks into .gpu-pack/ (../shared/device/pack.sh)
#   scripts/gpu_check.sh run    on the GPU machine (the device tool's `run`, carry [".gpu-pack"]):
#                               what the GPU is, every `gpu` test, then the peers' benchmark
#                               (bench/gpu_peers.py: PyTorch eager and compile, the bf16 GEMM
#                               ceiling); output under $OUT when set. PEERS=0 skips the peers.
# A test that needs a GPU reports itself skipped where there is none, never passed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
case "${1:-}" in
  pack)
    cmake --build build -j"$(nproc)" --target crucible crucible_gpu_tests
    pack="$root/../shared/device/pack.sh"
    [[ -x $pack ]] || pack="$(dirname "$root")/shared/device/pack.sh"
    bash "$pack" build/crucible build/crucible_gpu_tests
    ;;
  run)
    out="${OUT:-$root/.gpu-out}"
    mkdir -p "$out"
    [[ -x .gpu-pack/run.sh ]] || { echo "[gpu_check] no .gpu-pack/: run 'scripts/gpu_check.sh pack' here first" >&2; exit 2; }
    { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv || true; } \
      | tee "$out/gpu.txt"
    # Every gpu test (crucible_gpu_tests holds exactly the label's tests).
    tests_rc=0
    # The CLI tests run the packed crucible (run.sh unpacks into /tmp/pack).
    CRUCIBLE_BIN=/tmp/pack/bin/crucible bash .gpu-pack/run.sh crucible_gpu_tests --gtest_output="xml:$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.txt" ||
      tests_rc=$?
    # The peers crucible's GPU step is measured against (docs/gpu.md), bounded so the
    # call leaves device time for a rerun.
    if [[ ${PEERS:-1} != 0 ]]; then
      for batch in 16 32; do
        timeout 240 python3 bench/gpu_peers.py --model gpt2-124M --batch "$batch" --json \
          > "$out/peers_gpt2-124M_b$batch.json" 2> "$out/peers_gpt2-124M_b$batch.err" || true
        cat "$out/peers_gpt2-124M_b$batch.json"
      done
    fi
    exit "$tests_rc"
    ;;
  *)
    sed -n '2,7p' "$0" >&2
    exit 2
    ;;
esac
