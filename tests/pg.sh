#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests and benches of the shared
# store (issue 31): Debian's postgresql package, initdb into DIR, pg_ctl on
# a loopback port and a socket in DIR, one database "clara" owned by the
# user "clara" with a random password.
#
# usage: pg.sh start DIR   initdb (once) and start; prints the URL
#        pg.sh url DIR     prints the URL (postgres://clara:PASSWORD@127.0.0.1:PORT/clara)
#        pg.sh stop DIR    stops the server (fast shutdown); nothing if not running
#        pg.sh kill DIR    stops it at once (immediate shutdown, recovery at next start)
#        pg.sh restart DIR stops it (fast) and starts it again on the same port
#        pg.sh bindir      prints the folder of initdb and pg_ctl, or exits 3
#
# Exit status 3: the PostgreSQL server binaries are not installed (make
# setup installs them); callers that must not skip (CLARA_REQUIRE_PG=1)
# treat that as a failure. As root, the server runs as the user postgres
# (PostgreSQL refuses to run as root).
set -euo pipefail

bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    [[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && { echo "$d"; return 0; }
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && { echo "$d"; return 0; }
  done
  return 3
}

cmd=${1:-}
if [[ "$cmd" == bindir ]]; then
  bindir || { echo "pg.sh: no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql" >&2; exit 3; }
  exit 0
fi
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { sed -n 's/^# \{0,1\}//; 2,17p' "$0" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
data=$dir/data

as_owner=()
if [[ $(id -u) -eq 0 ]]; then
  as_owner=(runuser -u postgres --)
fi

url() {
  local port password
  port=$(cat "$dir/port")
  password=$(cat "$dir/password")
  echo "postgres://clara:$password@127.0.0.1:$port/clara?sslmode=disable"
}

running() { [[ -f "$data/postmaster.pid" ]] && "${as_owner[@]}" "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

bin=$(bindir) || { echo "pg.sh: no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql" >&2; exit 3; }

start() {
  if [[ ! -f "$data/PG_VERSION" ]]; then
    rm -rf "$data"
    mkdir -p "$data"
    head -c 18 /dev/urandom | base64 | tr '+/' 'xy' > "$dir/password"
    chmod 600 "$dir/password"
    # A free loopback port, chosen once: a restart keeps it.
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' > "$dir/port"
    [[ ${#as_owner[@]} -gt 0 ]] && chown -R postgres "$dir"
    "${as_owner[@]}" "$bin/initdb" -D "$data" -U clara --pwfile="$dir/password" --auth-local=trust \
      --auth-host=scram-sha-256 -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >> "$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $(cat "$dir/port")
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 32MB
log_min_messages = warning
EOF
  fi
  running && { url; return 0; }
  [[ ${#as_owner[@]} -gt 0 ]] && chown -R postgres "$dir"
  "${as_owner[@]}" "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >/dev/null \
    || { tail -20 "$dir/server.log" >&2; exit 1; }
  if ! "${as_owner[@]}" "$bin/psql" -h "$dir" -p "$(cat "$dir/port")" -U clara -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = 'clara'" | grep -q 1; then
    "${as_owner[@]}" "$bin/createdb" -h "$dir" -p "$(cat "$dir/port")" -U clara clara
  fi
  url
}

case "$cmd" in
  start) start ;;
  url) url ;;
  stop) running && "${as_owner[@]}" "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true ;;
  kill) running && "${as_owner[@]}" "$bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null || true ;;
  restart)
    running && "${as_owner[@]}" "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
    start >/dev/null ;;
  *) echo "pg.sh: unknown command $cmd" >&2; exit 2 ;;
esac
