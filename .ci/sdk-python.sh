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
if ! "$VENV/bin/python" -c 'import openai' 2>/dev/null; then
  echo "[sdk-python] creating $VENV with the openai package" >&2
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip --disable-pip-version-check --no-input -q install 'openai>=1.50,<3' >&2
fi
# Cohere's SDK is only for the rerank client test, which is skipped without it: a failed install
# warns and leaves the openai venv usable.
if ! "$VENV/bin/python" -c 'import cohere' 2>/dev/null; then
  echo "[sdk-python] adding the cohere package" >&2
  "$VENV/bin/python" -m pip --disable-pip-version-check --no-input -q install 'cohere>=5.13,<8' >&2 ||
    echo "[sdk-python] WARNING: cohere did not install; the Cohere client test will be skipped" >&2
fi
"$VENV/bin/python" -c 'import openai; print("[sdk-python] openai", openai.__version__)' >&2
"$VENV/bin/python" -c 'import cohere; print("[sdk-python] cohere", cohere.__version__)' >&2 2>/dev/null || true
echo "$VENV/bin/python"
