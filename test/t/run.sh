#!/usr/bin/env bash
# test/t/run.sh [test ...]: run the TAP tests (PostgreSQL::Test::Cluster).
#
# The tests create their own clusters (ports 5610-5629, Unix sockets in
# private temporary directories).  PostgreSQL refuses to run as root, so
# when started as root this copies test/t to a directory the postgres user
# owns and runs prove there as postgres.  The binaries are those of
# PG_CONFIG (default: pg_config on PATH, else /usr/lib/postgresql/15/bin),
# with idemjob and amcheck installed into them.
# Needs: libipc-run-perl, postgresql-contrib (amcheck); postgresql-15-cron
# for 040_pg_cron.pl (skipped without it).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}
bindir=$("$PG_CONFIG" --bindir)
pgxs=$(dirname "$("$PG_CONFIG" --pgxs)")/..
perl_lib=$(cd "$pgxs/test/perl" && pwd)
pg_regress=$(cd "$pgxs/test/regress" && pwd)/pg_regress

tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(t/*.pl)

# 040_pg_cron.pl runs the pg_cron recipe of docs/operations.md as written
ops=$(cd "$here/../.." && pwd)/docs/operations.md

run() {
	cd "$1"
	PATH="$bindir:$PATH" PG_REGRESS="$pg_regress" IDEMJOB_OPERATIONS="$ops" \
		prove -v -I "$perl_lib" -I "$1/t" "${tests[@]}"
}

if [ "$(id -u)" = 0 ]; then
	copy=$(mktemp -d /tmp/idemjob-tap.XXXXXX)
	mkdir -p "$copy/t"
	cp -a "$here"/*.pl "$here"/*.pm "$copy/t/"
	cp "$ops" "$copy/operations.md"
	chown -R postgres: "$copy"
	rc=0
	runuser -u postgres -- env PATH="$bindir:$PATH" PG_REGRESS="$pg_regress" \
		IDEMJOB_OPERATIONS="$copy/operations.md" \
		bash -c "cd '$copy' && prove -v -I '$perl_lib' -I '$copy/t' ${tests[*]}" || rc=$?
	if [ $rc -ne 0 ] && [ -d "$copy/tmp_check/log" ]; then
		echo "logs kept in $copy/tmp_check/log" >&2
	else
		rm -rf "$copy"
	fi
	exit $rc
else
	copy=$(cd "$here/.." && pwd)
	run "$copy"
fi
