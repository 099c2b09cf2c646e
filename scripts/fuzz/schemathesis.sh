#!/usr/bin/env bash
# Installs schemathesis (PyPI) once into a venv outside the repository and prints the path of its
# `st` command on the last line of stdout. Idempotent: a complete venv is only checked.
#
# Environment:
#   RAGPORT_SCHEMATHESIS_VENV  the venv (default ~/.cache/ragport-ci/schemathesis)
#   RAGPORT_PYTHON             python >= 3.9 that creates it (default python3)
set -euo pipefail

VERSION="4.32.5"
VENV="${RAGPORT_SCHEMATHESIS_VENV:-${HOME:-/tmp}/.cache/ragport-ci/schemathesis}"
PYTHON="${RAGPORT_PYTHON:-python3}"

if [[ -x "$VENV/bin/st" ]] && [[ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" == "$VERSION" ]]; then
  echo "$VENV/bin/st"
  exit 0
fi
echo "schemathesis: installing $VERSION into $VENV" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$VERSION" >&2
echo "$VENV/bin/st"
