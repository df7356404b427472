#!/bin/bash
# test/citus/smoke.sh [BASEPORT]: self-check of test/citus/lib.sh.  Installs
# Citus (from the cache, building it on a miss), starts a coordinator and
# two workers, creates a distributed and a reference table through the
# coordinator, reads them back, checks that the coordinator sees two active
# workers, and stops the cluster.
#
# IJ_CITUS_BIN=/path/to/bin runs against another PostgreSQL build than
# Debian's postgresql-$PG_MAJOR (its pg_config names where Citus goes).

set -euo pipefail
cd "$(dirname "$0")/../.."
. test/citus/lib.sh

base=${1:-5740}
ij_citus_install "${IJ_CITUS_BIN:-$PG_BIN}/pg_config"
ij_citus_start "$base" 2

ij_log "distributed and reference tables"
out=$(ij_citus_psql "$base" -At <<'SQL'
CREATE TABLE smoke_dist (tenant int4 NOT NULL, id int8 NOT NULL, v text, PRIMARY KEY (tenant, id));
SELECT pg_catalog.create_distributed_table('smoke_dist', 'tenant', shard_count => 8);
CREATE TABLE smoke_ref (k int4 PRIMARY KEY, name text);
SELECT pg_catalog.create_reference_table('smoke_ref');
INSERT INTO smoke_dist SELECT t, i, 'v' || t || '/' || i FROM generate_series(1, 20) t, generate_series(1, 5) i;
INSERT INTO smoke_ref SELECT k, 'name' || k FROM generate_series(1, 20) k;
SELECT 'dist', count(*), count(DISTINCT tenant) FROM smoke_dist;
SELECT 'join', count(*) FROM smoke_dist d JOIN smoke_ref r ON r.k = d.tenant;
SELECT 'one', v FROM smoke_dist WHERE tenant = 7 AND id = 3;
SELECT 'workers', count(*) FROM pg_catalog.citus_get_active_worker_nodes();
SELECT 'placements', count(DISTINCT nodeport) FROM pg_catalog.pg_dist_shard_placement
 WHERE shardid IN (SELECT shardid FROM pg_catalog.pg_dist_shard WHERE logicalrelid = 'smoke_dist'::regclass);
SQL
)
out=$(printf "%s\n" "$out" | sed "/^$/d")  # the void results
echo "$out"
expected='dist|100|20
join|100
one|v7/3
workers|2
placements|2'
if [ "$out" != "$expected" ]; then
	echo "smoke: unexpected output; expected:" >&2
	echo "$expected" >&2
	exit 1
fi
# the reference table is on every node, including the workers
for port in "${IJ_CITUS_PORTS[@]:1}"; do
	n=$(ij_citus_psql "$port" -At -c "SELECT count(*) FROM smoke_ref")
	[ "$n" = 20 ] || { echo "smoke: worker $port sees $n reference rows" >&2; exit 1; }
done
ij_citus_stop
ij_log "smoke: ok"
