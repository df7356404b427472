#!/usr/bin/env bash
# test/versions/inside.sh: run by test/versions/run.sh inside a Debian chroot,
# as root, with PG_MAJOR set to that release's PostgreSQL.  Installs what the
# stages need from that release's packages (once: the chroot is kept),
# builds and installs idemjob with that release's gcc and -Werror, starts a
# throw-away cluster, and runs the version's stages.  With
# IJ_DUMP_SOURCE_HOST/PORT (the PostgreSQL 15 cluster outside), it also
# dumps a filled 15 database with this version's pg_dump and restores it
# here.

cd "$(dirname "$0")/../.."
export IDEMJOB_PACKAGES="postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libkrb5-dev
	postgresql-$PG_MAJOR-pgtap libtap-parser-sourcehandler-pgtap-perl
	build-essential git"
source test/lib.sh

# sid moves: a chroot a week old is brought up to date first
stamp=/var/lib/idemjob-apt-stamp
if [ ! -f $stamp ] || [ -n "$(find $stamp -mtime +7)" ]; then
	ij_log "apt-get update and upgrade ($(. /etc/os-release; echo "$PRETTY_NAME"))"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get -y -qq dist-upgrade >/dev/null &&
		touch $stamp
fi
ij_install_packages
echo "PostgreSQL: $("$PG_CONFIG" --version); $(gcc --version | head -1)"
ij_build_install
ij_start_cluster "$IDEMJOB_TEST_PORT"

ij_stage "PostgreSQL $PG_MAJOR: pg_regress and isolation (make installcheck)" ij_regress
ij_stage "PostgreSQL $PG_MAJOR: pgTAP (pg_prove)" ij_pgtap
ij_stage "PostgreSQL $PG_MAJOR: upgrade from 1.0" bash test/upgrade/run.sh
ij_stage "PostgreSQL $PG_MAJOR: upgrade from 1.1" bash test/upgrade/from_1_1.sh
ij_stage "PostgreSQL $PG_MAJOR: dump and restore" bash test/dump/run.sh
if [ -n "${IJ_DUMP_SOURCE_HOST:-}" ]; then
	ij_stage "PostgreSQL 15 dumped with $PG_MAJOR's pg_dump, restored on $PG_MAJOR" \
		bash test/dump/run.sh --source "$IJ_DUMP_SOURCE_HOST" "$IJ_DUMP_SOURCE_PORT"
fi
ij_stages_summary
