#!/bin/bash
# The Python environment of the Hugging Face interchange and serving tests
# (tests/hf, tests/serve): Debian's torch (python3-torch, system-wide) plus
# transformers, tokenizers, safetensors and the openai client from PyPI, in
# VENV (the build directory's hf-venv, kept between runs). Concurrent test
# processes serialise on VENV.lock; a finished environment is marked by
# VENV/.ready-2. Exit 0: ready; else it cannot be made
# here (offline, no python3-torch, no venv module) and the tests report
# "skipped". A failure is remembered for an hour in VENV.failed, so the
# suite's other test processes (ctest runs each test alone) skip at once
# instead of waiting for pip again.
#
#   bash tests/hf/hf_venv.sh VENV
set -uo pipefail
venv=$1
exec 9>"$venv.lock"
flock 9
# .ready-2: made with the openai client (an older venv is remade).
[[ -f "$venv/.ready-2" ]] && exit 0
if [[ -n "$(find "$venv.failed" -mmin -60 2>/dev/null)" ]]; then
  cat "$venv.failed"
  exit 1
fi
fail() { echo "hf_venv: $1" | tee "$venv.failed"; exit 1; }
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || fail "/usr/bin/python3 has no torch (python3-torch)"
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv" >/dev/null 2>&1 || fail "python3 -m venv failed (python3-venv)"
# transformers 4.45 is the last that runs on Debian's torch 1.13.
"$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 20 --retries 1 \
  "transformers>=4.40,<4.46" "tokenizers>=0.20,<0.21" "safetensors>=0.4" "openai>=1.40,<2" >/dev/null 2>&1 ||
  fail "pip install transformers tokenizers safetensors openai failed (offline?)"
"$venv/bin/python" -c 'import transformers, tokenizers, safetensors, torch, openai' 2>/dev/null || fail "the venv does not import"
rm -f "$venv.failed"
touch "$venv/.ready-2"
