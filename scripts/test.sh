#!/usr/bin/env bash
# Builds crucible (scripts/setup.sh) and runs the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
echo "[test] running ctest"
ctest --test-dir "$root/build" --output-on-failure -j2
