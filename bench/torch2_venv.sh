#!/bin/bash
# Makes the virtual environment with PyPI's PyTorch 2 wheel that
# bench/compare_pytorch.py uses as its PyTorch 2 peer (--torch2 VENV), with
# Hugging Face transformers for bench/serve_bench.py's generate peer.
# A benchmark peer only: crucible, its setup and CI never depend on it.
#
#   bash bench/torch2_venv.sh [VENV]      # default: .venv-torch2 (git-ignored)
#
# ~6 GB (the wheel pulls its CUDA libraries even on a CPU-only machine).
set -euo pipefail
venv=${1:-.venv-torch2}
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import torch, transformers' 2>/dev/null; then
  echo "torch2_venv: $venv already has torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet torch numpy transformers tokenizers safetensors
echo "torch2_venv: $venv has torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
