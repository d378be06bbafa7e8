#!/usr/bin/env bash
# Builds crucible (scripts/setup.sh) and runs it with the given arguments.
# Without arguments it runs the embedded default: `crucible train` (a small GPT
# on Debian's fortunes corpus; run directory under ./runs, dataset cache ./data).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh" >&2
if [[ $# -eq 0 ]]; then
  set -- train
fi
exec "$root/build/crucible" "$@"
