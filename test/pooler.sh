# test/pooler.sh: sourced by test/examples/run.sh and test/clients/run.sh.
#
# ij_pooler_start WORK PORT SERVER_HOST SERVER_PORT USER...: pgbouncer in
# transaction pooling with server_round_robin (consecutive transactions
# of one client on other backends, so session state such as a prepared
# statement breaks), trust for the USERs, its socket in WORK; waits for it.
# ij_pooler_cleanup WORK DB_PREFIX: stops it, drops the databases named
# DB_PREFIX%, removes WORK (for a trap; needs PSQL).

ij_pooler_start() {
	local work=$1 port=$2 host=$3 sport=$4 u
	shift 4
	cat >"$work/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$sport
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $work
auth_type = trust
auth_file = $work/users.txt
pool_mode = transaction
default_pool_size = 4
server_round_robin = 1
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
INI
	for u in "$@"; do echo "\"$u\" \"\""; done >"$work/users.txt"
	if [ "$(id -u)" = 0 ]; then
		chown -R postgres: "$work"
		runuser -u postgres -- pgbouncer -d "$work/pgbouncer.ini"
	else
		pgbouncer -d "$work/pgbouncer.ini"
	fi
	for _ in $(seq 1 50); do [ -S "$work/.s.PGSQL.$port" ] && return 0; sleep 0.1; done
	echo "pgbouncer did not start (port $port)" >&2
	return 1
}

ij_pooler_cleanup() {
	local work=$1 prefix=$2 d
	[ -f "$work/pgbouncer.pid" ] && kill "$(cat "$work/pgbouncer.pid")" 2>/dev/null
	for d in $($PSQL -d postgres -Atc "SELECT datname FROM pg_database WHERE datname LIKE '${prefix}%'" 2>/dev/null); do
		$PSQL -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
	done
	rm -rf "$work"
}
