# bench/cpu.sh: sourced by run.sh and w7.sh.
#
# server_cpu_ticks PID: CPU time (utime + stime, in clock ticks of
# getconf CLK_TCK) of the postmaster PID and every process of the server:
# its live children, and, through the postmaster's cutime + cstime, the
# children it has reaped (a client's backend once it exited, autovacuum
# workers).  The difference over a pgbench run is the server's CPU for it,
# background processes included.
server_cpu_ticks() {
	local pm=$1 p t=0 v
	for p in $pm $(ps -o pid= --ppid "$pm"); do
		v=$(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
			print f[12] + f[13] + (child ? 0 : f[14] + f[15]) }' child=$([ "$p" = "$pm" ] && echo 0 || echo 1) \
			"/proc/$p/stat" 2>/dev/null || echo 0)
		t=$((t + v))
	done
	echo "$t"
}

# wait_backends_gone PSQL_FN DB: until DB has no client backend but ours
# (at most 5 s), so that their CPU is in the postmaster's cutime
wait_backends_gone() {
	local fn=$1 db=$2 i
	for i in $(seq 50); do
		[ "$($fn "$db" -c "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && return 0
		sleep 0.1
	done
}
