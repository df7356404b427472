# bench/cluster.sh: the throw-away cluster of a benchmark script (w7.sh,
# w7_backlog.sh, bloat.sh), sourced after PG_BINDIR, WORK and PORT are set.
#
#   bench_cluster_start <<EOF
#   max_connections = 20
#   ...
#   EOF
#
# makes $WORK (a cluster of an earlier run stopped, the directory emptied),
# runs initdb in $PGDATA_W, writes the connection settings (no TCP, a
# socket in $WORK on $PORT) and then the settings on stdin to its
# postgresql.conf, and starts it; on exit the cluster is stopped and $WORK
# removed.

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
PGDATA_W="$WORK/data"
BENCH_UP=0

bench_cluster_cleanup() {
	local rc=$?
	[ "$BENCH_UP" = 1 ] && as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_W" -m fast -w stop >/dev/null 2>&1
	rm -rf "$WORK"
	exit $rc
}

bench_cluster_start() {
	trap bench_cluster_cleanup EXIT
	trap 'exit 130' INT TERM
	[ -e "$PGDATA_W/postmaster.pid" ] && as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_W" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$WORK"; mkdir -p "$WORK"
	[ "$(id -u)" = 0 ] && chown postgres: "$WORK"
	as_pg "$PG_BINDIR/initdb" -D "$PGDATA_W" -A trust -U postgres -E UTF8 --locale=C --no-sync >"$WORK/initdb.log" 2>&1
	{
		printf "listen_addresses = ''\nport = %s\nunix_socket_directories = '%s'\n" "$PORT" "$WORK"
		cat
	} >>"$PGDATA_W/postgresql.conf"
	as_pg "$PG_BINDIR/pg_ctl" -D "$PGDATA_W" -l "$WORK/server.log" -w start >/dev/null
	BENCH_UP=1
}
