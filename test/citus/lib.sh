# test/citus/lib.sh: sourced by the Citus test scripts (test/citus/*.sh).
# shellcheck shell=bash
#
# Installs Citus into a PostgreSQL from a cached tarball of its installed
# files (built once per machine from ../shared/vendor/citus), and runs a
# throw-away Citus cluster on one machine: a coordinator and N workers,
# each its own initdb, belonging to the "postgres" user like test/lib.sh's
# cluster, reachable over a Unix socket in the cluster's directory and over
# TCP on 127.0.0.1 (Citus's nodes talk to each other over TCP).
#
# Needs test/lib.sh (ij_log, ij_as_postgres, ij_install_packages): sourced
# here when the caller has not.

set -euo pipefail

IJ_CITUS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -F ij_as_postgres >/dev/null || . "$IJ_CITUS_LIB_DIR/../lib.sh"

: "${IJ_CITUS_VERSION:=13.2.2}"
: "${IJ_CITUS_CACHE:=/var/cache/idemjob/citus}"
# what Citus needs to build against PostgreSQL 15 on Debian 12 (the vendor
# README): libkrb5-dev because libpq-be.h includes gssapi/gssapi.h
: "${IJ_CITUS_PACKAGES:=libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev}"

# the vendor directory: ../shared/vendor/citus beside the checkout, or
# $IDEMJOB_CITUS_SRC
ij_citus_src() {
	local top dir
	top=$(git -C "$IJ_CITUS_LIB_DIR" rev-parse --show-toplevel 2>/dev/null || true)
	for dir in ${top:+"$top/../shared/vendor/citus"} ${IDEMJOB_CITUS_SRC:+"$IDEMJOB_CITUS_SRC"}; do
		if [ -f "$dir/citus-$IJ_CITUS_VERSION.tar.gz" ]; then
			(cd "$dir" && pwd)
			return 0
		fi
	done
	echo "citus-$IJ_CITUS_VERSION.tar.gz not found in ../shared/vendor/citus nor in \$IDEMJOB_CITUS_SRC" >&2
	return 1
}

