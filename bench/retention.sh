#!/usr/bin/env bash
#
# bench/retention.sh: purge() and spent-key figures on a running server.
#
#   PGHOST, PGPORT, PGUSER   the server (a superuser: the data is loaded raw)
#   N                        final jobs to purge (default 1000000)
#   BATCH                    purge batch (default 10000)
#   REPLAYS                  submits per replay measurement (default 20000)
#   W1_SECONDS, W1_CLIENTS   W1 (bench/workloads/idemjob/submit_new.sql) during
#                            a purge: seconds per point (default 15), client
#                            counts (default "1 2"); 0 seconds leaves it out
#   PAUSES                   idemjob.purge_pause values to run it with
#                            (default "200ms 50ms 0"; each point
#                            purges from the same N jobs, so the last points
#                            may run dry: "left" says so)
#
# Creates database bench_retention (dropped first), loads N succeeded jobs
# completed a day ago, each with one attempt, with the guards set aside
# (session_replication_role = replica: loading only), and prints:
#   - W1's TPS alone and while purges of BATCH jobs run back to back in
#     another session (each its own transaction), for each purge_pause in
#     PAUSES, with the purge rate meanwhile;
#   - the purge rate (jobs/s) in batches of BATCH, each batch its own
#     transaction, as a scheduler would run it;
#   - bytes on disk per spent key (table + indexes) and per final job of the
#     jobs_final index that lets purge find them;
#   - submit of a spent key against a replay of a live key (same loop, the
#     same exception block around each call).
#
set -euo pipefail
N=${N:-1000000}
BATCH=${BATCH:-10000}
REPLAYS=${REPLAYS:-20000}
W1_SECONDS=${W1_SECONDS:-15}
W1_CLIENTS=${W1_CLIENTS:-1 2}
PAUSES=${PAUSES:-200ms 50ms 0}
HERE=$(cd "$(dirname "$0")" && pwd)
PGBENCH=${PGBENCH:-$(command -v pgbench || echo /usr/lib/postgresql/15/bin/pgbench)}
DB=bench_retention
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d $DB <<EOF
CREATE EXTENSION idemjob;
SET session_replication_role = replica;
INSERT INTO idemjob.jobs (id, owner_id, idempotency_key, intent, params, provider,
	state, version, attempt_count, result, created_at, updated_at, completed_at, run_at, owner_hash)
SELECT idemjob.uuid_v7(), 'owner-' || (i % 1000), 'key-' || i, 'charge',
	jsonb_build_object('amount', i, 'currency', 'EUR'), 'stripe',
	'succeeded', 1, 1, '{"charge": "ch_1"}', now() - interval '1 day',
	now() - interval '1 day', now() - interval '1 day', now() - interval '1 day',
	'owner-' || (i % 1000)
FROM generate_series(1, $N) i;
INSERT INTO idemjob.attempts (job_id, owner_id, attempt_no, provider, state,
	read_version, started_at, finished_at, owner_hash)
SELECT id, owner_id, 1, provider, 'succeeded', 0, completed_at, completed_at, owner_hash
FROM idemjob.jobs;
UPDATE idemjob.jobs j SET completed_by = a.id FROM idemjob.attempts a WHERE a.job_id = j.id;
RESET session_replication_role;
VACUUM ANALYZE idemjob.jobs, idemjob.attempts;
SELECT pg_size_pretty(pg_relation_size('idemjob.jobs_final')) AS jobs_final_index,
	round(pg_relation_size('idemjob.jobs_final')::numeric / $N, 1) AS jobs_final_bytes_per_final_job,
	round(pg_total_relation_size('idemjob.jobs')::numeric / $N, 1) AS job_bytes_per_job_with_indexes;
EOF

# the views on 1M jobs and 1M attempts, 100 attempts in doubt, 1,000 due jobs
"${PSQL[@]}" -d $DB <<EOF
SELECT count(*) FROM generate_series(1, 1000) i,
	LATERAL idemjob.submit('v', 'due-' || i, 'charge', '{}', 'stripe') s;
SELECT count(*) FROM idemjob.jobs j, LATERAL idemjob.start_attempt(j.id) a,
	LATERAL idemjob.mark_unknown(a.id) u
WHERE j.owner_id = 'v' AND substr(j.idempotency_key, 5)::int <= 100;
ANALYZE idemjob.jobs, idemjob.attempts;
\\timing on
SELECT count(*) AS in_doubt FROM idemjob.in_doubt;
SELECT count(*) AS in_doubt FROM idemjob.in_doubt;
SELECT sum(due) AS due FROM idemjob.queue_stats;
SELECT sum(due) AS due FROM idemjob.queue_stats;
SELECT sum(attempts) AS attempts FROM idemjob.provider_stats;
SELECT sum(attempts) AS attempts FROM idemjob.provider_stats;
EOF

