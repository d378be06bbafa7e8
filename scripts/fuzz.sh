#!/usr/bin/env bash
# Builds crucible's libFuzzer targets with clang (ASan + UBSan) into
# build-fuzz/ and runs each for a bounded time on its committed corpus
# (fuzz/corpus/NAME; docs/errors.md). A crash stops with its input kept under
# build-fuzz/crashes/: commit it to fuzz/corpus/NAME/ as a regression input
# (the unit tests replay that directory).
#   scripts/fuzz.sh                 every target, FUZZ_SECONDS (default 10) each
#   scripts/fuzz.sh shard 300       one target for 300 s
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${2:-${FUZZ_SECONDS:-10}}"
targets=(config safetensors manifest shard checked_file jsonl fortunes probe plan_json trace cluster)
if [[ $# -ge 1 ]]; then targets=("$1"); fi

if ! command -v clang++ >/dev/null || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "[fuzz] clang with libFuzzer is missing (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
echo "[fuzz] configuring build-fuzz/ (clang, ASan + UBSan)"
# -O1 -gline-tables-only, as OSS-Fuzz builds: line numbers in a crash's stack,
# a third less compile time than -O2 -g for a build CI makes from scratch.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_C_FLAGS_FUZZ="-O1 -gline-tables-only -DNDEBUG" \
  -DCRUCIBLE_FUZZ=ON -DCRUCIBLE_CUDA=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" >/dev/null
echo "[fuzz] building ${#targets[@]} target(s)"
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

mkdir -p build-fuzz/crashes
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=0
for t in "${targets[@]}"; do
  work="$(mktemp -d)"  # new inputs go here; the committed corpus is only read
  echo "[fuzz] $t: ${seconds}s on $(ls fuzz/corpus/"$t" | wc -l) committed inputs"
  if ! build-fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/crashes/$t-" "$work" "fuzz/corpus/$t" >"build-fuzz/fuzz_$t.log" 2>&1; then
    echo "[fuzz] $t FAILED: $(ls -t build-fuzz/crashes/"$t"-* 2>/dev/null | head -1) (log: build-fuzz/fuzz_$t.log)" >&2
    tail -n 40 "build-fuzz/fuzz_$t.log" >&2
    failed=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/fuzz_$t.log" | tr '\n' ' ' | sed "s/^/[fuzz] $t: /"
    echo
  fi
  rm -rf "$work"
done
exit "$failed"