# the vendor patches, in the order they apply (none is fine)
ij_citus_patches() {
	local src=$1 p
	for p in "$src"/*.patch; do
		[ -f "$p" ] && printf '%s\n' "$p"
	done
	return 0
}

# ij_citus_cache_key PG_CONFIG: citus-VERSION-pgMINOR-PATCHSHA (the first 12
# hex digits of the sha256 of the patch set, "nopatch" without one).  The
# tarball holds absolute paths, so it also carries the pkglibdir's hash:
# a build for /usr/lib/postgresql/15 is not one for a relocated copy.
ij_citus_cache_key() {
	local pg_config=$1 src minor patches sum paths p
	src=$(ij_citus_src)
	minor=$("$pg_config" --version | awk '{print $2}')
	patches=$(ij_citus_patches "$src")
	if [ -n "$patches" ]; then
		sum=$(while read -r p; do cat "$p"; done <<<"$patches" | sha256sum | cut -c1-12)
	else
		sum=nopatch
	fi
	paths=$("$pg_config" --pkglibdir --sharedir --includedir-server | sha256sum | cut -c1-8)
	echo "citus-$IJ_CITUS_VERSION-pg$minor-$sum-$paths"
}

# ij_citus_install PG_CONFIG: install Citus into that PostgreSQL, from the
# cache (a tar of exactly the files `make install` writes, unpacked onto /),
# building it first on a miss (~3 min with make -j2 on quiet cores; set
# IJ_CITUS_MAKE="nice -n 19 make -j1" to spare a busy machine)
ij_citus_install() {
	local pg_config=${1:?ij_citus_install PG_CONFIG}
	local key tarball src work
	key=$(ij_citus_cache_key "$pg_config")
	tarball=$IJ_CITUS_CACHE/$key.tar.gz
	if [ ! -f "$tarball" ]; then
		ij_log "building Citus $IJ_CITUS_VERSION for $("$pg_config" --version) (cache miss: $tarball)"
		# shellcheck disable=SC2086 # a list of names
		ij_install_packages $IJ_CITUS_PACKAGES
		src=$(ij_citus_src)
		work=$(mktemp -d /tmp/idemjob-citus-build.XXXXXX)
		tar -xzf "$src/citus-$IJ_CITUS_VERSION.tar.gz" -C "$work"
		local p
		while read -r p; do
			[ -z "$p" ] || (cd "$work/citus-$IJ_CITUS_VERSION" && patch -s -p1 <"$p")
		done <<<"$(ij_citus_patches "$src")"
		(
			cd "$work/citus-$IJ_CITUS_VERSION"
			./configure -q PG_CONFIG="$pg_config" >"$work/configure.log" 2>&1 ||
				{ tail -30 "$work/configure.log" >&2; exit 1; }
			${IJ_CITUS_MAKE:-make -j2} >"$work/make.log" 2>&1 ||
				{ tail -30 "$work/make.log" >&2; exit 1; }
		)
		ij_citus_seed "$pg_config" "$work/citus-$IJ_CITUS_VERSION"
		rm -rf "$work"
	fi
	local t0=$SECONDS
	tar -xzf "$tarball" -C / --no-overwrite-dir
	ij_log "Citus $IJ_CITUS_VERSION installed from $tarball ($((SECONDS - t0)) s)"
}

# ij_citus_seed PG_CONFIG BUILD_DIR: make the cache tarball from a Citus
# tree already built (configured) with that PG_CONFIG: `make install` into a
# staging directory, tar what landed there.  Used by ij_citus_install, and
# by hand to seed the cache from an existing build.
ij_citus_seed() {
	local pg_config=$1 build=$2 key stage configured
	configured=$(sed -n "s/^PG_CONFIG *:*= *//p" "$build/Makefile.global" 2>/dev/null || true)
	if [ "$configured" != "$pg_config" ]; then
		echo "$build is configured for PG_CONFIG=$configured, not $pg_config" >&2
		return 1
	fi
	key=$(ij_citus_cache_key "$pg_config")
	stage=$(mktemp -d /tmp/idemjob-citus-stage.XXXXXX)
	make -C "$build" -s install DESTDIR="$stage" >"$stage.log" 2>&1 ||
		{ tail -30 "$stage.log" >&2; return 1; }
	rm -f "$stage.log"
	mkdir -p "$IJ_CITUS_CACHE"
	# files and links only: unpacked onto /, directory entries would rewrite
	# the metadata of /usr and the like
	(cd "$stage" && find . ! -type d -print0 | LC_ALL=C sort -z) |
		tar -czf "$IJ_CITUS_CACHE/$key.tar.gz.tmp" -C "$stage" --owner=0 --group=0 \
			--null --no-recursion -T -
	mv "$IJ_CITUS_CACHE/$key.tar.gz.tmp" "$IJ_CITUS_CACHE/$key.tar.gz"
	rm -rf "$stage"
	ij_log "cached Citus as $IJ_CITUS_CACHE/$key.tar.gz"
}

