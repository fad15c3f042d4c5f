#!/usr/bin/env bash
# A private PostgreSQL for Burrow's cluster tests and benchmarks: its own
# data directory, a free port on 127.0.0.1, never the system's cluster.
#
#   scripts/postgres.sh start DIR   # initdb (first time) and start; prints the URL
#   scripts/postgres.sh stop DIR    # stop it
#
# Installs Debian's postgresql package when no PostgreSQL is found. As root,
# initdb and pg_ctl run as the `postgres` user, who then owns DIR.
set -euo pipefail

command="${1:-}"
dir="${2:-}"
if [ -z "$command" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

bin=""
for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/pg_ctl" ] && bin="$candidate"
done
if [ -z "$bin" ]; then
    echo "==> installing PostgreSQL (Debian's postgresql package)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    # The package starts the system's cluster: it is not ours, and not used.
    for candidate in /usr/lib/postgresql/*/bin; do
        [ -x "$candidate/pg_ctl" ] && bin="$candidate"
    done
fi
[ -n "$bin" ] || { echo "no PostgreSQL found after installing it" >&2; exit 1; }

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$command" in
start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -U burrow --auth=trust -E UTF8 --no-sync >/dev/null
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # The socket directory is the data directory's parent: /var/run may
    # not be writable, and nothing else should find this server.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on" \
        start >/dev/null
    echo "postgres://burrow@127.0.0.1:$port/postgres"
    ;;
stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
