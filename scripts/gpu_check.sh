#!/usr/bin/env bash
# The GPU checks in one device call (docs/gpu.md).
#   scripts/gpu_check.sh pack   here: builds crucible and the GPU tests, packs them with the
#                               libraries the GPU machine lacks into .gpu-pack/ (../shared/device/pack.sh)
#   scripts/gpu_check.sh run    on the GPU machine (the device tool's `run`, carry [".gpu-pack"]):
#                               what the GPU is, every `gpu` test, crucible's step benchmark
#                               (bench step --device cuda), then the peers' benchmark
#                               (bench/gpu_peers.py: PyTorch eager and compile, the bf16 GEMM
#                               ceiling); output under $OUT when set. BENCH=0 and PEERS=0 skip
#                               crucible's and the peers' benchmarks; STAGES="tests probe bench
#                               peers" (the default: all) picks stages, so that one device call
#                               (600 s at most) can run the tests and the next the benchmarks;
#                               FILTER=<gtest filter> narrows the tests, each in its own process
#                               bounded by TEST_S (180), all of them by TESTS_S (420).
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
    # run.sh unpacks into /tmp/pack only where that is missing: a machine still warm from an
    # earlier call (or this one, without a GPU) would run the binaries packed then.
    stamp="$(stat -c %Y-%s .gpu-pack/pack.tar.xz)"
    if [[ "$(cat /tmp/pack/.stamp 2>/dev/null)" != "$stamp" ]]; then
      rm -rf /tmp/pack && bash .gpu-pack/run.sh true && echo "$stamp" >/tmp/pack/.stamp
    fi
    { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv || true; } \
      | tee "$out/gpu.txt"
    # Every gpu test (crucible_gpu_tests holds exactly the label's tests).
    stages=" ${STAGES:-tests probe bench peers} "
    has() { [[ $stages == *" $1 "* ]]; }
    tests_rc=0
    # The CLI tests run the packed crucible (run.sh unpacks into /tmp/pack). Each test in
    # its own process, bounded by TEST_S (180 s) and all of them by TESTS_S (420 s): a
    # kernel that aborts or hangs costs its own test, not the rest. The kernels' tests
    # first, the end-to-end runs after; results in gpu_tests.txt and tests/<name>.xml.
    if has tests; then
      mkdir -p "$out/tests"
      all=$(bash .gpu-pack/run.sh crucible_gpu_tests --gtest_list_tests --gtest_filter="${FILTER:-*}" |
        awk '/^[^ ]/ {suite = $1} /^  [^ ]/ {print suite $1}')
      e2e='^(GpuTrain|GpuLayouts|GpuFaults|GpuPlan|GpuEnergy|GpuProbe|GpuBench)\.'
      ordered="$(grep -Ev "$e2e" <<<"$all" || true) $(grep -E "$e2e" <<<"$all" || true)"
      deadline=$((SECONDS + ${TESTS_S:-420}))
      failed=() passed=0 skipped=0
      for t in $ordered; do
        left=$((deadline - SECONDS))
        if ((left < 10)); then echo "[gpu_check] out of time before $t" | tee -a "$out/gpu_tests.txt"; tests_rc=124; break; fi
        limit=$((left < ${TEST_S:-180} ? left : ${TEST_S:-180}))
        rc=0
        CRUCIBLE_BIN=/tmp/pack/bin/crucible timeout "$limit" bash .gpu-pack/run.sh crucible_gpu_tests \
          --gtest_filter="$t" --gtest_output="xml:$out/tests/$t.xml" >"$out/tests/$t.txt" 2>&1 || rc=$?
        if ((rc != 0)); then
          failed+=("$t (rc $rc)"); tests_rc=1
          tail -n 40 "$out/tests/$t.txt" | tee -a "$out/gpu_tests.txt"
        elif grep -q '^\[  SKIPPED \]' "$out/tests/$t.txt"; then
          skipped=$((skipped + 1))
        else
          passed=$((passed + 1))
        fi
        grep -E '^\[ +(OK|FAILED|SKIPPED) +\] .*\([0-9]+ ms\)$|^\[(gpu plan|closed loop)\]' "$out/tests/$t.txt" | tee -a "$out/gpu_tests.txt" || true
      done
      echo "[gpu_check] tests: $passed passed, $skipped skipped, ${#failed[@]} failed${failed:+: ${failed[*]}}" |
        tee -a "$out/gpu_tests.txt"
    fi
    has probe || has bench || has peers || exit "$tests_rc"
    # The probe's gpu section (docs/probe.md): ceilings, host links, launch cost and
    # 20 s of sustained load under NVML, into $OUT for the platform issue's figures.
    if has probe; then
      timeout 120 bash .gpu-pack/run.sh crucible probe --sections gpu --json "$out/probe_gpu.json" 2>&1 |
        tee "$out/probe_gpu.txt" || true
      # The GPU node's cluster file from it (docs/plan.md): configs/clusters/h200-measured.toml's source.
      bash .gpu-pack/run.sh crucible plan --cluster-from-probe "$out/probe_gpu.json" -o "$out/h200-measured.toml" \
        2>&1 | tee "$out/cluster.txt" || true
    fi
    # crucible's own step on the GPU (docs/gpu.md): GPT-2 124M and 350M at T = 1024 in
    # bf16, with the GEMM ceiling and copy bandwidth measured in the same process and
    # each kernel class against its own ceiling. BENCH=0 skips it.
    if [[ ${BENCH:-1} != 0 ]] && has bench; then
      for run in "gpt2-124M-T1024 16" "gpt2-124M-T1024 32" "gpt2-350M-T1024 16"; do
        set -- $run
        name="crucible_${1}_b$2"
        timeout 150 bash .gpu-pack/run.sh crucible bench step --device cuda --workload "$1" --batch "$2" \
          --precision bf16 --steps 10 --warmup 3 --json > "$out/$name.json" 2> "$out/$name.err" || true
        cat "$out/$name.json" "$out/$name.err"
      done
    fi
    # The peers crucible's GPU step is measured against (docs/gpu.md), bounded so the
    # call leaves device time for a rerun.
    if [[ ${PEERS:-1} != 0 ]] && has peers; then
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
