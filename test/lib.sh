# test/lib.sh: shared by test/run-tests.sh and scenario/run.sh.
#
# Installs what idemjob needs from Debian's packages, builds and installs
# the extension, and runs a throw-away PostgreSQL cluster.  PostgreSQL
# refuses to run as root, so the cluster belongs to the "postgres" user
# (created by the Debian package); clients connect over a Unix socket in
# the cluster's own directory.

set -euo pipefail

: "${PG_MAJOR:=15}"
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
export PG_CONFIG=$PG_BIN/pg_config

# packages needed to build, test and run the scenario (a caller may name
# fewer: test/versions/inside.sh)
[ -n "${IDEMJOB_PACKAGES:-}" ] || IDEMJOB_PACKAGES="postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libkrb5-dev
	postgresql-contrib postgresql-$PG_MAJOR-pgtap libtap-parser-sourcehandler-pgtap-perl
	libipc-run-perl libtest-json-schema-acceptance-perl libjson-perl
	postgresql-$PG_MAJOR-cron build-essential pgbouncer
	python3-psycopg golang-go golang-github-jackc-pgx-v4-dev jq
	prometheus-postgres-exporter"

ij_log() { printf '\n=== %s\n' "$*"; }

ij_install_packages() {
	local missing=()
	local p
	for p in $IDEMJOB_PACKAGES "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		if [ "$(id -u)" != 0 ]; then
			echo "missing packages: ${missing[*]} (run as root to install them)" >&2
			exit 1
		fi
		ij_log "installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		# prometheus-postgres-exporter's package starts a service on port
		# 9187 as a role that does not exist: the tests start their own
		# exporter, so the package's may not start (a policy-rc.d, where the
		# machine has none, for the length of the install; systemd too)
		local policy=
		if [ ! -e /usr/sbin/policy-rc.d ]; then
			policy=/usr/sbin/policy-rc.d
			printf '%s\n' '#!/bin/sh' '# test/lib.sh, while it installs packages' \
				'case "$1" in prometheus-postgres-exporter) exit 101 ;; esac' 'exit 0' >"$policy"
			chmod 755 "$policy"
		fi
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		[ -z "$policy" ] || rm -f "$policy"
		if [ -d /run/systemd/system ] && systemctl is-enabled --quiet prometheus-postgres-exporter 2>/dev/null; then
			systemctl disable --now --quiet prometheus-postgres-exporter || true
		fi
	fi
}

ij_build_install() {
	ij_log "building and installing idemjob"
	make -s clean >/dev/null
	make -s PG_CONFIG="$PG_CONFIG"
	make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
}

# ij_start_cluster PORT: initdb + start; exports PGHOST, PGPORT, PGUSER
ij_start_cluster() {
	local port=$1
	IJ_CLUSTER_DIR=$(mktemp -d /tmp/idemjob-cluster.XXXXXX)
	chown postgres: "$IJ_CLUSTER_DIR" 2>/dev/null || true
	chmod 755 "$IJ_CLUSTER_DIR"
	ij_as_postgres "$PG_BIN/initdb" -D "$IJ_CLUSTER_DIR/data" -U postgres -A trust \
		--no-sync -E UTF8 --locale=C >/dev/null
	cat >>"$IJ_CLUSTER_DIR/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$IJ_CLUSTER_DIR'
fsync = off
max_connections = 100
max_prepared_transactions = 10
shared_preload_libraries = ''
log_min_messages = warning
CONF
	ij_as_postgres "$PG_BIN/pg_ctl" -D "$IJ_CLUSTER_DIR/data" -l "$IJ_CLUSTER_DIR/server.log" -w start >/dev/null
	export PGHOST=$IJ_CLUSTER_DIR PGPORT=$port PGUSER=postgres
	trap ij_stop_cluster EXIT
}

ij_stop_cluster() {
	if [ -n "${IJ_CLUSTER_DIR:-}" ] && [ -d "$IJ_CLUSTER_DIR/data" ]; then
		ij_as_postgres "$PG_BIN/pg_ctl" -D "$IJ_CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
		if [ "${IJ_KEEP_CLUSTER:-}" = "" ]; then
			rm -rf "$IJ_CLUSTER_DIR"
		fi
	fi
}

# run a command as the postgres user (or as is, when not root)
ij_as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# --- stages: test/run-tests.sh and test/versions/inside.sh

ij_passed=0
ij_failed=0
ij_failed_names=()

# ij_stage NAME COMMAND...: run one stage, print its result and time
ij_stage() {
	local name=$1
	shift
	ij_log "$name"
	local t0=$SECONDS
	if "$@"; then
		ij_passed=$((ij_passed + 1))
		echo "--- $name: ok ($((SECONDS - t0))s)"
	else
		ij_failed=$((ij_failed + 1))
		ij_failed_names+=("$name")
		echo "--- $name: FAILED ($((SECONDS - t0))s)"
	fi
}

# ij_stages_summary: the closing line; non-zero if any stage failed
ij_stages_summary() {
	echo
	echo "stages: $ij_passed passed, $ij_failed failed"
	if [ "$ij_failed" -gt 0 ]; then
		printf 'failed: %s\n' "${ij_failed_names[@]}"
		return 1
	fi
}

# the pg_regress suite and the isolation specs
ij_regress() {
	rm -rf results output_iso regression.diffs regression.out
	if make -s installcheck PG_CONFIG="$PG_CONFIG"; then
		return 0
	fi
	cat regression.diffs output_iso/regression.diffs 2>/dev/null | head -300
	return 1
}

# ij_fresh_db NAME: a new database with the extension
ij_fresh_db() {
	psql -Xq -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" &&
		psql -Xq -d "$1" -c "CREATE EXTENSION idemjob"
}

ij_pgtap() {
	ij_fresh_db idemjob_tap && pg_prove -d idemjob_tap test/pgtap/*.sql
}
