#!/usr/bin/env bash
# .ci/pg-ctl.sh {start|stop|restart|status} [smart|fast|immediate]
#
# Controls the server that `pg_start` (.ci/pg.sh) provisioned, from any child
# process of that shell, e.g. a failure-injection test doing
#   execFileSync('bash', ['.ci/pg-ctl.sh', 'restart', 'immediate'])
# It finds the server through RAGPORT_PG_DATADIR / RAGPORT_PG_BIN, which
# pg_start exports. Unlike pg_stop, `stop` here keeps the data dir so that
# `start` brings the same database back on the same port.
set -euo pipefail
# shellcheck source=.ci/pg.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg.sh"

case "${1:-}" in
  start)   pg_up ;;
  stop)    pg_down "${2:-fast}" ;;
  restart) pg_restart "${2:-fast}" ;;
  status)  _pg_require_env && _pg_as_owner "$RAGPORT_PG_BIN/pg_ctl" -D "$RAGPORT_PG_DATADIR" status ;;
  *) echo "usage: $0 {start|stop|restart|status} [smart|fast|immediate]" >&2; exit 2 ;;
esac
