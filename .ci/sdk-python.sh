#!/usr/bin/env bash
# The official OpenAI and Cohere Python SDKs in a virtualenv of its own, for the docs' Python
# example (test/docs/examples.test.ts) and the rerank endpoints' client test
# (test/gateway/rerank.test.ts). Reused across runs; prints the venv's python on its last line.
#
#   RAGPORT_SDK_VENV   the venv (default ~/.cache/ragport-ci/sdkvenv)
#   RAGPORT_PYTHON     the python that creates it (default python3)
set -euo pipefail
VENV="${RAGPORT_SDK_VENV:-${HOME:-/tmp}/.cache/ragport-ci/sdkvenv}"
PYTHON="${RAGPORT_PYTHON:-python3}"
if ! "$VENV/bin/python" -c 'import openai, cohere' 2>/dev/null; then
  echo "[sdk-python] creating $VENV with the openai and cohere packages" >&2
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip --disable-pip-version-check --no-input -q install 'openai>=1.50,<3' 'cohere>=5.13,<8' >&2
fi
"$VENV/bin/python" -c 'import openai, cohere; print("[sdk-python] openai", openai.__version__, "cohere", cohere.__version__)' >&2
echo "$VENV/bin/python"
