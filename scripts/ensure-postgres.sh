#!/usr/bin/env bash
# Makes sure a PostgreSQL server with trust authentication for user `postgres` answers on
# 127.0.0.1:5432, for the tests. In order:
#   1. one already answers: nothing to do;
#   2. a Debian cluster is installed but stopped: start it;
#   3. otherwise: a throwaway cluster in target/pgdata (trust auth, loopback only), installing the
#      PostgreSQL server from Debian's packages first if it is missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."

ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
wait_ready() {
  for _ in $(seq 1 60); do ready && return 0; sleep 0.5; done
  return 1
}

if ready; then exit 0; fi
echo "ensure-postgres: nothing answers on 127.0.0.1:5432; starting PostgreSQL" >&2

if command -v pg_ctlcluster >/dev/null 2>&1 && compgen -G "/etc/postgresql/*/main" >/dev/null; then
  for dir in /etc/postgresql/*/main; do
    version=$(basename "$(dirname "$dir")")
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
  done
  if wait_ready; then exit 0; fi
fi

find_initdb() { command -v initdb 2>/dev/null || compgen -G "/usr/lib/postgresql/*/bin/initdb" | sort -V | tail -n 1; }
initdb=$(find_initdb || true)
if [ -z "$initdb" ]; then
  echo "ensure-postgres: installing PostgreSQL from Debian's packages" >&2
  apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
  initdb=$(find_initdb)
fi
bindir=$(dirname "$initdb")
data="$PWD/target/pgdata"
# PostgreSQL refuses to run as root.
id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
mkdir -p "$data"
chown postgres "$data"
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ ! -f "$data/PG_VERSION" ]; then
  as_postgres "$bindir/initdb" -D "$data" -U postgres --auth=trust >&2
fi
as_postgres "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w \
  -o "-p 5432 -c listen_addresses=127.0.0.1 -k /tmp" start >&2
wait_ready
