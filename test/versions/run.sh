#!/usr/bin/env bash
# test/versions/run.sh: idemjob on the PostgreSQL of newer Debian releases.
#
#   bash test/versions/run.sh [MAJOR...]      (default: 17 18)
#
# PostgreSQL 15 is this machine's (Debian 12); test/run-tests.sh tests it
# directly.  For each other major version this script, as root:
#   1. makes a Debian chroot with debootstrap (17: trixie, 18: sid), once:
#      it is kept in $IDEMJOB_CHROOT_CACHE (/var/cache/idemjob/chroots) and
#      reused by later runs on the same machine, refreshed when a week old;
#   2. installs there that release's postgresql-N, its headers, pgTAP and
#      its own gcc (Debian's packages), copies this tree in, builds it with
#      -Werror and installs it;
#   3. runs, on a throw-away cluster of that version (test/versions/inside.sh):
#      pg_regress and the isolation specs (make installcheck), pgTAP, the
#      upgrade from 1.0, dump and restore on that version, and a restore
#      onto it of a dump of the PostgreSQL 15 cluster made with that
#      version's pg_dump (when PGHOST/PGPORT name a running 15 cluster with
#      idemjob installed, as test/run-tests.sh exports them).
# Prints one line per stage and a summary; exits non-zero if any failed.

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/test/lib.sh"	# ij_log, ij_stage, ij_stages_summary
set +e
cache=${IDEMJOB_CHROOT_CACHE:-/var/cache/idemjob/chroots}
mirror=${IDEMJOB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(17 18)

suite_of() {
	case $1 in
		17) echo trixie ;;
		18) echo sid ;;
		*) return 1 ;;
	esac
}

if [ "$(id -u)" != 0 ]; then
	echo "versions: needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null; then
	ij_log "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; } ||
		exit 1
fi

# make_chroot SUITE: $cache/SUITE, made once; a half-made one is never used
make_chroot() {
	local dir=$cache/$1
	if [ -f "$dir/.idemjob-chroot" ]; then
		return 0
	fi
	rm -rf --one-file-system "$dir.tmp"
	mkdir -p "$cache"
	ij_log "debootstrap $1 (kept in $dir for later runs)"
	debootstrap --variant=minbase "$1" "$dir.tmp" "$mirror" >"$cache/$1.debootstrap.log" 2>&1 ||
		{ tail -20 "$cache/$1.debootstrap.log"; return 1; }
	# no service starts inside, and no cluster is made by the package
	printf '#!/bin/sh\nexit 101\n' >"$dir.tmp/usr/sbin/policy-rc.d"
	chmod 755 "$dir.tmp/usr/sbin/policy-rc.d"
	# the mirror reached here may serve a Release file past its Valid-Until
	echo 'Acquire::Check-Valid-Until "false";' >"$dir.tmp/etc/apt/apt.conf.d/99idemjob"
	mkdir -p "$dir.tmp/etc/postgresql-common"
	echo "create_main_cluster = false" >"$dir.tmp/etc/postgresql-common/createcluster.conf"
	touch "$dir.tmp/.idemjob-chroot"
	mv "$dir.tmp" "$dir"
}

mounted=()
mount_in() {	# mount_in TARGET ARGS...: mount, and remember to unmount
	local target=$1
	shift
	mkdir -p "$target"
	mount "$@" "$target" && mounted=("$target" "${mounted[@]}")
}
unmount_all() {
	local m
	for m in "${mounted[@]}"; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	mounted=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# one_version MAJOR
one_version() {
	local v=$1 suite dir port
	suite=$(suite_of "$v") || { echo "no Debian release for PostgreSQL $v" >&2; return 1; }
	dir=$cache/$suite
	make_chroot "$suite" || return 1

	mount_in "$dir/proc" -t proc proc || return 1
	mount_in "$dir/dev/shm" -t tmpfs -o size=1g tmpfs || return 1
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null

	# the 15 cluster of test/run-tests.sh, seen from inside at /run/ij-src
	local src_env=()
	if [ -n "${PGHOST:-}" ] && [ -d "${PGHOST:-}" ] && [ -n "${PGPORT:-}" ]; then
		mount_in "$dir/run/ij-src" --bind "$PGHOST" || return 1
		src_env=(IJ_DUMP_SOURCE_HOST=/run/ij-src IJ_DUMP_SOURCE_PORT="$PGPORT")
	fi

	# this tree, as committed and as it is now (the upgrade test reads git)
	rm -rf --one-file-system "$dir/build/idemjob"
	mkdir -p "$dir/build/idemjob"
	tar -C "$repo" --exclude='./results' --exclude='./output_iso' --exclude='*.o' \
		--exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$dir/build/idemjob" -xf - || return 1

	port=$((5510 + v))
	local rc=0
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		PG_MAJOR="$v" IDEMJOB_TEST_PORT="$port" "${src_env[@]}" \
		bash /build/idemjob/test/versions/inside.sh || rc=$?
	unmount_all
	return $rc
}

for v in "${versions[@]}"; do
	ij_stage "PostgreSQL $v ($(suite_of "$v" || echo '?') chroot)" one_version "$v"
done

ij_stages_summary
