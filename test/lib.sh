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

# packages needed to build, test and run the scenario
IDEMJOB_PACKAGES="postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
	postgresql-contrib postgresql-$PG_MAJOR-pgtap libtap-parser-sourcehandler-pgtap-perl
	libipc-run-perl libtest-json-schema-acceptance-perl libjson-perl
	postgresql-$PG_MAJOR-cron build-essential pgbouncer
	python3-psycopg golang-go golang-github-jackc-pgx-v4-dev jq"

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
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