# W1 alone, then W1 while a purge loop runs: TPS ratio and purge rate
w1() {	# pgbench's TPS at $1 clients
	"$PGBENCH" -n -M prepared -c "$1" -j "$1" -T "$W1_SECONDS" \
		-f "$HERE/workloads/idemjob/submit_new.sql" $DB 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p'
}
spent() { "${PSQL[@]}" -d $DB -At -c "SELECT count(*) FROM idemjob.spent_keys"; }
if [ "$W1_SECONDS" -gt 0 ]; then
	for c in $W1_CLIENTS; do
	for pause in $PAUSES; do
		# alone just before, so that the table's growth hits both alike
		"${PSQL[@]}" -d $DB -c "CHECKPOINT"
		tps0=$(w1 "$c")
		echo "W1 alone: $tps0 TPS ($c clients, ${W1_SECONDS} s)"
		k0=$(spent)
		# the purge session: one purge per statement, each its own transaction
		{ echo "SET idemjob.purge_pause = '$pause';"
		  for _ in $(seq 1 $(( N / BATCH + 1 ))); do echo "SELECT idemjob.purge('1 hour', $BATCH);"; done
		} | "${PSQL[@]}" -d $DB -At >/dev/null 2>&1 &
		ppid=$!
		t0=$(date +%s.%N)
		tps=$(w1 "$c")
		kill "$ppid" 2>/dev/null || true; wait "$ppid" 2>/dev/null || true
		"${PSQL[@]}" -d $DB -At -c "SELECT count(pg_catalog.pg_cancel_backend(pid)) FROM pg_stat_activity
			WHERE datname = '$DB' AND query LIKE 'SELECT idemjob.purge%' AND pid <> pg_backend_pid()" >/dev/null
		t1=$(date +%s.%N)
		k1=$(spent)
		echo "W1 during purge ($c clients, batch $BATCH, purge_pause $pause): $tps TPS = $(echo "scale=2; $tps / $tps0" | bc) x alone;" \
			"purged $((k1 - k0)) jobs meanwhile: $(echo "($k1 - $k0) / ($t1 - $t0)" | bc) jobs/s;" \
			"left: $("${PSQL[@]}" -d $DB -At -c "SELECT count(*) FROM idemjob.jobs WHERE owner_id LIKE 'owner-%'") final jobs"
	done
	done
fi

start=$(date +%s.%N)
total=0
while :; do
	n=$("${PSQL[@]}" -d $DB -At -c "SELECT idemjob.purge('1 hour', $BATCH)")
	total=$((total + n))
	[ "$n" -eq 0 ] && break
done
end=$(date +%s.%N)
echo "purged $total jobs in $(echo "$end - $start" | bc) s: $(echo "$total / ($end - $start)" | bc) jobs/s (batch $BATCH)"

"${PSQL[@]}" -d $DB <<EOF
VACUUM ANALYZE idemjob.spent_keys;
SELECT count(*) AS spent_keys,
	pg_relation_size('idemjob.spent_keys') AS table_bytes,
	pg_indexes_size('idemjob.spent_keys') AS index_bytes,
	round(pg_relation_size('idemjob.spent_keys')::numeric / count(*), 1) AS table_bytes_per_key,
	round(pg_total_relation_size('idemjob.spent_keys')::numeric / count(*), 1) AS total_bytes_per_key
FROM idemjob.spent_keys;
SELECT count(*) AS race_log_rows FROM idemjob.race_log;

-- live keys to replay
SELECT count(*) FROM generate_series(1, $REPLAYS) i,
	LATERAL idemjob.submit('live-' || (i % 1000), 'key-' || i, 'charge',
		jsonb_build_object('amount', i, 'currency', 'EUR'), 'stripe') s;
CREATE FUNCTION pg_temp.loop(prefix text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
	t0 timestamptz := clock_timestamp();
	errs int := 0;
BEGIN
	FOR i IN 1..$REPLAYS LOOP
		BEGIN
			PERFORM idemjob.submit(prefix || (i % 1000), 'key-' || i, 'charge',
				jsonb_build_object('amount', i, 'currency', 'EUR'), 'stripe');
		EXCEPTION WHEN sqlstate 'IJ007' THEN
			errs := errs + 1;
		END;
	END LOOP;
	RETURN pg_catalog.format('%s: %s us per submit, %s IJ007',
		prefix, round(extract(epoch FROM clock_timestamp() - t0) * 1e6 / $REPLAYS, 1), errs);
END \$\$;
SELECT pg_temp.loop('live-');
SELECT pg_temp.loop('owner-');
SELECT pg_temp.loop('live-');
SELECT pg_temp.loop('owner-');
EOF
