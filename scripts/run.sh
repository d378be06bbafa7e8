#!/usr/bin/env bash
# Builds crucible (scripts/setup.sh) and runs it with the given arguments.
# Without arguments it runs the tiny-workload step benchmark.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh" >&2
if [[ $# -eq 0 ]]; then
  set -- bench step --workload tiny
fi
exec "$root/build/crucible" "$@"
