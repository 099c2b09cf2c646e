#!/usr/bin/env bash
# setup-peers.sh: install the gateways bench/gateway/run.ts compares ragport with, outside the
# repository, the way .ci/fetch-model.sh caches the model.
#
# Usage:  bash bench/setup-peers.sh          # prints the two paths run.ts uses by default
#
# Output (idempotent: once installed, a re-run only checks the versions and prints the paths):
#   $PEERS/portkey/node_modules/@portkey-ai/gateway/build/start-server.js
#       Portkey's gateway, from bench/peers/package.json and its lock file (npm ci)
#   $PEERS/litellm/bin/litellm
#       LiteLLM's proxy (litellm[proxy], pinned below) in a Python venv
#
# Environment:
#   RAGPORT_CI_CACHE      cache root (default ~/.cache/ragport-ci); $PEERS is $RAGPORT_CI_CACHE/bench-peers
#   RAGPORT_BENCH_PEERS   put the peers here instead of $RAGPORT_CI_CACHE/bench-peers
#   RAGPORT_PYTHON        python (3.9–3.13) used to create the LiteLLM venv (default python3)
#   RAGPORT_PEERS_FORCE=1 reinstall both even if they are up to date
# Everything but the last two stdout lines goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${RAGPORT_CI_CACHE:-${HOME:-/tmp}/.cache/ragport-ci}"
PEERS="${RAGPORT_BENCH_PEERS:-$CACHE/bench-peers}"
PYTHON="${RAGPORT_PYTHON:-python3}"
# 1.108.7: the newest release whose [proxy] extra resolved when this was pinned (later ones
# needed litellm-enterprise / litellm-proxy-extras releases the index did not have yet).
LITELLM_REQ="litellm[proxy]==1.108.7"

PORTKEY_DIR="$PEERS/portkey"
PORTKEY_START="$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js"
LITELLM_VENV="$PEERS/litellm"
LITELLM_BIN="$LITELLM_VENV/bin/litellm"

say() { echo "setup-peers: $*" >&2; }
force() { [[ "${RAGPORT_PEERS_FORCE:-0}" == 1 ]]; }

# Portkey: the lock file in bench/peers pins the whole tree; the installed copy records which
# lock it came from so a changed lock reinstalls it.
install_portkey() {
  local lock_sum
  lock_sum=$(sha256sum "$HERE/peers/package-lock.json" | cut -d' ' -f1)
  if ! force && [[ -f "$PORTKEY_START" && "$(cat "$PORTKEY_DIR/.lock-sha256" 2>/dev/null)" == "$lock_sum" ]]; then
    say "Portkey up to date: $PORTKEY_DIR"
    return 0
  fi
  command -v npm >/dev/null || { say "error: npm not on PATH (source .ci/node24.sh && ragport_node24)"; exit 1; }
  say "installing Portkey's gateway into $PORTKEY_DIR"
  rm -rf "$PORTKEY_DIR"
  mkdir -p "$PORTKEY_DIR"
  cp "$HERE/peers/package.json" "$HERE/peers/package-lock.json" "$PORTKEY_DIR/"
  (cd "$PORTKEY_DIR" && npm ci --no-audit --no-fund --ignore-scripts >&2)
  [[ -f "$PORTKEY_START" ]] || { say "error: $PORTKEY_START missing after npm ci"; exit 1; }
  echo "$lock_sum" >"$PORTKEY_DIR/.lock-sha256"
}

# LiteLLM: a venv of its own, keyed by the requirement so a new pin rebuilds it.
install_litellm() {
  if ! force && [[ -x "$LITELLM_BIN" && "$(cat "$LITELLM_VENV/.ragport-reqs" 2>/dev/null)" == "$LITELLM_REQ" ]]; then
    say "LiteLLM up to date: $LITELLM_VENV"
    return 0
  fi
  say "creating venv $LITELLM_VENV with $LITELLM_REQ"
  if [[ -e "$LITELLM_VENV" ]]; then
    # Only ever replace something that is a venv.
    [[ -f "$LITELLM_VENV/pyvenv.cfg" ]] || { say "error: $LITELLM_VENV exists and is not a venv"; exit 1; }
    rm -rf "$LITELLM_VENV"
  fi
  mkdir -p "$PEERS"
  "$PYTHON" -m venv "$LITELLM_VENV" >&2
  "$LITELLM_VENV/bin/python" -m pip --disable-pip-version-check --no-input -q install "$LITELLM_REQ" >&2
  echo "$LITELLM_REQ" >"$LITELLM_VENV/.ragport-reqs"
}

install_portkey
install_litellm
say "Portkey $(node -p "require('$PORTKEY_DIR/node_modules/@portkey-ai/gateway/package.json').version" 2>/dev/null || echo '?'), LiteLLM $("$LITELLM_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))')"
echo "$PORTKEY_START"
echo "$LITELLM_BIN"
