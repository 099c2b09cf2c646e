#!/usr/bin/env bash
# Installs what the code_execution Python sandbox needs on a Debian/Ubuntu host, idempotently:
# bubblewrap (namespaces), util-linux (setpriv, prlimit), a C compiler and libseccomp-dev (the
# seccomp filter is built from src/tools/code-execution/seccomp/filter.c at start-up) and
# Debian's python3 under /usr (the sandbox sees only /usr; a pyenv or /opt Python is invisible).
# Call it from .ci/run before `npm test`; it needs root (or sudo).
set -euo pipefail

packages=(bubblewrap util-linux gcc libc6-dev libseccomp-dev python3-minimal)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Fail early, with the reason, if this host cannot run the sandbox at all.
if ! bwrap --unshare-all --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
  --proc /proc --dev /dev /usr/bin/python3 -c 'pass'; then
  echo "sandbox-deps: bwrap cannot create namespaces here (see docs/sandbox.md)" >&2
  exit 1
fi
echo "sandbox-deps: bubblewrap $(bwrap --version | cut -d' ' -f2), $(/usr/bin/python3 --version)" >&2
