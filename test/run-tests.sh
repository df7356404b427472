#!/usr/bin/env bash
# test/run-tests.sh: every test of idemjob, on a throw-away cluster.
#
#   bash test/run-tests.sh
#
# As root on a fresh Debian 12 machine it installs what it needs from
# Debian's packages, builds and installs the extension (-Wall -Wextra
# -Werror), starts a cluster owned by the postgres user, and runs:
#   pg_regress suites and isolation specs (make installcheck), pgTAP,
#   the JSON-Schema-Test-Suite, the hostile-input battery, and the short
#   versions of the soak, the pooler run, the TAP tests (crash, failover,
#   sweeper, pg_cron) and the benchmark.
# It prints one line per stage and exits non-zero if any stage failed.

cd "$(dirname "$0")/.."
source test/lib.sh

ij_install_packages
ij_build_install
ij_start_cluster "${IDEMJOB_TEST_PORT:-5499}"

passed=0
failed=0
failed_names=()

# stage NAME COMMAND...: run one stage, record its result
stage() {
	local name=$1
	shift
	ij_log "$name"
	local t0=$SECONDS
	if "$@"; then
		passed=$((passed + 1))
		echo "--- $name: ok ($((SECONDS - t0))s)"
	else
		failed=$((failed + 1))
		failed_names+=("$name")
		echo "--- $name: FAILED ($((SECONDS - t0))s)"
	fi
}

regress() {
	rm -rf results output_iso regression.diffs regression.out
	if make -s installcheck PG_CONFIG="$PG_CONFIG"; then
		return 0
	fi
	cat regression.diffs output_iso/regression.diffs 2>/dev/null | head -300
	return 1
}

# fresh_db NAME: a new database with the extension
fresh_db() {
	psql -Xq -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" &&
		psql -Xq -d "$1" -c "CREATE EXTENSION idemjob"
}

pgtap() {
	fresh_db idemjob_tap && pg_prove -d idemjob_tap test/pgtap/*.sql
}

json_schema_suite() {
	fresh_db idemjob_jsonschema && PGDATABASE=idemjob_jsonschema perl test/jsonschema/run.pl
}

stage "pg_regress and isolation (make installcheck)" regress
stage "pgTAP (pg_prove)" pgtap
stage "dump and restore (pg_dump -Fp | psql, pg_dump -Fc + pg_restore)" bash test/dump/run.sh
stage "upgrade from 1.0 (ALTER EXTENSION UPDATE, whole suite on the result)" bash test/upgrade/run.sh
stage "JSON-Schema-Test-Suite (draft 2020-12)" json_schema_suite
stage "hostile-input battery" bash test/hostile/run.sh
stage "soak with history checker (short)" bash test/soak/run.sh --short
stage "through pgbouncer, transaction pooling" bash test/pgbouncer/run.sh
stage "client examples (Python, Node, Go; direct and through pgbouncer)" bash test/examples/run.sh
stage "crash recovery, replica failover, sweeper and pg_cron (TAP)" bash test/t/run.sh
stage "benchmark smoke run" env BENCH_PORT=5767 bash bench/run.sh --smoke --no-install

echo
echo "stages: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
	printf 'failed: %s\n' "${failed_names[@]}"
	exit 1
fi
