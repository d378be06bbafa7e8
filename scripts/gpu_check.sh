#!/usr/bin/env bash
# The GPU checks in one device call (docs/gpu.md).
#   scripts/gpu_check.sh pack   here: builds crucible and the GPU tests, packs them with the
#                               libraries the GPU machine lacks into .gpu-pack/ (../shared/device/pack.sh)
#   scripts/gpu_check.sh run    on the GPU machine (the device tool's `run`, carry [".gpu-pack"]):
#                               what the GPU is, then every `gpu` test; output under $OUT when set
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
    bash .gpu-pack/run.sh crucible_gpu_tests --gtest_output="xml:$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.txt"
    ;;
  *)
    sed -n '2,7p' "$0" >&2
    exit 2
    ;;
esac
