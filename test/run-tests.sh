#!/usr/bin/env bash
# test/run-tests.sh: every test of idemjob, on a throw-away cluster.
#
#   bash test/run-tests.sh
#
# As root on a fresh Debian 12 machine it installs what it needs from
# Debian's packages, builds and installs the extension (-Wall -Wextra
# -Werror), starts a cluster owned by the postgres user, and runs:
#   pg_regress suites and isolation specs (make installcheck), pgTAP,
#   the same in the partitioned layout, idemjob distributed on a Citus
#   cluster (Citus built once per machine and cached), the
#   JSON-Schema-Test-Suite, the hostile-input battery, the client
#   examples and the client packages' own suites, the Prometheus
#   exporter on the monitoring queries, and the short versions
#   of the soak, the pooler run, the TAP tests (crash, failover, sweeper,
#   pg_cron, dead clients, kill points) and the benchmark.
# It prints one line per stage and exits non-zero if any stage failed.

cd "$(dirname "$0")/.."
source test/lib.sh

ij_install_packages
ij_build_install
ij_start_cluster "${IDEMJOB_TEST_PORT:-5499}"

# the partitioned layout (docs/scaling.md): every database the suites
# create makes jobs, attempts, race_log and spent_keys hash-partitioned by
# owner_hash, 4 partitions each
partitioned_layout() {
	local rc=0 i
	psql -Xq -d postgres -c "ALTER SYSTEM SET idemjob.partitions = 4" -c "SELECT pg_reload_conf()" >/dev/null || return 1
	for i in $(seq 50); do
		[ "$(psql -XAt -d postgres -c 'SHOW idemjob.partitions')" = 4 ] && break
		sleep 0.1
	done
	ij_regress && ij_pgtap && bash test/dump/run.sh || rc=1
	psql -Xq -d postgres -c "ALTER SYSTEM RESET idemjob.partitions" -c "SELECT pg_reload_conf()" >/dev/null || rc=1
	return $rc
}

json_schema_suite() {
	ij_fresh_db idemjob_jsonschema && PGDATABASE=idemjob_jsonschema perl test/jsonschema/run.pl
}

ij_stage "pg_regress and isolation (make installcheck)" ij_regress
ij_stage "docs/reference.md against the catalog" bash test/reference/run.sh
ij_stage "docs: every relative link leads to a file and heading" python3 test/docs/links.py
ij_stage "pgTAP (pg_prove)" ij_pgtap
ij_stage "dump and restore (pg_dump -Fp | psql, pg_dump -Fc + pg_restore)" bash test/dump/run.sh
ij_stage "partitioned layout, idemjob.partitions = 4 (pg_regress, isolation, pgTAP, dump and restore)" partitioned_layout
ij_stage "Citus: a coordinator and 2 workers, idemjob distributed (guarantees, one shard per call)" bash test/citus/run.sh 5750
ij_stage "upgrade from 1.0 (ALTER EXTENSION UPDATE, whole suite on the result)" bash test/upgrade/run.sh
ij_stage "upgrade from 1.1 (rights left by a DBA, whole suite on the result)" bash test/upgrade/from_1_1.sh
ij_stage "JSON-Schema-Test-Suite (draft 2020-12)" json_schema_suite
ij_stage "hostile-input battery" bash test/hostile/run.sh
ij_stage "soak with history checker (short)" bash test/soak/run.sh --short
ij_stage "through pgbouncer, transaction pooling" bash test/pgbouncer/run.sh
ij_stage "client examples (Python, Node, Go; direct and through pgbouncer)" bash test/examples/run.sh
ij_stage "client packages: pytest, node --test, go test (direct and through pgbouncer)" bash test/clients/run.sh
ij_stage "Prometheus exporter with examples/monitoring/queries.yaml (/metrics checked)" bash test/monitoring/run.sh
ij_stage "crash recovery, replica failover, sweeper and pg_cron (TAP)" bash test/t/run.sh
ij_stage "benchmark smoke run" env BENCH_PORT=5767 bash bench/run.sh --smoke --no-install
ij_stage "PostgreSQL 17 and 18 (Debian chroots: regress, isolation, pgTAP, upgrade, dump; a 15 dump restored)" bash test/versions/run.sh

ij_stages_summary
