#!/usr/bin/env bash
# test/pgbouncer/run.sh: idemjob through pgbouncer in transaction pooling.
#
# Starts pgbouncer (Debian package "pgbouncer") in front of the server in
# PGHOST/PGPORT/PGUSER, pool_mode = transaction, four server connections
# used round robin, so that consecutive transactions of one client land on
# different backends.  Then:
#   (a) scenario.sql: every idemjob function, one transaction per
#       statement, with its answers checked; while it runs, pgbench keeps
#       the pool busy; at least two backends must have served it;
#   (b) the soak's short version (test/soak/run.sh --short) through the
#       pooler, with pgbench -M extended (prepared statements are session
#       state).
# Exits non-zero on any failure.  PGBOUNCER_PORT (5690) picks the port.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PG_BIN:-}" ]; then
	PG_BIN=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
fi
export PG_BIN
PSQL="$PG_BIN/psql -X -q -v ON_ERROR_STOP=1"
bport=${PGBOUNCER_PORT:-5690}
db=idemjob_bouncer
server_host=${PGHOST:?PGHOST must name the server}
server_port=${PGPORT:-5432}
user=${PGUSER:-postgres}

dir=$(mktemp -d /tmp/idemjob-bouncer.XXXXXX)
chmod 755 "$dir"
cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$server_host port=$server_port
[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
default_pool_size = 4
min_pool_size = 4
server_round_robin = 1
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
admin_users = $user
INI
echo "\"$user\" \"\"" >"$dir/users.txt"
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown -R postgres: "$dir"
load_pid=
cleanup() {
	[ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null
	[ -f "$dir/pgbouncer.pid" ] && kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null
	sleep 0.5
	PGHOST=$server_host PGPORT=$server_port $PSQL -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT

PGHOST=$server_host PGPORT=$server_port $PSQL -d postgres \
	-c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
PGHOST=$server_host PGPORT=$server_port $PSQL -d "$db" -c "CREATE EXTENSION idemjob" \
	-c "CREATE SCHEMA bouncer" -c "CREATE TABLE bouncer.seen (step text, pid int)" >/dev/null

as_owner pgbouncer -d "$dir/pgbouncer.ini"
for _ in $(seq 1 50); do [ -S "$dir/.s.PGSQL.$bport" ] && break; sleep 0.1; done
export PGHOST=$dir PGPORT=$bport PGUSER=$user
echo "pgbouncer $(pgbouncer --version | head -1 | awk '{print $2}') on $dir:$bport, pool_mode transaction, in front of $server_host:$server_port"

# (a) the scenario, three times, while pgbench keeps the pool busy
cat >"$dir/load.sql" <<'SQL'
SELECT pg_sleep(0.002);
SQL
"$PG_BIN/pgbench" -n -c 4 -T 60 -M extended -f "$dir/load.sql" "$db" >/dev/null 2>&1 &
load_pid=$!
for i in 1 2 3; do
	sed "s/'pooler'/'pooler$i'/g" "$here/scenario.sql" | $PSQL -d "$db" -f - || { echo "pgbouncer: scenario failed" >&2; exit 1; }
done
kill "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
load_pid=
backends=$($PSQL -At -d "$db" -c "SELECT count(DISTINCT pid) FROM bouncer.seen")
echo "scenario: 3 runs served by $backends distinct backends"
if [ "$backends" -lt 2 ]; then
	echo "pgbouncer: the scenario never changed backend, so it proves nothing about session state" >&2
	exit 1
fi

# (b) the soak's short version through the pooler
SOAK_PGBENCH_MODE=extended SOAK_DB=idemjob_soak_bouncer \
	SOAK_DUP_SECONDS=${SOAK_DUP_SECONDS:-4} SOAK_MIX_SECONDS=${SOAK_MIX_SECONDS:-12} \
	"$here/../soak/run.sh" --short
echo "pgbouncer: PASSED"
