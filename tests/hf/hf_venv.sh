#!/bin/bash
# The Python environment of the Hugging Face interchange tests (tests/hf):
# Debian's torch (python3-torch, system-wide) plus transformers, tokenizers
# and safetensors from PyPI, in VENV (the build directory's hf-venv, kept
# between runs). Concurrent test processes serialise on VENV.lock; a finished
# environment is marked by VENV/.ready. Exit 0: ready; else it cannot be made
# here (offline, no python3-torch) and the tests report "skipped".
#
#   bash tests/hf/hf_venv.sh VENV
set -uo pipefail
venv=$1
exec 9>"$venv.lock"
flock 9
[[ -f "$venv/.ready" ]] && exit 0
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || { echo "hf_venv: /usr/bin/python3 has no torch (python3-torch)"; exit 1; }
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv" || exit 1
# transformers 4.45 is the last that runs on Debian's torch 1.13.
"$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 30 --retries 1 \
  "transformers>=4.40,<4.46" "tokenizers>=0.20,<0.21" "safetensors>=0.4" || { echo "hf_venv: pip install failed (offline?)"; exit 1; }
"$venv/bin/python" -c 'import transformers, tokenizers, safetensors, torch' || exit 1
touch "$venv/.ready"