# ij_citus_start BASEPORT [NWORKERS=2]: a coordinator on BASEPORT and
# workers on BASEPORT+1..BASEPORT+NWORKERS, each with Citus preloaded (and
# $IJ_CITUS_PRELOAD after it, e.g. idemjob), trust on the Unix socket and
# 127.0.0.1; CREATE EXTENSION citus in $IJ_CITUS_DB (default postgres, created
# when missing) on every node, the coordinator's host set and the workers
# added.  $IJ_CITUS_CONF: more postgresql.conf lines for every node.
# Uses PG_BIN (test/lib.sh) unless IJ_CITUS_BIN names another bin directory.
# Exports PGHOST, PGPORT (the coordinator), PGUSER, PGDATABASE and
# IJ_CITUS_PORTS (all nodes, coordinator first).
ij_citus_start() {
	local base=${1:?ij_citus_start BASEPORT [NWORKERS]} nworkers=${2:-2}
	local bin=${IJ_CITUS_BIN:-$PG_BIN} db=${IJ_CITUS_DB:-postgres}
	local preload=citus i port
	[ -z "${IJ_CITUS_PRELOAD:-}" ] || preload="citus,$IJ_CITUS_PRELOAD"
	IJ_CITUS_DIR=$(mktemp -d /tmp/idemjob-citus.XXXXXX)
	chown postgres: "$IJ_CITUS_DIR" 2>/dev/null || true
	chmod 755 "$IJ_CITUS_DIR"
	trap ij_citus_stop EXIT
	IJ_CITUS_PORTS=()
	for ((i = 0; i <= nworkers; i++)); do
		port=$((base + i))
		IJ_CITUS_PORTS+=("$port")
		ij_as_postgres "$bin/initdb" -D "$IJ_CITUS_DIR/n$i" -U postgres -A trust \
			--no-sync -E UTF8 --locale=C >/dev/null
		cat >>"$IJ_CITUS_DIR/n$i/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$IJ_CITUS_DIR'
fsync = off
max_connections = 200
max_prepared_transactions = 100
# a maintenance daemon per database with Citus, and the sweepers
max_worker_processes = 32
shared_preload_libraries = '$preload'
log_min_messages = warning
citus.shard_replication_factor = 1
${IJ_CITUS_CONF:-}
CONF
		# initdb -A trust already trusts local and 127.0.0.1; say it anyway,
		# first, so that nothing later in the file can shadow it
		{
			echo "local all all trust"
			echo "host all all 127.0.0.1/32 trust"
			cat "$IJ_CITUS_DIR/n$i/pg_hba.conf"
		} >"$IJ_CITUS_DIR/n$i/pg_hba.conf.new"
		mv "$IJ_CITUS_DIR/n$i/pg_hba.conf.new" "$IJ_CITUS_DIR/n$i/pg_hba.conf"
		chown postgres: "$IJ_CITUS_DIR/n$i/pg_hba.conf" 2>/dev/null || true
		if ! ij_as_postgres "$bin/pg_ctl" -D "$IJ_CITUS_DIR/n$i" -l "$IJ_CITUS_DIR/n$i.log" -w start >/dev/null; then
			echo "node $i (port $port) did not start:" >&2
			tail -20 "$IJ_CITUS_DIR/n$i.log" >&2
			return 1
		fi
	done
	export PGHOST=$IJ_CITUS_DIR PGPORT=$base PGUSER=postgres PGDATABASE=$db
	ij_citus_db "$db" || return 1
	ij_log "Citus cluster up: coordinator $base, workers ${IJ_CITUS_PORTS[*]:1} ($IJ_CITUS_DIR)"
}

# ij_citus_db DB: on every node of the cluster, database DB (created when
# missing) with CREATE EXTENSION citus; the coordinator's host set and the
# workers added
ij_citus_db() {
	local db=$1 bin=${IJ_CITUS_BIN:-$PG_BIN} port
	for port in "${IJ_CITUS_PORTS[@]}"; do
		if [ "$db" != postgres ] &&
			[ -z "$("$bin/psql" -X -q -A -t -h "$IJ_CITUS_DIR" -p "$port" -U postgres -d postgres \
				-c "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]; then
			"$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$IJ_CITUS_DIR" -p "$port" -U postgres -d postgres \
				-c "CREATE DATABASE \"$db\"" >/dev/null || return 1
		fi
		PGDATABASE=$db ij_citus_psql "$port" -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null || return 1
	done
	PGDATABASE=$db ij_citus_psql "${IJ_CITUS_PORTS[0]}" \
		-c "SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', ${IJ_CITUS_PORTS[0]})" >/dev/null || return 1
	for port in "${IJ_CITUS_PORTS[@]:1}"; do
		PGDATABASE=$db ij_citus_psql "${IJ_CITUS_PORTS[0]}" \
			-c "SELECT pg_catalog.citus_add_node('127.0.0.1', $port)" >/dev/null || return 1
	done
}

# ij_citus_psql PORT ARGS...: psql on one node of the cluster, in $PGDATABASE,
# stopping at the first error
ij_citus_psql() {
	local port=$1
	shift
	"${IJ_CITUS_BIN:-$PG_BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "$IJ_CITUS_DIR" -p "$port" \
		-U postgres -d "${PGDATABASE:-postgres}" "$@"
}

# ij_citus_stop: stop every node and remove the cluster (kept with
# IJ_KEEP_CLUSTER=1, logs included)
ij_citus_stop() {
	local bin=${IJ_CITUS_BIN:-$PG_BIN} d
	if [ -n "${IJ_CITUS_DIR:-}" ] && [ -d "$IJ_CITUS_DIR" ]; then
		for d in "$IJ_CITUS_DIR"/n*/; do
			[ -f "$d/postmaster.pid" ] || continue
			ij_as_postgres "$bin/pg_ctl" -D "$d" -m fast -w stop >/dev/null 2>&1 || true
		done
		if [ "${IJ_KEEP_CLUSTER:-}" = "" ]; then
			rm -rf "$IJ_CITUS_DIR"
		fi
	fi
}
