#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for the history store's tests: Debian's server
# (installed when missing), a new data directory, trust authentication on 127.0.0.1 only.
# Prints the URL to export as TFBENCH_TEST_POSTGRES_URL; `.ci/postgres.sh stop DIR` stops it.
# Usage: eval "$(.ci/postgres.sh start)"   (sets TFBENCH_TEST_POSTGRES_URL and TFBENCH_TEST_PGDIR)
set -euo pipefail
bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
case "${1:-start}" in
start)
    if [ -z "$(bindir)" ]; then
        { apt-get update && apt-get install -y --no-install-recommends postgresql; } >&2
    fi
    bin=$(bindir)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tfbench-pg.XXXXXX")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_pg=()
    if [ "$(id -u)" = 0 ]; then   # initdb refuses root: the cluster belongs to postgres
        chown postgres "$dir"
        as_pg=(runuser -u postgres --)
    fi
    "${as_pg[@]}" "$bin/initdb" -D "$dir/data" -A trust -U tfbench >/dev/null
    "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null
    echo "export TFBENCH_TEST_POSTGRES_URL=postgresql://tfbench@127.0.0.1:$port/postgres"
    echo "export TFBENCH_TEST_PGDIR=$dir"
    ;;
stop)
    dir=${2:?the directory start printed}
    as_pg=()
    [ "$(id -u)" = 0 ] && as_pg=(runuser -u postgres --)
    "${as_pg[@]}" "$(bindir)/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null || true
    rm -rf "$dir"
    ;;
esac
